/**
 * Native records mapped to tool, agent and plan activity. The session layer (`createAgentSession`, docs/protocol.md §9.5)
 * against the scripted fake backend in ../fixtures/fake-backend.js; see
 * `harness.ts` for how a test drives it (real child process, waits on
 * events, the only timers are the ones under test).
 */
import { afterEach, describe, expect, it } from "vitest";

import { createAgentSession } from "../../lib/index";
import { ev, Harness } from "./harness";
import { x, startRun } from "./common";

const h = new Harness(createAgentSession);
afterEach(() => h.cleanup());

describe("native mapping (§9.5.4)", () => {
  it("tools: start/end with ToolCallInfo (arguments parsed or raw, isPlan, isDelegation); end without start; cancelled on sweep", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    l.fake.emit(
      ev.toolStart("call-7", "write", '{"path":"notes.txt"}', { agent: "Assistant", taskId: "task-1" }),
      ev.toolEnd("call-7", "write", '{"path":"notes.txt"}', { ok: true, result: "wrote 12 bytes" }),
      ev.toolStart("call-8", "write_plan", "not json {", { agent: "Planner", taskId: "task-2", parent: "task-1", delegation: true }),
      ev.toolEnd("call-9", "bash", '{"command":"sleep 99"}', {
        ok: false,
        result: "[Command timed out]",
        error: { message: "Command exceeded 30s.", kind: "timeout" },
      }),
      ev.runCancelled(),
    );
    await run.value();
    const write = { callId: "call-7", tool: "write", agent: "Assistant", taskId: "task-1", arguments: { path: "notes.txt" }, isPlan: false, isDelegation: false };
    const plan = { callId: "call-8", tool: "write_plan", agent: "Planner", taskId: "task-2", arguments: "not json {", isPlan: true, isDelegation: true };
    const bash = { callId: "call-9", tool: "bash", agent: "Assistant", taskId: "task-1", arguments: { command: "sleep 99" }, isPlan: false, isDelegation: false };
    expect(l.rec.of("tool").map((e) => e.activity)).toEqual([
      { phase: "start", call: write },
      { phase: "end", call: write, ok: true, result: "wrote 12 bytes", error: null },
      { phase: "start", call: plan },
      { phase: "end", call: bash, ok: false, result: "[Command timed out]", error: { message: "Command exceeded 30s.", kind: "timeout" } },
      { phase: "cancelled", call: plan },
    ]);
  });

  it("agents: start/end with AgentInfo; finalOutput from the result, undefined when result is null; end without start; cancelled on sweep", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    const helper = { agent: "Helper", taskId: "task-2", parent: "task-1" };
    l.fake.emit(
      ev.agentStart(),
      ev.agentStart(helper),
      ev.agentEnd(null, helper),
      ev.agentEnd({ final_output: { files: 2 } }),
      ev.agentEnd({ final_output: null }, { agent: "Ghost", taskId: "task-3", parent: "task-1" }),
      ev.agentStart({ agent: "Late", taskId: "task-4", parent: "task-1" }),
      ev.runComplete("x"),
    );
    await run.value();
    const root = { agent: "Assistant", taskId: "task-1", parentTaskId: null, isRoot: true };
    const child = { agent: "Helper", taskId: "task-2", parentTaskId: "task-1", isRoot: false };
    const activities = l.rec.of("agent").map((e) => e.activity);
    expect(activities).toEqual([
      { phase: "start", info: root },
      { phase: "start", info: child },
      { phase: "end", info: child, finalOutput: undefined },
      { phase: "end", info: root, finalOutput: { files: 2 } },
      { phase: "end", info: { agent: "Ghost", taskId: "task-3", parentTaskId: "task-1", isRoot: false }, finalOutput: null },
      { phase: "start", info: { agent: "Late", taskId: "task-4", parentTaskId: "task-1", isRoot: false } },
      { phase: "cancelled", info: { agent: "Late", taskId: "task-4", parentTaskId: "task-1", isRoot: false } },
    ]);
    expect("finalOutput" in activities[2]).toBe(true);
  });

  it("plans: statuses in_progress/active → active, completed, blocked, anything else → pending; rawStatus kept", async () => {
    const l = await h.launch();
    await startRun(l);
    const statuses = ["in_progress", "active", "completed", "blocked", "pending", "done", "", "IN_PROGRESS"];
    l.fake.emit(ev.plan(statuses.map((status, i) => ({ step: `s${i}`, status })), "Halfway there.", { agent: "Planner", taskId: "task-2", parent: "task-1" }));
    await l.rec.waitFor((e) => e.kind === "plan", "onPlan");
    expect(l.rec.of("plan").map((e) => e.plan)).toEqual([
      {
        agent: "Planner",
        taskId: "task-2",
        explanation: "Halfway there.",
        steps: [
          { text: "s0", status: "active", rawStatus: "in_progress" },
          { text: "s1", status: "active", rawStatus: "active" },
          { text: "s2", status: "completed", rawStatus: "completed" },
          { text: "s3", status: "blocked", rawStatus: "blocked" },
          { text: "s4", status: "pending", rawStatus: "pending" },
          { text: "s5", status: "pending", rawStatus: "done" },
          { text: "s6", status: "pending", rawStatus: "" },
          { text: "s7", status: "pending", rawStatus: "IN_PROGRESS" },
        ],
      },
    ]);
    l.fake.emit(ev.plan([], null));
    await l.rec.waitFor((e) => e.kind === "plan", "onPlan", 2);
    expect(l.rec.of("plan")[1].plan).toEqual({ agent: "Assistant", taskId: "task-1", explanation: null, steps: [] });
  });

  it("regression: plans: wire statuses named like Object.prototype members ('toString', 'constructor', '__proto__') map to pending", async () => {
    const l = await h.launch();
    await startRun(l);
    const statuses = ["toString", "constructor", "__proto__", "hasOwnProperty"];
    l.fake.emit(ev.plan(statuses.map((status) => ({ step: status, status }))));
    await l.rec.waitFor((e) => e.kind === "plan", "onPlan");
    expect(l.rec.of("plan")[0].plan.steps).toEqual(statuses.map((status) => ({ text: status, status: "pending", rawStatus: status })));
  });
});

//
