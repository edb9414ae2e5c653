/**
 * Command correlation and per-event processing order. The session layer (`createAgentSession`, docs/protocol.md §9.5)
 * against the scripted fake backend in ../fixtures/fake-backend.js; see
 * `harness.ts` for how a test drives it (real child process, waits on
 * events, the only timers are the ones under test).
 */
import { afterEach, describe, expect, it } from "vitest";

import { ConfigureError, createAgentSession, RunError } from "../../lib/index";
import { ev, Harness, observe, STUBBORN, within } from "./harness";
import { startRun } from "./common";

const h = new Harness(createAgentSession);
afterEach(() => h.cleanup());

describe("command correlation (§8.11, §9.5.4)", () => {
  it("acknowledgements take the oldest entry of their own kind; a command error goes to the oldest remaining entry", async () => {
    const l = await h.launch();
    const configure = observe(l.session.configure({ a: 1 }));
    const reset = observe(l.session.reset());
    await l.fake.expect("configure");
    await l.fake.expect("reset");
    l.fake.emit(ev.reset(), ev.commandError("Unknown command: configure"));
    await reset.value();
    const error = await configure.error();
    expect(error).toBeInstanceOf(ConfigureError);
    expect((error as ConfigureError).code).toBe("unsupported");

    const reset2 = observe(l.session.reset());
    const configure2 = observe(l.session.configure({ b: 2 }));
    await l.fake.expect("reset");
    await l.fake.expect("configure");
    l.fake.emit(ev.configOk({ b: 2 }), ev.commandError("Command failed: reset"));
    expect(await configure2.value()).toEqual({ b: 2 });
    expect(((await reset2.error()) as Error).message).toBe("Command failed: reset");
    expect(l.rec.diagnostics()).toEqual([]);
  });

  it("run_start acknowledges the prompt, so a later command error goes to the next command", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    const cancel = observe(l.session.cancel());
    await l.fake.expect("cancel");
    l.fake.emit(ev.commandError("Command failed: cancel"));
    expect(await cancel.error()).toBeInstanceOf(RunError);
    expect(run.state.status).toBe("pending");
    const cancel2 = observe(l.session.cancel());
    await l.fake.expect("cancel");
    l.fake.emit(ev.cancelRequested(), ev.runCancelled());
    await cancel2.value();
    // cancel_requested acknowledged the cancel: a stray error is unattributed.
    l.fake.emit(ev.commandError("stray"));
    await l.rec.waitFor((e) => e.kind === "diagnostic", "a diagnostic");
    expect(l.rec.diagnostics()).toEqual([{ kind: "command-rejected", message: "stray" }]);
    expect(await run.value()).toEqual({ status: "cancelled" });
  });

  it("a command error with nothing pending becomes a command-rejected diagnostic", async () => {
    const l = await h.launch();
    l.fake.emit(ev.commandError("Invalid JSON command."));
    await l.rec.waitFor((e) => e.kind === "diagnostic", "a diagnostic");
    expect(l.rec.diagnostics()).toEqual([{ kind: "command-rejected", message: "Invalid JSON command." }]);
  });

  it("a command error attributed to an approve becomes a command-rejected diagnostic", async () => {
    const l = await h.launch({}, { approvals: () => true });
    const run = await startRun(l);
    l.fake.emit(ev.approvalPending("tool-approval-1"));
    await l.fake.expect("approve");
    l.fake.emit(ev.commandError("No pending approval request for id tool-approval-1."));
    await l.rec.waitFor((e) => e.kind === "diagnostic", "a diagnostic");
    expect(l.rec.diagnostics()).toEqual([
      { kind: "command-rejected", message: "No pending approval request for id tool-approval-1." },
    ]);
    expect(run.state.status).toBe("pending");
    l.fake.emit(ev.runComplete("ok"));
    await run.value();
  });

  it("a command error attributed to shutdown becomes a command-rejected diagnostic", async () => {
    const l = await h.launch({ on: { shutdown: [{ emit: [ev.commandError("Command failed: busy")] }, { exit: 0 }] } });
    await within(l.session.close(), "close()");
    expect(l.rec.diagnostics()).toEqual([{ kind: "command-rejected", message: "Command failed: busy" }]);
    expect(l.rec.of("close").map((e) => e.close)).toEqual([{ reason: "shutdown", code: 0, signal: null }]);
  });

  it("a resolved tool_approval record removes the approve entry with its request_id", async () => {
    const l = await h.launch({}, { approvals: () => true });
    await startRun(l);
    l.fake.emit(ev.approvalPending("tool-approval-1"), ev.approvalPending("tool-approval-2"));
    await l.fake.expect("approve");
    await l.fake.expect("approve");
    l.fake.emit(ev.approvalResolved("tool-approval-2", "allow"), ev.approvalResolved("tool-approval-1", "allow"));
    await l.rec.waitFor((e) => e.kind === "resolved", "two resolutions", 2);
    const reset = observe(l.session.reset());
    await l.fake.expect("reset");
    l.fake.emit(ev.commandError("Command failed: reset"));
    expect(((await reset.error()) as Error).message).toBe("Command failed: reset");
    expect(l.rec.diagnostics()).toEqual([]);
  });

  it("(deliberate) an approve answered silently is dropped once a later command is acknowledged", async () => {
    const l = await h.launch({}, { approvals: () => true });
    await startRun(l);
    l.fake.emit(ev.approvalPending("tool-approval-1"));
    await l.fake.expect("approve");
    // No resolved record (e.g. a cancel closed the stream at the same moment).
    const configure = observe(l.session.configure({ a: 1 }));
    await l.fake.expect("configure");
    l.fake.emit(ev.configOk({ a: 1 }));
    await configure.value();
    const reset = observe(l.session.reset());
    await l.fake.expect("reset");
    l.fake.emit(ev.commandError("Command failed: reset"));
    const error = await reset.error();
    expect(error).toBeInstanceOf(RunError);
    expect(l.rec.diagnostics()).toEqual([]);
  });
});

