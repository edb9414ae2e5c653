/**
 * End-to-end tests against the real backend (`agentlane==0.22.0`, the
 * `scenario_app` of tests/e2e/backends) and the two plain-Python fakes.
 * Behaviour of the backend is described in tests/e2e/NOTES.md; section
 * numbers (§) refer to docs/protocol.md.
 *
 * Every test starts its own backend; `afterEach` shuts down whatever is still
 * running, so vitest exits on its own.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  BridgeDecodeError,
  encodeBridgeCommand,
  isNativeEvent,
  type BridgeEvent,
  type NativeApprovalRecord,
  type NativeRunEvent,
} from "../lib/index";
import {
  closeAllClients,
  E2EClient,
  fakeBackend,
  isTerminal,
  scenarioBackend,
  type LogEntry,
} from "./e2e-client";

const SCENARIOS = [
  "auto", "big", "bigjson", "chat", "count", "fail", "note", "parallel",
  "plan", "reason", "slow", "slowtool", "toolfail", "unicode",
];

afterEach(async () => {
  await closeAllClients();
});

// ---- helpers over decoded events -------------------------------------------

function nativeOf(event: BridgeEvent): NativeRunEvent | undefined {
  return event.type === "run_event" ? event.event : undefined;
}

/** `run_start`, `run_event:agent_start`, `model_stream:text_delta`, `state_snapshot:run_end`, … */
function label(event: BridgeEvent): string {
  const record = nativeOf(event);
  if (!record) return event.type;
  if (isNativeEvent(record, "model_stream")) return `model_stream:${record.payload.event.kind}`;
  if (isNativeEvent(record, "state_snapshot")) return `state_snapshot:${record.payload.boundary}`;
  if (isNativeEvent(record, "tool_approval")) return `tool_approval:${record.payload.event.record.status}`;
  return `run_event:${record.type}`;
}

function textDeltas(events: BridgeEvent[]): string[] {
  const texts: string[] = [];
  for (const event of events) {
    const record = nativeOf(event);
    if (record && isNativeEvent(record, "model_stream") && record.payload.event.kind === "text_delta") {
      texts.push(record.payload.event.text as string);
    }
  }
  return texts;
}

function approvalOf(event: BridgeEvent): NativeApprovalRecord | undefined {
  const record = nativeOf(event);
  return record && isNativeEvent(record, "tool_approval") ? record.payload.event.record : undefined;
}

const isApproval = (status: "pending" | "resolved", requestId?: string) => (event: BridgeEvent) => {
  const record = approvalOf(event);
  return record !== undefined && record.status === status && (requestId === undefined || record.request_id === requestId);
};

function toolEndOf(event: BridgeEvent) {
  const record = nativeOf(event);
  return record && isNativeEvent(record, "tool_end") ? record.payload : undefined;
}

const isToolEnd = (callId: string) => (event: BridgeEvent) => toolEndOf(event)?.tool_call.id === callId;

const isTextDelta = (event: BridgeEvent) => label(event) === "model_stream:text_delta";

function entryLabel(entry: LogEntry): string {
  return entry.kind === "event" ? label(entry.event) : entry.kind;
}

/** The approval round trip of a `note` run after its pending record (NOTES.md §3). */
function expectPendingNote(record: NativeApprovalRecord | undefined, requestId: string, path: string, callId: string) {
  expect(record).toMatchObject({
    request_id: requestId,
    status: "pending",
    final_decision: null,
    request: {
      tool_name: "write_note",
      operation: "create_file",
      cwd: "/notes",
      path,
      agent_name: "Scenario",
      tool_call_id: callId,
      metadata: {},
    },
    approval_required_decision: { outcome: "require_approval", reason: "Writing a note needs approval." },
  });
}

// ---- tests -------------------------------------------------------------------

