/**
 * agentlane-bridge hosting many conversations at once (issue 22), end to
 * end: the release bridge, the real agentlane==0.22.0 scenario backend
 * (tests/e2e/backends/scenario_app.py, a scripted model; keywords in
 * tests/e2e/NOTES.md: `note` asks for an approval and echoes the prompt,
 * `slow` ticks, `big N` sends one event of N bytes), connect-es clients.
 * The scenario app rather than the demo app: its prompts name a file of
 * their own and its `big` runs fill a stalled client's queue.
 *
 * One bridge serves the file, started with `--warm`: its conversations fork
 * from one prefork server that imported the app once, so 20 of them are
 * ready in about a second on this 2-core machine instead of 20 × 1.2 s of
 * CPU for cold imports. Isolation does not depend on the start mode: a
 * fork is its own process group, session and stream queues like a cold
 * backend. The tests run in order on the same bridge; the last one
 * SIGKILLs it.
 */
import { rmSync } from "node:fs";
import { dirname } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConversationService, StartMode } from "../examples/clients/node/gen/agentlane/bridge/v1/bridge_pb.js";
import {
  AgentService,
  approval,
  collect,
  descendants,
  eventually,
  gone,
  groupMembers,
  record,
  scenarioArgs,
  start,
  stat,
  Subscription,
  subscribedTo,
  survivors,
  type Bridge,
  type Collected,
} from "./bridge-harness";

const COUNT = 20;
const BIG = 20_000_000;

/** A marker only conversation `i`'s prompts contain (no marker is inside another). */
const marker = (i: number) => `m${String(i).padStart(2, "0")}q`;

/**
 * A backend's processes: its process group and, for a warm fork, its
 * parent (the fork's own supervisor, which sits in the prefork server's
 * group), each with its start time.
 */
function backendProcesses(pid: number, bridgePid: number): Map<number, string> {
  const found = new Map<number, string>();
  for (const member of groupMembers(pid)) found.set(member, stat(member)!.start);
  const parent = stat(pid)?.ppid;
  if (parent !== undefined && parent !== bridgePid) found.set(parent, stat(parent)!.start);
  return found;
}

