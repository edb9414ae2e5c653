/**
 * Closing, close reasons and teardown from every state. The session layer (`createAgentSession`, docs/protocol.md §9.5)
 * against the scripted fake backend in ../fixtures/fake-backend.js; see
 * `harness.ts` for how a test drives it (real child process, waits on
 * events, the only timers are the ones under test).
 */
import { afterEach, describe, expect, it } from "vitest";

import { BridgeDecodeError, createAgentSession, SessionClosedError, type ApprovalRequest, type SessionClose } from "../../lib/index";
import { ev, flushMicrotasks, Harness, observe, STUBBORN, within } from "./harness";
import { x, startRun, manual, expectOneDonePerSegment, expectClosedError } from "./common";

const h = new Harness(createAgentSession);
afterEach(() => h.cleanup());

describe("close() and close reasons (§9.5.4 teardown)", () => {
  it("from idle: sends shutdown; reason 'shutdown' with the exit code; onClose once; later calls reject with SessionClosedError", async () => {
    const l = await h.launch();
    const closing = observe(l.session.close());
    expect((await l.fake.next()).line).toBe('{"type":"shutdown","protocol_version":"1.0"}');
    await closing.value();
    const close = { reason: "shutdown", code: 0, signal: null };
    expect(l.rec.of("close").map((e) => e.close)).toEqual([close]);
    await within(l.session.close(), "a second close()");
    for (const operation of [
      () => l.session.run("x"),
      () => l.session.cancel(),
      () => l.session.reset(),
      () => l.session.configure({ a: 1 }),
    ]) {
      expectClosedError(await observe(operation() as Promise<unknown>).error(), close as SessionClose);
    }
    expect(l.rec.of("close")).toHaveLength(1);
  });

  it("escalates to SIGKILL after shutdownGraceMs when the backend ignores shutdown (reason stays 'shutdown')", async () => {
    const l = await h.launch({ ...STUBBORN, on: { shutdown: [] } }, { shutdownGraceMs: 200 });
    await within(l.session.close(), "close()");
    expect(l.rec.of("close").map((e) => e.close)).toEqual([{ reason: "shutdown", code: null, signal: "SIGKILL" }]);
  });

  it("a backend shutdown event followed by its exit gives reason 'shutdown' without close()", async () => {
    const l = await h.launch();
    l.fake.steps({ emit: [ev.shutdown()] }, { exit: 0 });
    await l.rec.waitClose();
    expect(l.rec.of("close").map((e) => e.close)).toEqual([{ reason: "shutdown", code: 0, signal: null }]);
  });

  it("any other exit gives reason 'exit' with the code", async () => {
    const l = await h.launch();
    l.fake.exit(3);
    await l.rec.waitClose();
    expect(l.rec.of("close").map((e) => e.close)).toEqual([{ reason: "exit", code: 3, signal: null }]);
    await within(l.session.close(), "close() after the exit");
  });

  it("a decode error: protocol diagnostic, reason 'protocol-error' with code/signal null, SIGKILL; later lines are ignored", async () => {
    const l = await h.launch(STUBBORN);
    l.fake.emit("null", ev.runStart("ignored"), ev.shutdown());
    await l.rec.waitClose();
    const [close] = l.rec.of("close").map((e) => e.close);
    expect(close).toMatchObject({ reason: "protocol-error", code: null, signal: null });
    expect(close.error).toBeInstanceOf(BridgeDecodeError);
    expect(close.error.message).toBe("Bridge event must be a JSON object.");
    expect(l.rec.diagnostics()).toEqual([{ kind: "protocol", error: close.error, line: "null" }]);
    expect(await within(l.spawn.exit, "the child's exit")).toEqual({ code: null, signal: "SIGKILL" });
    // Every line had been delivered by the exit: none after the bad one reached onEvent.
    expect(l.rec.eventTypes()).toEqual(["ready"]);
    expect(l.rec.of("close")).toHaveLength(1);
  });

  it("a send failure (backend closed its stdin): send-failed diagnostic, reason 'exit' with null code/signal, SIGKILL", async () => {
    const l = await h.launch(STUBBORN);
    await l.fake.stepsAndSync({ closeStdin: true });
    const run = observe(l.session.run("x"));
    const close = { reason: "exit", code: null, signal: null } as SessionClose;
    expectClosedError(await run.error(), close);
    const failures = l.rec.diagnostics("send-failed");
    expect(failures).toHaveLength(1);
    expect((failures[0] as { message: string }).message).toMatch(/EPIPE/);
    expect(l.rec.of("close").map((e) => e.close)).toEqual([close]);
    expect(await within(l.spawn.exit, "the child's exit")).toEqual({ code: null, signal: "SIGKILL" });
    expect(l.rec.of("close")).toHaveLength(1);
  });

  it("a send failure (stdin already closed on the host side): 'bridge stdin is closed (command: reset)'", async () => {
    const l = await h.launch(STUBBORN);
    l.spawn.child.stdin!.destroy();
    const reset = observe(l.session.reset());
    const close = { reason: "exit", code: null, signal: null } as SessionClose;
    expectClosedError(await reset.error(), close);
    expect(l.rec.diagnostics()).toEqual([{ kind: "send-failed", message: "bridge stdin is closed (command: reset)" }]);
    expect(await within(l.spawn.exit, "the child's exit")).toEqual({ code: null, signal: "SIGKILL" });
    expect(l.rec.of("close").map((e) => e.close)).toEqual([close]);
  });

  it("a spawn error after ready only produces a send-failed diagnostic; the exit that follows closes the session", async () => {
    const l = await h.launch();
    l.spawn.child.emit("error", new Error("kill EPERM"));
    expect(l.rec.diagnostics()).toEqual([{ kind: "send-failed", message: "kill EPERM" }]);
    expect(l.rec.of("close")).toEqual([]);
    const run = await startRun(l);
    l.fake.emit(ev.runComplete("still alive"));
    await run.value();
    l.fake.exit(0);
    await l.rec.waitClose();
    expect(l.rec.of("close").map((e) => e.close)).toEqual([{ reason: "exit", code: 0, signal: null }]);
  });

  it("stderr lines become stderr diagnostics", async () => {
    const l = await h.launch();
    l.fake.stderr("WARNING something", "\u001b[31mTraceback\u001b[0m");
    await l.rec.waitFor((e) => e.kind === "diagnostic", "stderr diagnostics", 2);
    expect(l.rec.diagnostics()).toEqual([
      { kind: "stderr", line: "WARNING something" },
      { kind: "stderr", line: "\u001b[31mTraceback\u001b[0m" },
    ]);
  });
});

