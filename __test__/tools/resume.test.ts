/**
 * State and resume in Node (issue 33), end to end: the real backend with
 * the host's store (`HOST_TOOLS_APP_STORE=1`: `state_store=host.state_store()`),
 * a scripted model whose `history` answer lists every user message it saw.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { memoryStore, RunError, SessionStartError, SnapshotText, StoreFailedError, type ConversationStore, type Snapshot } from "../../lib/index";
import { calls, closeServers, killBackends, sessionIn, START_MODES, type StartMode } from "./host-tools-harness";

afterEach(killBackends);
afterAll(closeServers);

const STORE = { HOST_TOOLS_APP_STORE: "1" };

async function threeTurns(mode: StartMode, store: ConversationStore): Promise<Snapshot> {
  const { session, kill } = await sessionIn(mode, { env: STORE, store });
  for (const text of ["one", "two", "three"]) expect(await session.run(text)).toMatchObject({ finalOutput: `You said: ${text}` });
  const snapshot = session.snapshot()!;
  expect(snapshot.revision).toBe(3);
  await kill();
  return snapshot;
}

describe.runIf(process.platform !== "win32").each(START_MODES)("state and resume, %s", (mode: StartMode) => {
  // A resume across a killed process, and what is refused before or at the
  // start, depend on how the backend starts: every mode. The store's
  // operations once the channel is placed are the same code in every mode:
  // cold and warm (the modes the package starts itself), not attached.
  const startedModes = it.runIf(mode !== "attached");
  it("three turns, the backend SIGKILLed, a session resumed from the snapshot answers turn four with turns one to three in its history", async () => {
    const snapshot = await threeTurns(mode, memoryStore().conversation("c1"));
    const { session } = await sessionIn(mode, { env: STORE, resume: snapshot, resumeAgentId: { type: "HostTools" } });
    expect(session.snapshot()?.revision).toBe(3);
    expect(await session.run("history")).toMatchObject({ finalOutput: "Seen 4 user messages: one | two | three | history" });
    expect(session.snapshot()?.revision).toBe(4);
    await session.close();
  });

  startedModes("the store alone continues: a new session on the same store sees the earlier turns", async () => {
    const store = memoryStore().conversation("c2");
    await threeTurns(mode, store);
    const { session } = await sessionIn(mode, { env: STORE, store });
    expect(await session.run("history")).toMatchObject({ finalOutput: "Seen 4 user messages: one | two | three | history" });
    expect((await store.load())?.revision).toBe(4);
    await session.close();
  });

  startedModes("two sessions resumed from one snapshot diverge without touching each other", async () => {
    const snapshot = await threeTurns(mode, memoryStore().conversation("c3"));
    const [a, b] = await Promise.all([sessionIn(mode, { env: STORE, resume: snapshot }), sessionIn(mode, { env: STORE, resume: JSON.stringify(snapshot) })]);
    await a.session.run("left");
    await b.session.run("right");
    expect(await a.session.run("history")).toMatchObject({ finalOutput: "Seen 5 user messages: one | two | three | left | history" });
    expect(await b.session.run("history")).toMatchObject({ finalOutput: "Seen 5 user messages: one | two | three | right | history" });
    await Promise.all([a.session.close(), b.session.close()]);
  });

  startedModes("reset deletes through the store", async () => {
    const store = memoryStore().conversation("c4");
    const { session } = await sessionIn(mode, { env: STORE, store });
    await session.run("one");
    expect(await store.load()).not.toBeNull();
    await session.reset();
    expect(await store.load()).toBeNull();
    expect(session.snapshot()).toBeNull();
    await session.close();
  });

  it("each committed run reaches saveText as the backend's checked text (revision first), never save(document); resume takes the SnapshotText", async () => {
    const inner = memoryStore().conversation("c8");
    const texts: SnapshotText[] = [];
    const store: ConversationStore = {
      load: (o) => inner.load(o),
      save: () => Promise.reject(new Error("save(document) called: the text path was not taken")),
      saveText: (s, o) => (texts.push(s), inner.saveText!(s, o)),
      delete: (o) => inner.delete(o),
    };
    const { session } = await sessionIn(mode, { env: STORE, store });
    for (const text of ["one", "two"]) await session.run(text);
    expect(texts.map((s) => [s instanceof SnapshotText, s.revision, s.agentId.type, s.text.startsWith(`{"revision":${s.revision},`)])).toEqual([
      [true, 1, "HostTools", true],
      [true, 2, "HostTools", true],
    ]);
    expect(session.snapshot()).toEqual(JSON.parse(texts[1]!.text));
    expect(await inner.load()).toEqual(session.snapshot());
    await session.close();
    const { session: resumed } = await sessionIn(mode, { env: STORE, resume: texts[1]! });
    expect(await resumed.run("history")).toMatchObject({ finalOutput: "Seen 3 user messages: one | two | history" });
    await resumed.close();
  });

  startedModes("a cancelled run and a failed run (its save fails) leave the last committed snapshot unchanged; the failure says why", async () => {
    const inner = memoryStore().conversation("c5");
    let failSaves = false;
    const store: ConversationStore = {
      load: (o) => inner.load(o),
      save: (s, o) => (failSaves ? Promise.reject(new StoreFailedError("save", "c5", "disk full")) : inner.save(s, o)),
      delete: (o) => inner.delete(o),
    };
    let started!: () => void;
    const handlerStarted = new Promise<void>((resolve) => (started = resolve));
    const { session } = await sessionIn(mode, {
      env: STORE,
      store,
      tools: { hang: { description: "x", inputSchema: { type: "object" }, handler: (_a, { signal }) => new Promise((_, reject) => (started(), signal.addEventListener("abort", () => reject(signal.reason)))) } },
    });
    await session.run("one");
    const committed = session.snapshot();
    const run = session.run(calls(["hang", {}]));
    await handlerStarted;
    await session.cancel();
    expect(await run).toEqual({ status: "cancelled" });
    expect(await inner.load()).toEqual(committed);
    failSaves = true;
    const failed = await session.run("two").then(() => undefined, (e: unknown) => e);
    expect(failed).toBeInstanceOf(RunError);
    expect((failed as Error).message).toContain("disk full");
    expect(await inner.load()).toEqual(committed);
    expect(session.snapshot()).toEqual(committed);
    await session.close();
  });

  startedModes("a stale revision (another writer saved meanwhile) fails the run with the conflict, committing nothing", async () => {
    const store = memoryStore().conversation("c6");
    const { session } = await sessionIn(mode, { env: STORE, store });
    await session.run("one");
    const theirs = { ...(await store.load())!, revision: 2 };
    await store.save(theirs, { expectedRevision: 1 });
    const failed = await session.run("two").then(() => undefined, (e: unknown) => e);
    expect(failed).toBeInstanceOf(RunError);
    expect((failed as Error).message).toMatch(/[Rr]evision conflict/);
    expect(await store.load()).toEqual(theirs);
    await session.close();
  });

  startedModes("a store that does not answer in time fails the run (storeTimeoutMs)", async () => {
    const inner = memoryStore().conversation("c7");
    let hang = false;
    const store: ConversationStore = { load: (o) => inner.load(o), save: (s, o) => (hang ? new Promise(() => {}) : inner.save(s, o)), delete: (o) => inner.delete(o) };
    const { session } = await sessionIn(mode, { env: STORE, store, storeTimeoutMs: 300 });
    await session.run("one");
    hang = true;
    const failed = await session.run("two").then(() => undefined, (e: unknown) => e);
    expect(failed).toBeInstanceOf(RunError);
    expect((failed as Error).message).toMatch(/in time|timeout/i);
    expect((await inner.load())?.revision).toBe(1);
    await session.close();
  });

  it("snapshots that are corrupted, of an unknown version or of another agent are refused with invalid-snapshot before the start", async () => {
    const snapshot = await threeTurns(mode, memoryStore().conversation("c8"));
    const cases: Array<[unknown, string]> = [
      ["{not json", "snapshot-corrupted"],
      [{ ...snapshot, schema_version: 2 }, "snapshot-version-unsupported"],
      [{ ...snapshot, state: { ...snapshot.state, history: "x" } }, "snapshot-corrupted"],
    ];
    for (const [resume, code] of cases) {
      const error = await sessionIn(mode, { env: STORE, resume: resume as Snapshot }).then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(SessionStartError);
      expect(error).toMatchObject({ code: "invalid-snapshot", cause: { code } });
    }
    const other = await sessionIn(mode, { env: STORE, resume: snapshot, resumeAgentId: { type: "Support" } }).then(() => undefined, (e: unknown) => e);
    expect(other).toMatchObject({ code: "invalid-snapshot", cause: { code: "snapshot-agent-mismatch" } });
  });

  it("a store whose load answers what is not an agentlane snapshot fails the start, and the backend says why", async () => {
    // The host checks what any store loaded (an application's own store may
    // return anything) before it answers: the load fails with the check's
    // words, the factory fails, nothing starts.
    const store: ConversationStore = { load: async () => ({ schema_version: 1, nonsense: true }) as unknown as Snapshot, save: async () => {}, delete: async () => {} };
    const error = await sessionIn(mode, { env: STORE, store }).then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(SessionStartError);
    expect(error).toMatchObject({ code: "exited-before-ready" });
    const said = (error as SessionStartError).stderrTail.join("\n");
    expect(said).toContain("The host's store failed to load:");
    expect(said).toContain("Snapshot refused (snapshot-corrupted)");
    expect(said).not.toContain("Cannot read properties");
  });

  it("a snapshot the one-pass reader refuses but the channel carries (a lone surrogate escape) still loads", async () => {
    // pydantic's JSON reader refuses a lone surrogate escape; Python's json
    // module takes it, as the module did before the one-pass reader. The
    // factory loads the snapshot before `ready` (a load that fails ends the
    // start, as above), so a start is the backend having taken it.
    const snapshot = await threeTurns(mode, memoryStore().conversation("c11"));
    const odd = structuredClone(snapshot);
    (odd.state.responses[0] as { system_fingerprint: string }).system_fingerprint = "fp-\ud800";
    const { session } = await sessionIn(mode, { env: STORE, resume: odd });
    expect(session.snapshot()).toEqual(odd);
    await session.close();
  });

  it.runIf(mode === "attached")("resume into a store: an empty one takes the snapshot, one holding that revision continues, one holding another is resume-conflict (nothing overwritten)", async () => {
    const snapshot = await threeTurns(mode, memoryStore().conversation("c10"));
    const empty = memoryStore().conversation("empty");
    const a = await sessionIn(mode, { env: STORE, store: empty, resume: snapshot });
    expect((await empty.load())?.revision).toBe(3);
    await a.session.close();
    const same = await sessionIn(mode, { env: STORE, store: empty, resume: snapshot });
    expect(await same.session.run("history")).toMatchObject({ finalOutput: "Seen 4 user messages: one | two | three | history" });
    await same.session.close();
    const error = await sessionIn(mode, { env: STORE, store: empty, resume: snapshot }).then(() => undefined, (e: unknown) => e);
    expect(error).toMatchObject({ code: "resume-conflict" });
    expect((await empty.load())?.revision).toBe(4);
  });

  it("resume into a factory that does not use the store fails the start with store-not-taken (no silent loss)", async () => {
    const snapshot = await threeTurns(mode, memoryStore().conversation("c9"));
    const error = await sessionIn(mode, { resume: snapshot }).then(() => undefined, (e: unknown) => e);
    expect(error).toMatchObject({ code: "store-not-taken" });
    expect((error as Error).message).toContain("state_store=host.state_store()");
  });
});
