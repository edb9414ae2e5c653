/**
 * The on-disk store: the store contract, its files, what agentlane's own
 * `JsonFileStateStore` makes of them (and the store of agentlane's files),
 * and its lock against another process, SIGKILLed while it holds it.
 */
import { spawnSync } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  diskStore,
  InvalidConversationIdError,
  InvalidOptionError,
  SnapshotError,
  StoreConflictError,
  StoreFailedError,
  type Snapshot,
} from "../../lib/index";
import { repoRoot } from "../helpers";
import { storeContract } from "./contract";
import { StoreHost } from "./hosts";
import { fixture, fixturesDir, taggedSnapshot } from "./snapshots";

const scratch = mkdtempSync(join(tmpdir(), "pbn-disk-store-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));
let folders = 0;
/** A new directory for one test's store (not created: the store makes it). */
function folder(): string {
  folders += 1;
  return join(scratch, `store-${folders}`, "nested");
}

describe("diskStore", () => {
  const shared = diskStore({ directory: folder() });
  storeContract(() => shared);

  it("keeps one file per conversation inside its directory, named after the id, and lists the ids back", async () => {
    const directory = folder();
    const stores = diskStore({ directory });
    const ids = ["user-42", "User-42", ".", "..", "../escape", "con", "CON", "a/b", "%2F", "ünï 🌍"];
    for (const id of ids) await stores.conversation(id).save(fixture("one-turn"), { expectedRevision: null });
    const files = readdirSync(directory).filter((name) => !name.startsWith(".") && !["%ZZ.json", "%61.json", "notes.txt", "UPPER.json"].includes(name));
    expect(files.sort()).toEqual(
      ["user-42.json", "%55ser-42.json", "%2E.json", "%2E%2E.json", "%2E%2E%2Fescape.json", "%63on.json", "%43%4F%4E.json", "a%2Fb.json", "%252%46.json", "%C3%BCn%C3%AF%20%F0%9F%8C%8D.json"].sort(),
    );
    // Files the store did not name are not conversations.
    for (const stranger of ["%ZZ.json", "%61.json", "notes.txt", "UPPER.json"]) writeFileSync(join(directory, stranger), "{}");
    expect((await stores.conversationIds()).sort()).toEqual([...ids].sort());
    expect(readdirSync(join(directory, ".."))).toEqual(["nested"]);
    // Only the owner reads a conversation: the files and the folders the store made.
    expect(statSync(join(directory, "user-42.json")).mode & 0o777).toBe(0o600);
    expect(statSync(directory).mode & 0o777).toBe(0o700);
    // The file is agentlane's document with the revision first.
    expect(readFileSync(join(directory, "user-42.json"), "utf8")).toMatch(/^\{"revision":1,"schema_version":1,/);
  });

  it("refuses an id too long for a file name, and a bad directory or lock time", () => {
    const stores = diskStore({ directory: folder() });
    expect(() => stores.conversation("a".repeat(200))).not.toThrow();
    expect(() => stores.conversation("a".repeat(201))).toThrow(InvalidConversationIdError);
    expect(() => stores.conversation("é".repeat(34))).toThrow(/204 bytes as a file name, at most 200/);
    expect(() => diskStore({ directory: "" })).toThrow(TypeError);
    expect(() => diskStore({ directory: folder(), lockTimeoutMs: -1 })).toThrow(InvalidOptionError);
  });

  it("a file agentlane's JsonFileStateStore wrote (indented, revision inside) is loaded and its revision honoured", async () => {
    const directory = folder();
    mkdirSync(directory, { recursive: true });
    copyFileSync(join(fixturesDir, "conversation.json"), join(directory, "from-agentlane.json"));
    const store = diskStore({ directory }).conversation("from-agentlane");
    expect(await store.load()).toEqual(fixture("conversation"));
    const conflict = await store.save({ ...fixture("conversation"), revision: 6 }, { expectedRevision: 4 }).catch((error: unknown) => error);
    expect((conflict as StoreConflictError).actualRevision).toBe(5);
    await store.save({ ...fixture("conversation"), revision: 6 }, { expectedRevision: 5 });
    expect((await store.load())!.revision).toBe(6);
  });

  it("agentlane's JsonFileStateStore loads the store's file, and a DefaultAgent built on it continues the conversation", async () => {
    const directory = folder();
    const stores = diskStore({ directory });
    const store = stores.conversation("shared-with-python");
    await store.save(fixture("conversation"), { expectedRevision: null });
    // The fixture's conversation had five user messages; "count" is the sixth.
    const script = `
import asyncio, sys
sys.path.insert(0, ${JSON.stringify(join(repoRoot, "tests", "e2e", "backends"))})
from agentlane.harness import AgentDescriptor
from agentlane.harness.agents import DefaultAgent
from agentlane.harness.tools import ToolApprovalBroker
from scenario_app import ScenarioConfig, ScriptedModel, build_tools
async def main():
    agent = DefaultAgent(descriptor=AgentDescriptor(name="Scenario", model=ScriptedModel(ScenarioConfig()), tools=build_tools(ToolApprovalBroker())), state_path=sys.argv[1])
    print((await agent.run("count")).final_output)
asyncio.run(main())
`;
    const python = spawnSync(join(repoRoot, ".venv", "bin", "python"), ["-c", script, join(directory, "shared-with-python.json")], { encoding: "utf8", timeout: 60_000 });
    expect(python.stderr).toBe("");
    expect(python.stdout.trim()).toBe("This conversation has 6 user message(s).");
    // agentlane saved revision 6 in its own format; the store reads it and goes on from there.
    const resumed = await store.load();
    expect([resumed!.revision, resumed!.state.history.filter((m) => m.role === "user").length]).toEqual([6, 6]);
    await store.save({ ...resumed!, revision: 7 }, { expectedRevision: 6 });
  }, 90_000);

  it("a corrupted file: load says snapshot-corrupted, save and delete store-failed, and the file is left as it was", async () => {
    const directory = folder();
    const store = diskStore({ directory }).conversation("broken");
    await store.save(fixture("one-turn"), { expectedRevision: null });
    writeFileSync(join(directory, "broken.json"), '{"schema_version":1,"agent_id":');
    const loaded = await store.load().catch((error: unknown) => error);
    expect(loaded).toBeInstanceOf(SnapshotError);
    expect([(loaded as SnapshotError).code, (loaded as SnapshotError).cause]).toEqual(["snapshot-corrupted", expect.any(SyntaxError)]);
    // Each attempt's rejection is taken at once: they run side by side and either may settle first.
    const attempts = [store.save({ ...fixture("one-turn"), revision: 2 }, { expectedRevision: 1 }), store.delete({ expectedRevision: 1 })].map((attempt) =>
      attempt.catch((reason: unknown) => reason),
    );
    for (const attempt of attempts) {
      const error = await attempt;
      expect(error).toBeInstanceOf(StoreFailedError);
      expect((error as StoreFailedError).message).toMatch(/the stored snapshot .*broken\.json cannot be read/);
    }
    expect(readFileSync(join(directory, "broken.json"), "utf8")).toBe('{"schema_version":1,"agent_id":');
  });

  it("a directory removed while the store is in use: the next save makes it again", async () => {
    const directory = folder();
    const stores = diskStore({ directory });
    await stores.conversation("a").save(fixture("one-turn"), { expectedRevision: null });
    rmSync(directory, { recursive: true });
    expect(await stores.conversation("a").load()).toBeNull();
    await stores.conversation("a").save(fixture("one-turn"), { expectedRevision: null });
    expect((await stores.conversation("a").load())!.revision).toBe(1);
  });

  it("a temporary file a crash left behind is overwritten by the next save", async () => {
    const directory = folder();
    const store = diskStore({ directory }).conversation("left");
    await store.save(fixture("one-turn"), { expectedRevision: null });
    writeFileSync(join(directory, ".left.json.tmp"), "half a snapshot");
    await store.save({ ...fixture("one-turn"), revision: 2 }, { expectedRevision: 1 });
    expect(readdirSync(directory).sort()).toEqual([".locks", "left.json"]);
    expect((await store.load())!.revision).toBe(2);
  });

  it("a directory that cannot be one is store-failed, with the file system's error as cause", async () => {
    const file = join(scratch, "a-file");
    writeFileSync(file, "");
    const store = diskStore({ directory: join(file, "snapshots") }).conversation("x");
    const attempts = [store.load(), store.save(fixture("one-turn"), { expectedRevision: null }), store.delete({ expectedRevision: 1 })].map((attempt) =>
      attempt.catch((reason: unknown) => reason),
    );
    for (const attempt of attempts) {
      const error = await attempt;
      expect(error).toBeInstanceOf(StoreFailedError);
      expect((error as StoreFailedError).cause).toMatchObject({ code: expect.stringMatching(/^(ENOTDIR|EEXIST)$/) });
    }
  });

  it("another process holding the conversation's lock: a save waits, gives up after lockTimeoutMs, and goes through the moment the holder is SIGKILLed", async () => {
    const directory = folder();
    const stores = diskStore({ directory, lockTimeoutMs: 300 });
    const store = stores.conversation("held");
    await store.save(fixture("one-turn"), { expectedRevision: null });
    const holder = await StoreHost.start({ kind: "disk", directory });
    try {
      expect(await holder.send({ op: "lock", path: join(directory, ".locks", "held.lock") })).toEqual({ ok: true });
      const timedOut = await store.save({ ...fixture("one-turn"), revision: 2 }, { expectedRevision: 1 }).catch((error: unknown) => error);
      expect(timedOut).toBeInstanceOf(StoreFailedError);
      expect((timedOut as StoreFailedError).message).toContain("another writer held the conversation's lock for over 300 ms");
      // Other conversations are not held up.
      await stores.conversation("free").save(fixture("one-turn"), { expectedRevision: null });
      // An abort while waiting rejects with its reason.
      const controller = new AbortController();
      const waiting = stores.conversation("held").delete({ expectedRevision: 1, signal: controller.signal });
      controller.abort(new Error("stop waiting"));
      await expect(waiting).rejects.toThrow("stop waiting");
      // A save waiting when the holder dies gets the lock at once: the kernel let it go.
      const waiter = diskStore({ directory, lockTimeoutMs: 30_000 }).conversation("held").save({ ...fixture("one-turn"), revision: 2 }, { expectedRevision: 1 });
      await holder.kill();
      await waiter;
      expect((await store.load())!.revision).toBe(2);
    } finally {
      await holder.kill();
    }
  });

  it("a save of a large conversation (20 MB) is whole or absent for a reader racing it", async () => {
    const directory = folder();
    const store = diskStore({ directory }).conversation("big");
    const big = taggedSnapshot(1, 200, 50_000) as Snapshot;
    const saving = store.save(big, { expectedRevision: null });
    const seen: Array<number | null> = [];
    while (seen.length === 0 || seen.at(-1) === null) seen.push((await store.load())?.revision ?? null);
    await saving;
    expect(seen.every((revision) => revision === null || revision === 1)).toBe(true);
    expect((await store.load())!.state.history).toHaveLength(400);
  }, 60_000);
});