//

describe("teardown from every state (§9.5.4 teardown)", () => {
  it("idle: close() resolves and onClose is called exactly once", async () => {
    const l = await h.launch();
    await within(l.session.close(), "close()");
    await within(l.session.close(), "close() again");
    expect(l.rec.of("close")).toHaveLength(1);
    expect(l.rec.trace().at(-1)).toBe("close shutdown");
  });

  it("running with open text, tools, agents and approvals: everything is swept, the run rejects, onClose once", async () => {
    const decision = manual<boolean>();
    const requests: ApprovalRequest[] = [];
    const l = await h.launch(
      { on: { shutdown: [{ exit: 0 }] } },
      {
        approvals: (request) => {
          requests.push(request);
          return decision.promise;
        },
      },
    );
    const run = await startRun(l);
    l.fake.emit(ev.agentStart(), ev.toolStart("call-1"), ev.approvalPending("tool-approval-1"), ev.text("Still typing"));
    await l.rec.waitRecord("model_stream");
    await flushMicrotasks();
    expect(requests).toHaveLength(1);
    const closing = observe(l.session.close());
    await l.fake.expect("shutdown");
    await closing.value();
    const close = { reason: "shutdown", code: 0, signal: null } as SessionClose;
    expectClosedError(await run.error(), close);
    expect(l.rec.trace().slice(-4)).toEqual([
      'assistant 1 "" done',
      "tool cancelled call-1",
      "agent cancelled task-1",
      "close shutdown",
    ]);
    expect(requests[0].signal.aborted).toBe(true);
    expect(l.rec.of("resolved")).toEqual([]);
    decision.resolve(true);
    await decision.promise;
    await flushMicrotasks();
    expect(l.rec.diagnostics()).toEqual([]);
    expect(l.rec.of("close")).toHaveLength(1);
    expectOneDonePerSegment(l.rec);
  });

  it("pending configure, cancel, reset and run all reject with SessionClosedError when the backend exits", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    const configure = observe(l.session.configure({ a: 1 }));
    const cancel = observe(l.session.cancel());
    const cancel2 = observe(l.session.cancel());
    const reset = observe(l.session.reset());
    await l.fake.expect("configure");
    await l.fake.expect("cancel");
    await l.fake.expect("cancel");
    await l.fake.expect("reset");
    l.fake.exit(7);
    await l.rec.waitClose();
    const close = { reason: "exit", code: 7, signal: null } as SessionClose;
    for (const op of [run, configure, cancel, cancel2, reset]) expectClosedError(await op.error(), close);
    expect(l.rec.of("close").map((e) => e.close)).toEqual([close]);
    await within(l.session.close(), "close() after the exit");
    expect(l.rec.of("close")).toHaveLength(1);
  });

  it("close() while a configure and a reset are pending rejects them with SessionClosedError('shutdown')", async () => {
    const l = await h.launch();
    const configure = observe(l.session.configure({ a: 1 }));
    const reset = observe(l.session.reset());
    await l.fake.expect("configure");
    await l.fake.expect("reset");
    await within(l.session.close(), "close()");
    const close = { reason: "shutdown", code: 0, signal: null } as SessionClose;
    expectClosedError(await configure.error(), close);
    expectClosedError(await reset.error(), close);
    expect(l.rec.of("close")).toHaveLength(1);
  });

  it("a protocol-error teardown sweeps open text, tools and agents too", async () => {
    const l = await h.launch(STUBBORN);
    const run = await startRun(l);
    l.fake.emit(ev.agentStart(), ev.toolStart("call-1"), ev.text("partial"), "{broken");
    await l.rec.waitClose();
    expect(l.rec.trace().slice(-5)).toEqual([
      "diagnostic protocol",
      'assistant 1 "" done',
      "tool cancelled call-1",
      "agent cancelled task-1",
      "close protocol-error",
    ]);
    expect(((await run.error()) as SessionClosedError).close.reason).toBe("protocol-error");
  });
});