describe("agentlane-bridge: many conversations in one bridge (--warm)", () => {
  let bridge: Bridge;
  let agent: any;
  let agentJson: any;
  let conversations: any;
  /** Open conversations the tests use, by index (their markers). */
  const ids: string[] = [];
  const pids: number[] = [];

  beforeAll(async () => {
    bridge = await start(scenarioArgs("--warm", "--no-default-conversation", "--max-conversations", "64"));
    agent = bridge.client(AgentService);
    agentJson = bridge.client(AgentService, { json: true });
    conversations = bridge.client(ConversationService);
  });

  afterAll(async () => {
    // The last test SIGKILLs the bridge; this is for a failure before it.
    if (bridge && bridge.child.exitCode === null && bridge.child.signalCode === null) await bridge.stop();
  });

  const pad = (i: number) => String(i).padStart(2, "0");

  /**
   * A `note` run in conversation `i`: its approval is allowed for even i,
   * denied with a reason of its own for odd i, answered once `answerWhen`
   * resolves (half over JSON, half over proto).
   */
  async function noteRun(i: number, { answerWhen = Promise.resolve(), onPending = () => {} }: { answerWhen?: Promise<void>; onPending?: () => void } = {}) {
    const id = ids[i];
    const prompt = `note k${pad(i)}.txt from ${marker(i)}`;
    const reason = `No, ${marker(i)}.`;
    const answers: Promise<any>[] = [];
    const pending: any[] = [];
    const run = await collect(agent.prompt({ text: prompt, conversationId: id }), (event) => {
      const p = approval(event, "pending");
      if (!p) return;
      pending.push(p);
      onPending();
      const client = i % 2 ? agentJson : agent;
      answers.push(answerWhen.then(() => client.approve({ id: p.request_id, allowed: i % 2 === 0, reason, conversationId: id })));
    });
    return { prompt, reason, run, pending, answers: await Promise.all(answers) };
  }

  /** Checks a note run of conversation `i`: its own prompt, approval, decision and answer, nothing of another's. */
  function expectOwnNote(i: number, { prompt, reason, run, pending, answers }: Awaited<ReturnType<typeof noteRun>>) {
    expect(run.error, `conversation ${i}`).toBeUndefined();
    expect(run.events[0].event.prompt).toBe(prompt);
    expect(pending.map((p) => p.request.path)).toEqual([`/notes/k${pad(i)}.txt`]);
    const resolved = JSON.parse(answers[0].resolved.json).event.payload.event.record;
    expect(resolved.request_id).toBe(pending[0].request_id);
    expect(resolved.request.path).toBe(pending[0].request.path);
    expect(resolved.final_decision.outcome).toBe(i % 2 === 0 ? "allow" : "deny");
    const result = i % 2 === 0 ? `Saved ${prompt.length} characters to /notes/k${pad(i)}.txt.` : reason;
    expect(run.events.map(record).find((r) => r?.type === "tool_end").payload.result).toBe(result);
    expect(run.events.at(-1)!.type).toBe("run_complete");
    expect(run.events.at(-1)!.event.final_output).toBe(`Done: ${result}`);
    expectNothingOfOthers(i, run.events.map((e) => e.json ?? JSON.stringify(e.event)));
  }

  /** No line of conversation `i` names another conversation's marker. */
  function expectNothingOfOthers(i: number, lines: string[]) {
    const text = lines.join("\n");
    const foreign = ids.map((_, j) => marker(j)).filter((m, j) => j !== i && text.includes(m));
    expect(foreign, `conversation ${i} saw another's text`).toEqual([]);
    expect(text.includes(marker(i))).toBe(true);
  }

  /** A subscription of conversation `i`, once it is in place. */
  function subscribed(i: number, json = false): Promise<Subscription> {
    return subscribedTo(bridge, { conversationId: ids[i], json });
  }

  /** A run of `text` in conversation `i` whose run_start resolves `started`. */
  function startRun(i: number, text: string, client = agent) {
    let started!: () => void;
    const begun = new Promise<void>((resolve) => (started = resolve));
    const run = collect(client.prompt({ text, conversationId: ids[i] }), (e) => {
      if (e.type === "run_start") started();
    });
    return { begun, run };
  }

  it(`${COUNT} conversations created at once, each with its own approvals and answers, none crossing`, async () => {
    const created = await Promise.all(Array.from({ length: COUNT }, () => conversations.createConversation({})));
    for (const { conversation } of created) {
      expect(conversation.startMode).toBe(StartMode.WARM);
      expect(JSON.parse(conversation.readyJson).type).toBe("ready");
      ids.push(conversation.id);
      pids.push(conversation.backendPid);
    }
    expect(new Set(ids).size).toBe(COUNT);
    expect(new Set(pids).size).toBe(COUNT);
    const listed = await conversations.listConversations({});
    expect(listed.conversations.map((c: any) => c.id).sort()).toEqual([...ids].sort());
    const subscribers = await Promise.all(ids.map((_, i) => subscribed(i, i % 2 === 1)));
    // Every approval is answered once all 20 are pending at once: each
    // backend numbers its approvals itself, so the same ids are pending in
    // every conversation and only conversation_id tells them apart.
    let allPending!: () => void;
    const answerWhen = new Promise<void>((resolve) => (allPending = resolve));
    let pendingCount = 0;
    const onPending = () => {
      if (++pendingCount === COUNT) allPending();
    };
    const results = await Promise.all(ids.map((_, i) => noteRun(i, { answerWhen, onPending })));
    expect(pendingCount).toBe(COUNT);
    results.forEach((result, i) => expectOwnNote(i, result));
    const requestIds = new Set(results.map((r) => r.pending[0].request_id));
    expect(requestIds.size).toBeLessThan(COUNT); // ids do repeat across conversations
    for (const [i, subscriber] of subscribers.entries()) {
      const { events } = results[i].run;
      await subscriber.until((e) => e.seq === events.at(-1)!.seq, `conversation ${i}'s run_complete on Subscribe`);
      expect(subscriber.events.filter((e) => e.seq >= events[0].seq).map((e) => e.event)).toEqual(events.map((e) => e.event));
      expectNothingOfOthers(i, subscriber.events.map((e) => JSON.stringify(e.event)));
      expect(subscriber.ended).toBe(false);
      subscriber.close();
    }
  });

  it("one conversation's backend SIGKILLed mid-run: only its streams end unavailable, the others finish", async () => {
    const victim = 0;
    const others = [1, 2, 3, 4, 5, 6];
    const [watcher, bystander] = await Promise.all([subscribed(victim), subscribed(others[0])]);
    const doomed = startRun(victim, `slow 30 ${marker(victim)}`);
    const running = others.map((i) => startRun(i, `slow 2 ${marker(i)}`, i % 2 ? agentJson : agent));
    await Promise.all([doomed.begun, ...running.map((r) => r.begun)]);
    const processes = backendProcesses(pids[victim], bridge.info.pid);
    expect(processes.size).toBeGreaterThanOrEqual(2); // the fork and its supervisor
    process.kill(pids[victim], "SIGKILL");
    const killed = await doomed.run;
    expect(killed.error?.code).toBe(Code.Unavailable);
    expect(killed.error?.rawMessage).toContain("the backend exited with signal 9");
    expect(killed.events.some((e) => ["run_complete", "run_cancelled", "error"].includes(e.type))).toBe(false);
    await watcher.done;
    expect(watcher.error?.code).toBe(Code.Unavailable);
    for (const [k, { run }] of running.entries()) {
      const result: Collected = await run;
      expect(result.error, `conversation ${others[k]}`).toBeUndefined();
      expect(result.events.at(-1)!.type).toBe("run_complete");
      expectNothingOfOthers(others[k], result.events.map((e) => e.json!));
    }
    expect(bystander.ended).toBe(false);
    bystander.close();
    // Its place is freed, its calls get its end, its group is gone; the rest serve on.
    expect(await gone(pids[victim], 3_000)).toBe(true);
    await eventually(() => survivors(processes).length === 0, "the killed backend's supervisor to exit", 3_000);
    const after = await collect(agent.prompt({ text: "chat", conversationId: ids[victim] }));
    expect(after.error?.code).toBe(Code.Unavailable);
    const listed = (await conversations.listConversations({})).conversations.map((c: any) => c.id);
    expect(listed).not.toContain(ids[victim]);
    expect(listed).toHaveLength(COUNT - 1);
    const next = await collect(agent.prompt({ text: `chat ${marker(others[0])}`, conversationId: ids[others[0]] }));
    expect(next.events.at(-1)!.event.final_output).toBe(`Hello! This is a scripted reply. You said: chat ${marker(others[0])}`);
  });

  it("a client that stops reading its Prompt stream (a 20 MB event on it) holds up no one, and loses nothing", async () => {
    const slow = 7;
    const others = [8, 9, 10, 11, 12, 13];
    const watcher = await subscribed(slow);
    const stream = agent.prompt({ text: `big ${BIG}`, conversationId: ids[slow] })[Symbol.asyncIterator]();
    const first = await stream.next();
    expect(JSON.parse(first.value.item.value.json).type).toBe("run_start");
    // It reads nothing more. Its backend's output is still read: the run
    // ends there while the stream stays unread.
    const end = await watcher.until((e) => e.type === "run_complete", "the unread run's end on Subscribe");
    const results = await Promise.all(others.map((i) => noteRun(i)));
    results.forEach((result, k) => expectOwnNote(others[k], result));
    // Reading again: everything is there, in order.
    const rest = await collect({ [Symbol.asyncIterator]: () => stream } as AsyncIterable<any>);
    expect(rest.error).toBeUndefined();
    expect(rest.events.at(-1)!.seq).toBe(end.seq);
    const toolEnd = rest.events.find((e) => record(e)?.type === "tool_end")!;
    expect(record(toolEnd).payload.result === "0123456789abcdef".repeat(BIG / 16)).toBe(true);
    const seqs = [BigInt(first.value.item.value.seq), ...rest.events.map((e) => e.seq)].map(Number);
    expect(seqs).toEqual(seqs.map((_, k) => seqs[0] + k));
    watcher.close();
  });

  it("a subscriber that stops reading is cut off with resource_exhausted once 64 MiB wait for it; its conversation and the others carry on", async () => {
    const slow = 7;
    const others = [1, 2, 3, 4, 5, 6];
    const size = 40_000_000;
    const stalled = agent.subscribe({ conversationId: ids[slow] })[Symbol.asyncIterator]();
    // In place once it got something (a Configure's answer); then it reads no more.
    const first = stalled.next();
    for (let placed = null, tries = 0; placed === null; tries++) {
      if (tries === 10) throw new Error("the stalled subscription got nothing in 10 s");
      await agent.configure({ patchJson: "{}", conversationId: ids[slow] });
      placed = await Promise.race([first, new Promise((resolve) => setTimeout(() => resolve(null), 1_000))]);
    }
    const firstSeq = (await first).value.item.value.seq;
    const running = others.map((i) => noteRun(i));
    // Three runs with a 40 MB event each: the first is held by the stalled
    // connection, the next two wait in its queue and pass 64 MiB.
    for (let k = 0; k < 3; k++) {
      const run = await collect(agent.prompt({ text: `big ${size}`, conversationId: ids[slow] }));
      expect(run.error).toBeUndefined();
      expect(run.events.at(-1)!.event.final_output).toBe(`Received ${size + 2} bytes of JSON`);
    }
    (await Promise.all(running)).forEach((r, k) => expectOwnNote(others[k], r));
    const rest = await collect({ [Symbol.asyncIterator]: () => stalled } as AsyncIterable<any>);
    expect(rest.error?.code).toBe(Code.ResourceExhausted);
    expect(rest.error?.rawMessage).toBe("this stream fell too far behind the backend and was cut off");
    const seqs = [firstSeq, ...rest.events.map((e) => e.seq)].map(Number);
    expect(seqs).toEqual(seqs.map((_, k) => seqs[0] + k)); // nothing skipped before the cut
    expect(rest.events.filter((e) => record(e)?.type === "tool_end").length).toBeLessThan(3);
    // The conversation serves on.
    const next = await collect(agent.prompt({ text: `chat ${marker(slow)}`, conversationId: ids[slow] }));
    expect(next.events.at(-1)!.type).toBe("run_complete");
  });

  it("CloseConversation mid-run: the run ends cancelled and its streams end OK (as Shutdown does), its processes are gone, the others finish", async () => {
    const closed = 14;
    const others = [15, 16, 17, 18, 19];
    const target = ids[closed];
    const watcher = await subscribed(closed);
    let pendingSeen!: (p: any) => void;
    const pendingP = new Promise<any>((resolve) => (pendingSeen = resolve));
    const run = collect(agent.prompt({ text: `note k${pad(closed)}.txt ${marker(closed)}`, conversationId: target }), (e) => {
      const p = approval(e, "pending");
      if (p) pendingSeen(p);
    });
    const pending = await pendingP; // mid-run: waiting for its approval
    const processes = backendProcesses(pids[closed], bridge.info.pid);
    expect(processes.size).toBeGreaterThanOrEqual(2); // the fork and its supervisor
    const running = others.map((i) => noteRun(i));
    const exit = await conversations.closeConversation({ id: target });
    expect(exit).toMatchObject({ backendExitCode: 0, backendSignal: 0, killed: false });
    const result = await run;
    expect(result.error).toBeUndefined();
    expect(result.events.at(-1)!.type).toBe("run_cancelled");
    expect(result.events.some((e) => e.type === "run_complete")).toBe(false);
    await watcher.done;
    expect(watcher.error).toBeUndefined();
    expect(watcher.events.at(-1)!.type).toBe("shutdown");
    // Answered by its backend's exit: the fork and its supervisor are gone.
    await eventually(() => survivors(processes).length === 0, "the closed conversation's processes to exit", 3_000);
    // Later calls: not_found, the approval included.
    const late = await agent.approve({ id: pending.request_id, allowed: true, conversationId: target }).catch((e: unknown) => ConnectError.from(e));
    expect(late.code).toBe(Code.NotFound);
    expect((await collect(agent.prompt({ text: "chat", conversationId: target }))).error?.code).toBe(Code.NotFound);
    const again = await conversations.closeConversation({ id: target }).catch((e: unknown) => ConnectError.from(e));
    expect(again.code).toBe(Code.NotFound);
    (await Promise.all(running)).forEach((r, k) => expectOwnNote(others[k], r));
    expect((await conversations.listConversations({})).conversations.map((c: any) => c.id)).not.toContain(target);
  });

  it(`the bridge SIGKILLed with ${COUNT} conversations open (runs waiting for approvals): none of its processes is left 3 s later`, async () => {
    const open = (await conversations.listConversations({})).conversations.length;
    await Promise.all(Array.from({ length: COUNT - open }, () => conversations.createConversation({})));
    const listed = (await conversations.listConversations({})).conversations;
    expect(listed).toHaveLength(COUNT);
    // Some runs are mid-way, waiting for an approval.
    const pendings: Promise<void>[] = [];
    const waiting = listed.slice(0, 5).map((c: any) => {
      let seen!: () => void;
      pendings.push(new Promise<void>((resolve) => (seen = resolve)));
      return collect(agent.prompt({ text: "note x.txt", conversationId: c.id }), (e) => {
        if (approval(e, "pending")) seen();
      });
    });
    await Promise.all(pendings);
    const recorded = descendants(bridge.info.pid);
    for (const c of listed) expect(recorded.has(c.backendPid), `backend ${c.backendPid}`).toBe(true);
    expect(recorded.size).toBeGreaterThan(COUNT); // the backends and the prefork server at least
    recorded.set(bridge.info.pid, stat(bridge.info.pid)!.start);
    bridge.child.kill("SIGKILL");
    expect(await bridge.exited).toEqual({ code: null, signal: "SIGKILL" });
    for (const r of await Promise.all(waiting)) expect(r.error).toBeDefined();
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(survivors(recorded)).toEqual([]);
    rmSync(dirname(bridge.info.tokenFile), { recursive: true, force: true }); // a SIGKILLed bridge cannot
  });
});