// Every test twice: the backend spawned, and forked from a prefork server.
for (const startMode of ["cold", "warm"] as const) {
  describe.sequential(`e2e: real AgentLane backend (${startMode})`, () => {
    it("streams a chat run: ready, run_start, text deltas, run_complete, strictly in order", async () => {
      const { client, ready } = await E2EClient.start(scenarioBackend(startMode));
      expect(ready).toEqual({
        protocol_version: "1.0",
        type: "ready",
        ts: expect.any(Number),
        version: "0.22.0",
        package: "agentlane-process-bridge",
        metadata: { app: "scenario", scenarios: SCENARIOS },
        config: { model: "scripted-1" },
      });
      expect(client.log).toHaveLength(1);

      const outcome = await client.run("  chat hello world  ");
      const answer = "Hello! This is a scripted reply. You said: chat hello world";
      expect(outcome.runStart.prompt).toBe("chat hello world");
      expect(outcome.terminal).toEqual({
        protocol_version: "1.0",
        type: "run_complete",
        ts: expect.any(Number),
        final_output: answer,
        turn_count: 1,
        response_count: 1,
        shim_state: {},
      });

      // Nothing but the run between ready and the terminal event, in this order.
      const all = client.events;
      expect(all).toEqual([ready, ...outcome.events]);
      const deltas = textDeltas(outcome.events);
      expect(deltas.length).toBe(8 + 3);
      expect(deltas.join("")).toBe(answer);
      expect(outcome.events.map(label)).toEqual([
        "run_start",
        "run_event:agent_start",
        "state_snapshot:run_start",
        "state_snapshot:turn_prepared",
        "run_event:llm_start",
        ...deltas.map(() => "model_stream:text_delta"),
        "model_stream:completed",
        "run_event:llm_end",
        "state_snapshot:run_end",
        "run_event:agent_end",
        "run_complete",
      ]);
      // The completed response carries the same text; timestamps never go back.
      const completed = outcome.events.map(nativeOf).find((r) => r && isNativeEvent(r, "model_stream") && r.payload.event.kind === "completed");
      const response = (completed!.payload as { event: { response: { choices: { message: { content: string } }[]; model: string } } }).event.response;
      expect(response.choices[0].message.content).toBe(answer);
      expect(response.model).toBe("scripted-1");
      const stamps = all.map((event) => event.ts);
      expect(stamps).toEqual([...stamps].sort((a, b) => a - b));
      // Normal runs write nothing to stderr, and every line decoded.
      expect(client.log.filter((entry) => entry.kind !== "event")).toEqual([]);
    });

    it("approve with allowed: true allows the pending tool call", async () => {
      const { client } = await E2EClient.start(scenarioBackend(startMode));
      const start = await client.startRun("note todo.txt buy milk");
      const pending = await client.waitForEvent(isApproval("pending"), { from: start.index });
      expectPendingNote(approvalOf(pending.value), "tool-approval-1", "/notes/todo.txt", "call-1");

      expect(client.send({ type: "approve", id: "tool-approval-1", allowed: true })).toBe(true);
      const terminal = await client.waitForTerminal({ from: start.index });
      const run = client.eventsBetween(start.index, terminal.index + 1);

      const resolved = run.filter(isApproval("resolved"));
      expect(resolved).toHaveLength(1);
      expect(approvalOf(resolved[0])).toMatchObject({
        request_id: "tool-approval-1",
        status: "resolved",
        final_decision: { outcome: "allow", reason: null },
        request: { path: "/notes/todo.txt", tool_call_id: "call-1" },
        approval_required_decision: { outcome: "require_approval", reason: "Writing a note needs approval." },
      });
      const toolEnds = run.filter(isToolEnd("call-1"));
      expect(toolEnds).toHaveLength(1);
      expect(toolEndOf(toolEnds[0])).toMatchObject({
        ok: true,
        error: null,
        result: "Saved 22 characters to /notes/todo.txt.",
        tool_call: { id: "call-1", type: "function", function: { name: "write_note" } },
      });
      // pending → resolved → tool_end, then the run completes with the tool's result.
      expect(run.indexOf(pending.value)).toBeLessThan(run.indexOf(resolved[0]));
      expect(run.indexOf(resolved[0])).toBeLessThan(run.indexOf(toolEnds[0]));
      expect(terminal.value).toMatchObject({
        type: "run_complete",
        final_output: "Done: Saved 22 characters to /notes/todo.txt.",
        turn_count: 2,
        response_count: 2,
      });
      expect(client.unexpectedCommandErrors()).toEqual([]);
    });

    it("approve with allowed: false denies the pending tool call with the given reason", async () => {
      const { client } = await E2EClient.start(scenarioBackend(startMode));
      const start = await client.startRun("note diary.txt secret");
      const pending = await client.waitForEvent(isApproval("pending"), { from: start.index });
      expectPendingNote(approvalOf(pending.value), "tool-approval-1", "/notes/diary.txt", "call-1");

      expect(client.send({ type: "approve", id: "tool-approval-1", allowed: false, reason: "No diaries here." })).toBe(true);
      const terminal = await client.waitForTerminal({ from: start.index });
      const run = client.eventsBetween(start.index, terminal.index + 1);

      const resolved = run.filter(isApproval("resolved"));
      expect(resolved).toHaveLength(1);
      expect(approvalOf(resolved[0])).toMatchObject({
        request_id: "tool-approval-1",
        final_decision: { outcome: "deny", reason: "No diaries here." },
      });
      const toolEnds = run.filter(isToolEnd("call-1"));
      expect(toolEnds).toHaveLength(1);
      expect(toolEndOf(toolEnds[0])).toMatchObject({
        ok: false,
        result: "No diaries here.",
        error: { message: "No diaries here.", kind: "denied" },
      });
      expect(terminal.value).toMatchObject({ type: "run_complete", final_output: "Done: No diaries here." });
      expect(client.unexpectedCommandErrors()).toEqual([]);
    });

    it("only JSON true allows: the encoder refuses a non-boolean, the backend denies a missing allowed", async () => {
      // Our deliberate difference from the reference encoder (§4.1).
      const bogus = { type: "approve", id: "tool-approval-1", allowed: "true" } as unknown as Parameters<
        typeof encodeBridgeCommand
      >[0];
      expect(() => encodeBridgeCommand(bogus)).toThrow(TypeError);

      const { client } = await E2EClient.start(scenarioBackend(startMode));
      const start = await client.startRun("note x.txt");
      const pending = await client.waitForEvent(isApproval("pending"), { from: start.index });
      const requestId = approvalOf(pending.value)!.request_id;
      expect(requestId).toBe("tool-approval-1");

      // The channel refuses it too, before anything is written.
      expect(() => client.send({ ...bogus, id: requestId } as typeof bogus)).toThrow(TypeError);

      // A raw frame without `allowed`, straight to stdin.
      client.child.stdin!.write(`{"type":"approve","id":${JSON.stringify(requestId)},"protocol_version":"1.0"}\n`);
      const terminal = await client.waitForTerminal({ from: start.index });
      const run = client.eventsBetween(start.index, terminal.index + 1);

      const resolved = run.filter(isApproval("resolved"));
      expect(resolved).toHaveLength(1);
      expect(approvalOf(resolved[0])).toMatchObject({
        request_id: requestId,
        final_decision: { outcome: "deny", reason: "Denied by bridge client." },
      });
      const toolEnd = toolEndOf(run.find(isToolEnd("call-1"))!);
      expect(toolEnd).toMatchObject({ ok: false, result: "Denied by bridge client.", error: { kind: "denied" } });
      expect(terminal.value).toMatchObject({ type: "run_complete", final_output: "Done: Denied by bridge client." });
      // Had the channel written the "true" frame, the approval would have been
      // denied by it and the raw frame would have got "No pending approval …".
      expect(client.unexpectedCommandErrors()).toEqual([]);
    });

    it("answers two pending approvals out of order (parallel scenario)", async () => {
      const { client } = await E2EClient.start(scenarioBackend(startMode));
      const start = await client.startRun("parallel");
      const pendingA = await client.waitForEvent(isApproval("pending", "tool-approval-1"), { from: start.index });
      const pendingB = await client.waitForEvent(isApproval("pending", "tool-approval-2"), { from: start.index });
      expectPendingNote(approvalOf(pendingA.value), "tool-approval-1", "/notes/a.txt", "call-1");
      expectPendingNote(approvalOf(pendingB.value), "tool-approval-2", "/notes/b.txt", "call-2");
      // Both outstanding at once: nothing was resolved and no tool ended yet.
      expect(client.eventsBetween(start.index).filter((e) => isApproval("resolved")(e) || toolEndOf(e))).toEqual([]);

      // The second request first…
      client.send({ type: "approve", id: "tool-approval-2", allowed: true });
      const resolvedB = await client.waitForEvent(isApproval("resolved", "tool-approval-2"), { from: start.index });
      const endB = await client.waitForEvent(isToolEnd("call-2"), { from: start.index });
      expect(approvalOf(resolvedB.value)!.final_decision).toEqual({ outcome: "allow", reason: null });
      expect(toolEndOf(endB.value)).toMatchObject({ ok: true, result: "Saved 6 characters to /notes/b.txt." });
      // …while the first is still pending…
      expect(client.eventsBetween(start.index).some(isApproval("resolved", "tool-approval-1"))).toBe(false);
      expect(client.eventsBetween(start.index).some(isToolEnd("call-1"))).toBe(false);

      // …then the first.
      client.send({ type: "approve", id: "tool-approval-1", allowed: false, reason: "Not a.txt." });
      const terminal = await client.waitForTerminal({ from: start.index });
      const run = client.eventsBetween(start.index, terminal.index + 1);
      const resolvedA = run.filter(isApproval("resolved", "tool-approval-1"));
      expect(resolvedA).toHaveLength(1);
      expect(approvalOf(resolvedA[0])!.final_decision).toEqual({ outcome: "deny", reason: "Not a.txt." });
      const endA = run.filter(isToolEnd("call-1"));
      expect(endA).toHaveLength(1);
      expect(toolEndOf(endA[0])).toMatchObject({ ok: false, result: "Not a.txt.", error: { message: "Not a.txt.", kind: "denied" } });
      expect(run.filter(isApproval("resolved"))).toHaveLength(2);
      expect(run.indexOf(endB.value)).toBeLessThan(run.indexOf(resolvedA[0]));

      expect(terminal.value).toMatchObject({
        type: "run_complete",
        final_output: "Results: Not a.txt. | Saved 6 characters to /notes/b.txt.",
        turn_count: 2,
      });
      expect(client.unexpectedCommandErrors()).toEqual([]);
    });

    it("cancels a run mid-stream, and ignores a cancel with no active run", async () => {
      const { client } = await E2EClient.start(scenarioBackend(startMode));
      // Idle: nothing to cancel (fresh process, no run has ever started).
      client.send({ type: "cancel" });
      const ignored = await client.waitForEvent((event) => event.type === "cancel_ignored");
      expect(ignored.value).toMatchObject({ reason: "no active run" });
      expect(client.events.map((event) => event.type)).toEqual(["ready", "cancel_ignored"]);

      const start = await client.startRun("slow 30");
      await client.waitForEvent(isTextDelta, { from: start.index }); // really mid-run
      client.send({ type: "cancel" });
      const answer = await client.waitForEvent(
        (event) => event.type === "cancel_requested" || event.type === "cancel_ignored",
        { from: start.index },
      );
      const terminal = await client.waitForTerminal({ from: start.index });

      // The backend accepting a new prompt proves the slow run is over: no
      // other terminal event of it can follow.
      const next = await client.run("chat after cancel");
      expect(next.terminal).toMatchObject({ type: "run_complete", final_output: "Hello! This is a scripted reply. You said: chat after cancel" });
      const slowRun = client.eventsBetween(start.index, next.startIndex);
      expect(slowRun.filter(isTerminal)).toEqual([terminal.value]);

      if (terminal.value.type === "run_cancelled") {
        expect(answer.value.type).toBe("cancel_requested");
        expect(answer.index).toBeLessThan(terminal.index);
      } else {
        // Completion won the race (§8.4, NOTES.md §6.4); impossible in practice for a 30 s run.
        expect(terminal.value.type).toBe("run_complete");
      }
      expect(slowRun.filter((event) => event.type === "cancel_requested" || event.type === "cancel_ignored")).toHaveLength(1);
      // The run really was cut short: far fewer than the 120 ticks of 30 s.
      expect(textDeltas(slowRun).length).toBeLessThan(120);
      expect(textDeltas(slowRun)[0]).toBe("tick 1 ");
    });

    it("resets mid-run: run_cancelled, then reset with the config, then a fresh conversation", async () => {
      const { client } = await E2EClient.start(scenarioBackend(startMode));
      const first = await client.run("count");
      expect(first.terminal).toMatchObject({ type: "run_complete", final_output: "This conversation has 1 user message(s).", turn_count: 1 });
      const second = await client.run("count");
      expect(second.terminal).toMatchObject({ type: "run_complete", final_output: "This conversation has 2 user message(s).", turn_count: 2 });

      const start = await client.startRun("slow 30");
      await client.waitForEvent(isTextDelta, { from: start.index });
      client.send({ type: "reset" });
      const reset = await client.waitForEvent((event) => event.type === "reset", { from: start.index });
      expect(reset.value).toEqual({ protocol_version: "1.0", type: "reset", ts: expect.any(Number), config: { model: "scripted-1" } });
      const slowRun = client.eventsBetween(start.index, reset.index + 1);
      expect(slowRun.filter(isTerminal).map((event) => event.type)).toEqual(["run_cancelled"]);
      expect(slowRun.at(-2)!.type).toBe("run_cancelled"); // immediately before reset
      expect(client.unexpectedCommandErrors()).toEqual([]);

      const after = await client.run("count");
      expect(after.terminal).toMatchObject({
        type: "run_complete",
        final_output: "This conversation has 1 user message(s).",
        turn_count: 1,
        response_count: 1,
      });
      const snapshot = after.events.map(nativeOf).find((r) => r && isNativeEvent(r, "state_snapshot"));
      expect(snapshot!.payload).toMatchObject({ boundary: "run_start", snapshot: { turn_count: 0, history_length: 1 } });
    });

    it("configure: accepted with the new document, rejected with the current snapshot", async () => {
      const { client } = await E2EClient.start(scenarioBackend(startMode));
      client.send({ type: "configure", patch: { model: "scripted-2" } });
      const accepted = await client.waitForEvent((event) => event.type === "config");
      expect(accepted.value).toEqual({
        protocol_version: "1.0",
        type: "config",
        ts: expect.any(Number),
        ok: true,
        config: { model: "scripted-2" },
        error: null,
      });

      client.send({ type: "configure", patch: { temperature: 1 } });
      const rejected = await client.waitForEvent((event) => event.type === "config", { from: accepted.index + 1 });
      expect(rejected.value).toEqual({
        protocol_version: "1.0",
        type: "config",
        ts: expect.any(Number),
        ok: false,
        config: { model: "scripted-2" },
        error: { code: "rejected", message: "Unknown config key: temperature." },
      });

      // The accepted document is what the backend now uses.
      const run = await client.run("chat which model");
      const llmEnd = run.events.map(nativeOf).find((r) => r && isNativeEvent(r, "llm_end"));
      expect((llmEnd!.payload as { response: { model: string } }).response.model).toBe("scripted-2");
      expect(client.events.map((event) => event.type).slice(0, 3)).toEqual(["ready", "config", "config"]);
    });

    it("reports a failing run as a run-scoped error and stays usable", async () => {
      const { client } = await E2EClient.start(scenarioBackend(startMode));
      const failed = await client.run("fail");
      expect(failed.terminal).toEqual({
        protocol_version: "1.0",
        type: "error",
        ts: expect.any(Number),
        scope: "run",
        message: "Scripted model failure.",
      });
      expect(textDeltas(failed.events)).toEqual(["This run ", "will fail."]);
      const labels = failed.events.map(label);
      expect(labels).toContain("model_stream:error");
      expect(labels.slice(-3)).toEqual(["state_snapshot:run_end", "run_event:agent_end", "error"]);
      // The traceback goes to stderr (a separate pipe, so no order relative
      // to stdout is implied), never to stdout.
      await client.waitFor((entry) => entry.kind === "stderr" && entry.line.includes("bridge_run_failed"));

      const next = await client.run("chat still alive");
      expect(next.terminal).toMatchObject({ type: "run_complete", final_output: "Hello! This is a scripted reply. You said: chat still alive" });
      // Exactly one terminal event for the failed run.
      expect(client.eventsBetween(failed.startIndex, next.startIndex).filter(isTerminal)).toEqual([failed.terminal]);
      expect(client.log.some((entry) => entry.kind === "decodeError" || entry.kind === "invalidLine")).toBe(false);
    });

    it("delivers a 20 MB tool result intact (big scenario)", async () => {
      const size = 20_000_000;
      const { client } = await E2EClient.start(scenarioBackend(startMode));
      const outcome = await client.run(`big ${size}`);
      expect(outcome.terminal).toMatchObject({ type: "run_complete", final_output: `Received ${size + 2} bytes of JSON` });
      const ends = outcome.events.map(toolEndOf).filter((payload) => payload !== undefined);
      expect(ends).toHaveLength(1);
      const end = ends[0]!;
      expect(end.ok).toBe(true);
      expect(end.tool_call.function.name).toBe("make_blob");
      const result = end.result as string;
      expect(typeof result).toBe("string");
      expect(result.length).toBe(size);
      // Compare without letting a mismatch print 20 MB.
      const expected = "0123456789abcdef".repeat(size / 16);
      if (result !== expected) {
        let at = 0;
        while (at < size && result[at] === expected[at]) at++;
        expect.fail(`result differs from the expected pattern at index ${at}: ${JSON.stringify(result.slice(at, at + 32))}`);
      }
      expect(client.log.filter((entry) => entry.kind !== "event")).toEqual([]);
    });

    it("shuts the real backend down within the grace period", async () => {
      const { client } = await E2EClient.start(scenarioBackend(startMode), { graceMs: 10_000 });
      const before = client.log.length;
      const started = Date.now();
      const exit = await client.close();
      expect(Date.now() - started).toBeLessThan(10_000);
      expect(exit).toEqual({ code: 0, signal: null });
      expect(client.finalizeCount).toBe(1);
      expect(client.channel.isShuttingDown()).toBe(true);
      const tail = client.log.slice(before);
      expect(tail.filter((entry) => entry.kind === "event").map(entryLabel)).toEqual(["shutdown"]);
      // Nothing else: no stderr, no send error, no invalid line. finalize runs
      // on the child's `exit`, onExit after `close` and the end of both streams;
      // the shutdown line and finalize are not ordered relative to each other.
      expect(tail.map(entryLabel).sort()).toEqual(["exit", "finalize", "shutdown"]);
      expect(tail.at(-1)!.kind).toBe("exit");
    });
  });
}