//

describe("per-event processing order (§9.5.4)", () => {
  it("onEvent sees every event in wire order, each before its semantic processing", async () => {
    const l = await h.launch({}, { approvals: () => true });
    const run = await startRun(l);
    l.fake.emit(
      ev.agentStart(),
      ev.text("Saving."),
      ev.toolStart("call-7"),
      ev.approvalPending("tool-approval-1"),
      ev.approvalResolved("tool-approval-1", "allow"),
      ev.toolEnd("call-7", "write", "{}", { result: "wrote" }),
      ev.plan([{ step: "a", status: "completed" }]),
      ev.agentEnd({ final_output: "Saved." }),
      ev.runComplete("Saved.", 2, 2),
    );
    expect(await run.value()).toEqual({ status: "completed", finalOutput: "Saved.", turnCount: 2, responseCount: 2 });
    expect(l.rec.trace()).toEqual([
      "event ready",
      "event run_start",
      "event run_event:agent_start",
      "agent start task-1",
      "event run_event:model_stream",
      'assistant 1 "Saving."',
      "event run_event:tool_start",
      'assistant 1 "" done',
      "tool start call-7",
      "event run_event:tool_approval",
      "event run_event:tool_approval",
      "resolved true",
      "event run_event:tool_end",
      "tool end call-7",
      "event run_event:plan_updated",
      "plan task-1",
      "event run_event:agent_end",
      "agent end task-1",
      "event run_complete",
      'assistant 2 "Saved." done',
    ]);
  });

  it("events are ignored completely once the session has closed", async () => {
    const l = await h.launch(STUBBORN);
    // The config event closes the session (protocol failure): the next line is not delivered.
    l.fake.emit(ev.configOk({}), ev.runStart("after"));
    await within(l.spawn.exit, "exit");
    expect(l.rec.eventTypes()).toEqual(["ready", "config"]);
  });
});

//
