/**
 * agentlane-bridge under abuse (issue 30), cold conversations: clients
 * that give up on CreateConversation, many cold starts at once, approval
 * ids that repeat across conversations, and errors asked to repeat huge
 * input. The clients are the Python standard-library Connect client
 * (__test__/fixtures/bridge_stdlib.py: it gives up, floods and sends
 * garbage) and connect-es; the backends are the real agentlane==0.22.0
 * scenario app (tests/e2e/backends, NOTES.md) and `slow_start_app`, whose
 * import sleeps so that what overlaps is what the bridge lets start.
 * Warm starts under abuse are in bridge-warm-abuse.test.ts.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import { ConversationService, StartMode } from "../examples/clients/node/gen/agentlane/bridge/v1/bridge_pb.js";
import {
  AgentService,
  approval,
  BridgeControlService,
  collect,
  descendants,
  eventually,
  backendsDir,
  record,
  scenarioArgs,
  start,
  stdlib,
  venvPython,
  type Bridge,
} from "./bridge-harness";

const CREATE = "ConversationService/CreateConversation";
const LIST = "ConversationService/ListConversations";

let bridges: Bridge[] = [];

afterEach(async () => {
  await Promise.all(bridges.map((bridge) => (bridge.child.exitCode === null ? bridge.stop() : undefined)));
  bridges = [];
});

async function bridgeWith(args: string[], env?: NodeJS.ProcessEnv): Promise<Bridge> {
  const bridge = await start(args, env ? { env: { ...process.env, ...env } } : {});
  bridges.push(bridge);
  return bridge;
}

/** The slow-importing scenario app (its import sleeps `SLOW_START_SECONDS`, noted in `SLOW_START_LOG`). */
function slowArgs(...extra: string[]): string[] {
  return ["--app", "slow_start_app:create_backend", "--project-dir", backendsDir, "--python", venvPython, ...extra];
}

/** The bridge's backends: its descendants that run agentlane_process_bridge (not the supervisors cold backends run under, whose command line names it too). */
function backends(bridge: Bridge): number[] {
  return [...descendants(bridge.info.pid).keys()].filter((pid) => {
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      return !argv[0].endsWith("process-bridge-supervisor") && argv.includes("agentlane_process_bridge");
    } catch {
      return false;
    }
  });
}

const givenUp = (bridge: Bridge) => bridge.stderr.filter((line) => line.includes("was given up by its caller")).length;

describe("agentlane-bridge: a CreateConversation whose caller goes away is undone", () => {
  it("three creates given up (a closed connection, a Connect deadline) with --max-conversations 2: no backend left, no place lost", async () => {
    const bridge = await bridgeWith(slowArgs("--no-default-conversation", "--max-conversations", "2"), { SLOW_START_SECONDS: "3" });
    // One after the other, each gives up while its backend imports (3 s
    // at least): two by closing the connection, one by its deadline.
    const outcomes = [
      ...(await stdlib(bridge, CREATE, {}, { giveUpAfter: 0.5 })),
      ...(await stdlib(bridge, CREATE, {}, { connectTimeoutMs: 500 })),
      ...(await stdlib(bridge, CREATE, {}, { giveUpAfter: 0.5 })),
    ];
    expect(outcomes[0].gaveUp).toBe(true);
    expect(outcomes[1]).toMatchObject({ status: 504, body: { code: "deadline_exceeded" } });
    expect(outcomes[2].gaveUp).toBe(true);
    // Each was undone where it was: its backend killed, its place free.
    await eventually(() => givenUp(bridge) === 3, "the bridge to undo three starts");
    await eventually(() => backends(bridge).length === 0, "the abandoned backends to be gone");
    const [listed] = await stdlib(bridge, LIST, {});
    expect(listed.body.conversations ?? []).toEqual([]);
    // Both places serve again: two creates that wait are answered, listed and closable.
    const created = await stdlib(bridge, CREATE, {}, { repeat: 2 });
    expect(created.map((c) => c.status)).toEqual([200, 200]);
    const ids = created.map((c) => c.body.conversation.id);
    const [again] = await stdlib(bridge, LIST, {});
    expect(again.body.conversations.map((c: any) => c.id).sort()).toEqual([...ids].sort());
    const [full] = await stdlib(bridge, CREATE, {});
    expect(full).toMatchObject({ status: 429, body: { code: "resource_exhausted" } });
    for (const id of ids) {
      const [closed] = await stdlib(bridge, "ConversationService/CloseConversation", { id });
      expect(closed).toMatchObject({ status: 200, body: {} });
    }
    expect(backends(bridge)).toEqual([]);
  }, 120_000);
});