describe.sequential("e2e: fake backends and spawn failures", () => {
  it("reports a line cut by a dying backend as a decode error, then the exit status", async () => {
    const { client, ready } = await E2EClient.start(fakeBackend("dies_midline.py"));
    expect(ready.metadata).toEqual({ app: "dies-midline" });
    const exit = await client.exited;
    expect(exit).toEqual({ code: 3, signal: null });

    const fragment = '{"protocol_version":"1.0","type":"run_event","ts":1767225601.1,"event":{"type":"agent_st';
    expect(client.log.map((entry) => entry.kind)).toEqual(["event", "decodeError", "invalidLine", "exit"]);
    const [readyEntry, decodeEntry, invalidEntry] = client.log;
    expect(readyEntry).toEqual({ kind: "event", event: ready });
    if (decodeEntry.kind !== "decodeError" || invalidEntry.kind !== "invalidLine") throw new Error("unreachable");
    expect(decodeEntry.line).toBe(fragment);
    expect(decodeEntry.error).toBeInstanceOf(BridgeDecodeError);
    expect(decodeEntry.error.name).toBe("BridgeDecodeError");
    expect(decodeEntry.error.message.startsWith("Invalid JSON bridge event: ")).toBe(true);
    expect(decodeEntry.error.message.length).toBeGreaterThan("Invalid JSON bridge event: ".length);
    expect(decodeEntry.error.fields).toEqual([]);
    expect(invalidEntry.line).toBe(fragment);

    // Closing an exited backend finalizes at once and changes nothing else.
    await client.close();
    expect(client.finalizeCount).toBe(1);
    expect(client.log.map((entry) => entry.kind)).toEqual(["event", "decodeError", "invalidLine", "exit", "finalize"]);
  });

  it("SIGKILLs a backend that ignores shutdown after the grace period", async () => {
    const graceMs = 300;
    const { client, ready } = await E2EClient.start(fakeBackend("ignores_shutdown.py"), { graceMs });
    expect(ready.metadata).toEqual({ app: "ignores-shutdown" });
    const started = Date.now();
    const exit = await client.close();
    const elapsed = Date.now() - started;
    expect(exit).toEqual({ code: null, signal: "SIGKILL" });
    expect(elapsed).toBeGreaterThanOrEqual(graceMs - 5); // timers may fire a tick early
    expect(elapsed).toBeLessThan(10_000);
    expect(client.finalizeCount).toBe(1);
    expect(client.log.map(entryLabel)).toEqual(["ready", "finalize", "exit"]);
    // A second shutdown does nothing.
    client.channel.shutdown();
    expect(client.finalizeCount).toBe(1);
  });

  it("reports a missing executable through onSpawnError, then onExit with a negative code", async () => {
    const client = new E2EClient({ command: "/nonexistent/process-bridge-e2e-missing-binary", args: [] });
    await expect(client.ready()).rejects.toThrow(/exited/);
    const exit = await client.exited;
    expect(exit.code).toBeLessThan(0);
    expect(exit.signal).toBeNull();
    expect(client.log.map((entry) => entry.kind)).toEqual(["spawnError", "exit"]);
    const spawnError = client.log[0];
    if (spawnError.kind !== "spawnError") throw new Error("unreachable");
    expect(spawnError.error.message).toContain("ENOENT");
    // Shutting the channel down afterwards finalizes at once.
    await client.close();
    expect(client.finalizeCount).toBe(1);
  });
});