describe("agentlane-bridge: cold starts take start slots", () => {
  /** The `start`/`end` notes of slow_start_app's imports: the most that overlapped, and the pids. */
  function imports(log: string): { overlap: number; pids: Set<number> } {
    const notes = readFileSync(log, "utf8")
      .trim()
      .split("\n")
      .map((line) => line.split(" "))
      .map(([word, pid, time]) => ({ word, pid: Number(pid), time: Number(time) }))
      .sort((a, b) => a.time - b.time || (a.word === "end" ? -1 : 1));
    let now = 0;
    let overlap = 0;
    for (const note of notes) {
      now += note.word === "start" ? 1 : -1;
      overlap = Math.max(overlap, now);
    }
    return { overlap, pids: new Set(notes.map((n) => n.pid)) };
  }

  it("with one slot, three creates at once import one after the other, each ready within its own timeout though the last waited longer than it; one given up while queued never starts", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bridge-slots-"));
    const log = join(dir, "imports.log");
    try {
      // Each import sleeps 5 s: a start takes about 6 s of the 12 s ready
      // timeout, and the third waits for two starts before its own.
      const bridge = await bridgeWith(slowArgs("--no-default-conversation", "--max-concurrent-starts", "1", "--ready-timeout-ms", "12000"), {
        SLOW_START_LOG: log,
        SLOW_START_SECONDS: "5",
      });
      expect(bridge.info.conversations.maxConcurrentStarts).toBe(1);
      const began = Date.now();
      const three = stdlib(bridge, CREATE, {}, { repeat: 3 });
      // A fourth, started while the three hold and wait for the slot, gives up in the queue.
      await eventually(() => backends(bridge).length === 1, "the first start");
      const [queued] = await stdlib(bridge, CREATE, {}, { giveUpAfter: 1 });
      expect(queued.gaveUp).toBe(true);
      const created = await three;
      const took = Date.now() - began;
      expect(created.map((c) => c.status)).toEqual([200, 200, 200]);
      expect(took).toBeGreaterThan(12_000); // so the last one's clock did not start at its call
      const { overlap, pids } = imports(log);
      expect(overlap).toBe(1);
      expect(pids).toEqual(new Set(created.map((c) => c.body.conversation.backendPid)));
      expect(givenUp(bridge)).toBe(0); // the queued one never had a backend
      const [listed] = await stdlib(bridge, LIST, {});
      expect(listed.body.conversations).toHaveLength(3);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);

  it("20 cold creates at once with the default slots and ready timeout: all ready, each with its own backend", async () => {
    const bridge = await bridgeWith(scenarioArgs("--no-default-conversation"));
    expect(bridge.info.conversations.maxConcurrentStarts).toBeGreaterThanOrEqual(2);
    const created = await stdlib(bridge, CREATE, { startMode: "START_MODE_COLD" }, { repeat: 20 });
    expect(created.map((c) => c.body.code ?? c.status)).toEqual(Array(20).fill(200));
    expect(new Set(created.map((c) => c.body.conversation.backendPid)).size).toBe(20);
  }, 300_000);
});

describe("agentlane-bridge: approval ids name one approval in the whole bridge", () => {
  it("two conversations with the same request_id pending at once: each answered by its bridge-wide id, a crossed answer refused", async () => {
    const bridge = await bridgeWith(scenarioArgs("--no-default-conversation"));
    const conversations = bridge.client(ConversationService);
    const agent = bridge.client(AgentService);
    const agentJson = bridge.client(AgentService, { json: true });
    const [a, b] = await Promise.all([0, 1].map(async () => (await conversations.createConversation({ startMode: StartMode.COLD })).conversation!.id));
    const pendings: Promise<any>[] = [];
    const runs = [a, b].map((id, i) => {
      let seen!: (event: any) => void;
      pendings.push(new Promise((resolve) => (seen = resolve)));
      return collect((i === 0 ? agent : agentJson).prompt({ text: `note ${id}.txt`, conversationId: id }), (event) => {
        if (approval(event, "pending")) seen(event);
      });
    });
    const [pa, pb] = await Promise.all(pendings);
    // The backends number alike; the bridge-wide ids differ and say whose.
    expect(approval(pa, "pending").request_id).toBe(approval(pb, "pending").request_id);
    const idA = `${a}/${approval(pa, "pending").request_id}`;
    const idB = `${b}/${approval(pb, "pending").request_id}`;
    // Carried on the stream item (the subscriber's and the prompt's): proto and JSON alike.
    expect(pa.approvalId).toBe(idA);
    expect(pb.approvalId).toBe(idB);
    // A's id through B's conversation: refused, nothing resolved anywhere.
    const crossed = await agent.approve({ id: idA, allowed: false, reason: "crossed", conversationId: b }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(crossed?.code).toBe(Code.InvalidArgument);
    expect(crossed?.rawMessage).toContain(`belongs to conversation "${a}"`);
    // Each answered by its own id; B's without naming its conversation.
    const resolvedB = await agentJson.approve({ id: idB, allowed: false, reason: `No, ${b}.` });
    const resolvedA = await agent.approve({ id: idA, allowed: true, conversationId: a });
    expect(resolvedA.resolved!.approvalId).toBe(idA);
    expect(resolvedB.resolved!.approvalId).toBe(idB);
    const [runA, runB] = await Promise.all(runs);
    const result = (run: any) => run.events.map(record).find((r: any) => r?.type === "tool_end").payload.result;
    expect(result(runA)).toMatch(/^Saved \d+ characters to \/notes\/c\d+\.txt\.$/);
    expect(result(runB)).toBe(`No, ${b}.`);
    // The backend's own id with conversation_id: the form every bridge takes, still answered.
    const third = collect(agent.prompt({ text: `note again.txt`, conversationId: a }), async (event) => {
      const p = approval(event, "pending");
      if (p) await agent.approve({ id: p.request_id, allowed: false, reason: "old form", conversationId: a });
    });
    expect(result(await third)).toBe("old form");
    const version = await bridge.client(BridgeControlService).getVersion({});
    expect(version.capabilities).toContain("approval-ids");
  }, 120_000);
});

describe("agentlane-bridge: errors repeat at most 1 KiB of the request", () => {
  it("a 1 MiB conversation id, approval id, enum value and method name: each refused with its code and a short body", async () => {
    const bridge = await bridgeWith(scenarioArgs("--no-default-conversation"));
    const huge = "x".repeat(1 << 20);
    const calls: [string, unknown, string][] = [
      ["ConversationService/CloseConversation", { id: huge }, "not_found"],
      ["AgentService/Cancel", { conversationId: huge }, "not_found"],
      ["AgentService/Approve", { id: huge, allowed: true, conversationId: huge }, "not_found"],
      ["AgentService/Approve", { id: `c1/${huge}`, allowed: true, conversationId: "c2" }, "invalid_argument"],
      [CREATE, { startMode: huge }, "invalid_argument"],
      ["AgentService/Configure", { patchJson: `{"a": ${huge}`, conversationId: "" }, "not_found"],
      [`AgentService/${huge.slice(0, 60_000)}`, {}, "unimplemented"],
    ];
    for (const [method, body, code] of calls) {
      const [outcome] = await stdlib(bridge, method, body);
      expect(outcome.body.code, method.slice(0, 60)).toBe(code);
      expect(outcome.bytes, method.slice(0, 60)).toBeLessThan(1300);
    }
    // The echo the bridge itself writes: the start of the value and its length.
    const [closed] = await stdlib(bridge, "ConversationService/CloseConversation", { id: huge });
    expect(closed.body.message).toBe(`no conversation "${"x".repeat(64)}"… (1048576 bytes) (never created, or closed)`);
    // A stream's end message: Prompt and Subscribe.
    for (const method of ["AgentService/Prompt", "AgentService/Subscribe"]) {
      const [stream] = await stdlib(bridge, method, { text: "hi", conversationId: huge }, { stream: true });
      expect(stream.items).toEqual([]);
      expect(stream.end.error.code).toBe("not_found");
      expect(stream.bytes).toBeLessThan(1300);
    }
    // The bridge still serves.
    const [ping] = await stdlib(bridge, "BridgeControlService/Ping", {});
    expect(ping.body).toEqual({ message: "pong" });
  }, 120_000);
});
