/**
 * Runs, cancel and reset: operation settlement and the §12 prompt race. The session layer (`createAgentSession`, docs/protocol.md §9.5)
 * against the scripted fake backend in ../fixtures/fake-backend.js; see
 * `harness.ts` for how a test drives it (real child process, waits on
 * events, the only timers are the ones under test).
 */
import { afterEach, describe, expect, it } from "vitest";

import { BridgeCommandError, BridgeDecodeError, createAgentSession, RunError, SessionClosedError, SessionStateError } from "../../lib/index";
import { ev, flushMicrotasks, Harness, observe, STUBBORN, within, type Launched } from "./harness";
import { x, startRun, barrier, closeCatchingOrphanRejections, expectClosedError } from "./common";

const h = new Harness(createAgentSession);
afterEach(() => h.cleanup());

/** A run that has just completed: a prompt sent now can meet the §12 race. */
async function justEnded(l: Launched): Promise<void> {
  const run = await startRun(l, "first");
  l.fake.emit(ev.runComplete("done"));
  await run.value();
}

describe("run() (§9.5.4 operation settlement)", () => {
  it("sends the prompt as given (untrimmed) and resolves with the completed result", async () => {
    const l = await h.launch();
    const run = observe(l.session.run("  List the files  "));
    const received = await l.fake.next();
    expect(received.line).toBe('{"type":"prompt","text":"  List the files  ","protocol_version":"1.0"}');
    l.fake.emit(ev.runStart("List the files"), ev.runComplete({ files: ["a.txt"] }, 2, 3));
    expect(await run.value()).toEqual({ status: "completed", finalOutput: { files: ["a.txt"] }, turnCount: 2, responseCount: 3 });
  });

  it("resolves with {status: 'cancelled'} on run_cancelled", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    l.fake.emit(ev.runCancelled());
    expect(await run.value()).toEqual({ status: "cancelled" });
  });

  it("rejects with RunError(message) on a run-scoped error, also with an empty message", async () => {
    const l = await h.launch();
    for (const message of ["model exploded", ""]) {
      const run = await startRun(l);
      l.fake.emit(ev.runError(message));
      const error = await run.error();
      expect(error).toBeInstanceOf(RunError);
      expect((error as RunError).name).toBe("RunError");
      expect((error as RunError).message).toBe(message);
    }
  });

  it("local rejections send nothing: a run already active, blank prompts (JS trim)", async () => {
    const l = await h.launch();
    const run = await startRun(l, "first");
    const second = await observe(l.session.run("second")).error();
    expect(second).toBeInstanceOf(SessionStateError);
    expect((second as Error).name).toBe("SessionStateError");
    expect((second as Error).message).toBe("A run is already active.");
    l.fake.emit(ev.runComplete("done"));
    await run.value();
    for (const blank of ["", "   ", "\n\t\u00a0\u2028\ufeff"]) {
      const error = await observe(l.session.run(blank)).error();
      expect(error).toBeInstanceOf(SessionStateError);
      expect((error as Error).message).toBe("Prompt must not be empty.");
    }
    await barrier(l);
  });

  it("a command error attributed to the prompt rejects the run with RunError; the session stays usable", async () => {
    const l = await h.launch();
    // Not blank for JavaScript's trim, blank for Python's (§12.2 item 5).
    const refused = observe(l.session.run("\u001c"));
    await l.fake.expect("prompt");
    l.fake.emit(ev.commandError("Prompt must not be empty."));
    const error = await refused.error();
    expect(error).toBeInstanceOf(RunError);
    expect((error as Error).message).toBe("Prompt must not be empty.");
    expect(l.rec.diagnostics()).toEqual([]);

    const failed = observe(l.session.run("x"));
    await l.fake.expect("prompt");
    l.fake.emit(ev.commandError("Command failed: boom"));
    expect(((await failed.error()) as Error).message).toBe("Command failed: boom");

    const ok = await startRun(l);
    l.fake.emit(ev.runComplete("fine"));
    expect(await ok.value()).toMatchObject({ status: "completed", finalOutput: "fine" });
  });

  it("(deliberate) a prompt refused with 'A run is already active.' is resent, and the run then succeeds", async () => {
    const l = await h.launch();
    await justEnded(l);
    const run = observe(l.session.run("again"));
    await l.fake.expect("prompt");
    l.fake.emit(ev.commandError("A run is already active."));
    const retried = await l.fake.next();
    expect(retried.line).toBe('{"type":"prompt","text":"again","protocol_version":"1.0"}');
    expect(run.state.status).toBe("pending");
    l.fake.emit(ev.runStart("again"), ev.runComplete("ok"));
    expect(await run.value()).toEqual({ status: "completed", finalOutput: "ok", turnCount: 1, responseCount: 1 });
    expect(l.rec.diagnostics()).toEqual([]);
  });

  it("(deliberate) after 5 resends, a sixth refusal rejects the run with RunError('A run is already active.')", async () => {
    const l = await h.launch();
    await justEnded(l);
    const run = observe(l.session.run("again"));
    for (let attempt = 1; attempt <= 6; attempt++) {
      await l.fake.expect("prompt");
      expect(run.state.status, `after ${attempt - 1} refusals`).toBe("pending");
      l.fake.emit(ev.commandError("A run is already active."));
    }
    const error = await run.error();
    expect(error).toBeInstanceOf(RunError);
    expect((error as Error).message).toBe("A run is already active.");
    await barrier(l); // no seventh prompt
  });

  it("regression (deliberate retry): cancel() while a refused prompt waits to be resent settles, and the prompt is not resent", async () => {
    // The fake answers every cancel as the backend would here (it has no run of ours).
    const l = await h.launch({ on: { cancel: [{ emit: [ev.cancelIgnored("no active run")] }] } });
    await justEnded(l);
    const run = observe(l.session.run("again"));
    await l.fake.expect("prompt");
    l.fake.emit(ev.commandError("A run is already active."));
    await l.rec.waitFor((e) => e.kind === "event" && e.event.type === "error", "the refusal");
    // Within the resend delay, nothing of this session runs in the backend.
    const cancel = observe(l.session.cancel());
    // Whether or not a cancel command is sent, cancel() must settle without
    // the run being started and completed first.
    await within(cancel.settled, "cancel() to settle while no run is active", 1_000);
    expect(cancel.state.status).toBe("fulfilled");
    await run.result("the run to settle");
    expect(run.state).not.toMatchObject({ status: "fulfilled", value: { status: "completed" } });
    // No prompt was written after the cancel.
    const done = observe(l.session.configure({}));
    const after: string[] = [];
    for (;;) {
      const received = await l.fake.next("the barrier configure");
      if (received.command?.type === "configure") break;
      after.push(received.line);
    }
    l.fake.emit(ev.configOk({}));
    await done.value();
    expect(after.filter((line) => line.includes('"type":"prompt"'))).toEqual([]);
  });

  it("the run settles after every callback caused by its terminal event; onEvent comes first", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    const run = await startRun(l);
    void run.settled.then(() => l.rec.note("run settled"));
    l.fake.emit(ev.agentStart(), ev.toolStart("call-1"), ev.text("Almost"), ev.runComplete({ not: "a string" }));
    await run.value();
    expect(l.rec.trace()).toEqual([
      "event ready",
      "event run_start",
      "event run_event:agent_start",
      "agent start task-1",
      "event run_event:tool_start",
      "tool start call-1",
      "event run_event:model_stream",
      "event run_complete",
      'assistant 1 "Almost" done',
      "tool cancelled call-1",
      "agent cancelled task-1",
      "run settled",
    ]);
  });

  it("regression: run() never throws synchronously: a prompt the encoder refuses (lone surrogate) becomes a rejected promise", async () => {
    const l = await h.launch();
    try {
      let result: Promise<unknown> | undefined;
      expect(() => {
        result = l.session.run("broken \ud800 text");
      }).not.toThrow();
      await expect(result).rejects.toBeInstanceOf(Error);
    } finally {
      await closeCatchingOrphanRejections(l.session);
    }
  });

  it("regression: a prompt the encoder refuses leaves no run behind: the next run() is accepted and sent", async () => {
    const l = await h.launch();
    try {
      try {
        await l.session.run("x".repeat(1_000_001)); // over the backend's line limit
      } catch {
        // Rejected (or thrown): either way this prompt is not sent.
      }
      const next = observe(l.session.run("hello"));
      await flushMicrotasks();
      expect(next.state).not.toMatchObject({ status: "rejected" });
      await l.fake.expect("prompt");
      l.fake.emit(ev.runStart("hello"), ev.runComplete("hi"));
      expect(await next.value()).toMatchObject({ status: "completed" });
    } finally {
      await closeCatchingOrphanRejections(l.session);
    }
  });
});

//

describe("cancel() (§9.5.4)", () => {
  it("with no active run resolves at once and sends nothing", async () => {
    const l = await h.launch();
    await within(l.session.cancel(), "cancel()");
    await barrier(l);
  });

  it("is sent; cancel_requested alone does not settle it; run_cancelled resolves every waiter", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    const first = observe(l.session.cancel());
    const second = observe(l.session.cancel());
    expect((await l.fake.next()).line).toBe('{"type":"cancel","protocol_version":"1.0"}');
    await l.fake.expect("cancel");
    l.fake.emit(ev.cancelRequested(), ev.cancelIgnored("cancellation already in progress"));
    await l.rec.waitEvent("cancel_ignored");
    expect(first.state.status).toBe("pending");
    expect(second.state.status).toBe("pending");
    l.fake.emit(ev.runCancelled());
    await first.value();
    await second.value();
    expect(await run.value()).toEqual({ status: "cancelled" });
  });

  it("a natural completion resolves cancel()", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    const cancel = observe(l.session.cancel());
    await l.fake.expect("cancel");
    l.fake.emit(ev.cancelRequested(), ev.runComplete("won the race"));
    await cancel.value();
    expect(await run.value()).toMatchObject({ status: "completed", finalOutput: "won the race" });
  });

  it("a run error resolves cancel() (the run rejects)", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    const cancel = observe(l.session.cancel());
    await l.fake.expect("cancel");
    l.fake.emit(ev.cancelRequested(), ev.runError("Run cancellation cleanup failed: x"));
    await cancel.value();
    expect(((await run.error()) as Error).message).toBe("Run cancellation cleanup failed: x");
  });

  it("cancel_requested / cancel_ignored arriving while no run is active resolve the waiters", async () => {
    const l = await h.launch();
    const run = observe(l.session.run("x"));
    const cancel = observe(l.session.cancel());
    await l.fake.expect("prompt");
    await l.fake.expect("cancel");
    l.fake.emit(ev.commandError("Command failed: no"));
    await run.error();
    expect(cancel.state.status).toBe("pending");
    l.fake.emit(ev.cancelIgnored("no active run"));
    await cancel.value();
  });

  it("a command error attributed to cancel rejects it with RunError; the run goes on", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    const cancel = observe(l.session.cancel());
    await l.fake.expect("cancel");
    l.fake.emit(ev.commandError("Command failed: nope"));
    const error = await cancel.error();
    expect(error).toBeInstanceOf(RunError);
    expect((error as Error).message).toBe("Command failed: nope");
    expect(run.state.status).toBe("pending");
    l.fake.emit(ev.runComplete("fine"));
    expect(await run.value()).toMatchObject({ status: "completed" });
  });
});

//

describe("reset() (§9.5.4)", () => {
  it("is sent and resolves on the reset event; without config the cache is unchanged", async () => {
    const l = await h.launch({ start: [{ emit: [ev.ready({ config: { model: "gpt-a" } })] }] });
    const reset = observe(l.session.reset());
    expect((await l.fake.next()).line).toBe('{"type":"reset","protocol_version":"1.0"}');
    l.fake.emit(ev.reset());
    await reset.value();
    expect(l.session.config).toEqual({ model: "gpt-a" });
    expect(l.rec.of("configChanged")).toEqual([]);
  });

  it("reset.config is decoded, cached and announced before reset() resolves", async () => {
    const l = await h.launch({}, { decodeConfig: (raw: Record<string, unknown>) => ({ ...raw, decoded: true }) });
    const reset = observe(l.session.reset());
    void reset.settled.then(() => l.rec.note("reset resolved"));
    await l.fake.expect("reset");
    l.fake.emit(ev.reset({ model: "gpt-b" }));
    await reset.value();
    expect(l.session.config).toEqual({ model: "gpt-b", decoded: true });
    expect(l.rec.trace().slice(-3)).toEqual(["event reset", 'configChanged {"model":"gpt-b","decoded":true}', "reset resolved"]);
  });

  it("during a run: the run ends as cancelled through run_cancelled, then reset() resolves", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    void run.settled.then(() => l.rec.note("run settled"));
    const reset = observe(l.session.reset());
    void reset.settled.then(() => l.rec.note("reset settled"));
    await l.fake.expect("reset");
    l.fake.emit(ev.runCancelled(), ev.reset());
    await reset.value();
    expect(await run.value()).toEqual({ status: "cancelled" });
    expect(l.rec.trace().filter((t) => t.endsWith("settled"))).toEqual(["run settled", "reset settled"]);
  });

  it("several reset() calls all resolve on the reset event", async () => {
    const l = await h.launch();
    const first = observe(l.session.reset());
    const second = observe(l.session.reset());
    await l.fake.expect("reset");
    await l.fake.expect("reset");
    l.fake.emit(ev.reset());
    await first.value();
    await second.value();
    l.fake.emit(ev.reset());
    await l.rec.waitEvent("reset", 2);
    await barrier(l);
  });

  it("a command error attributed to reset rejects it with RunError", async () => {
    const l = await h.launch();
    const reset = observe(l.session.reset());
    await l.fake.expect("reset");
    l.fake.emit(ev.commandError("Command failed: state store offline"));
    const error = await reset.error();
    expect(error).toBeInstanceOf(RunError);
    expect((error as Error).message).toBe("Command failed: state store offline");
  });

  it("reset.config that decodeConfig rejects: protocol-error close, SIGKILL, reset() rejects with SessionClosedError", async () => {
    const l = await h.launch(STUBBORN, {
      decodeConfig: (raw: Record<string, unknown>) => {
        if (raw.bad) throw new Error("bad doc");
        return raw;
      },
    });
    const reset = observe(l.session.reset());
    await l.fake.expect("reset");
    l.fake.emit(ev.reset({ bad: true }));
    const error = await reset.error();
    const close = (error as SessionClosedError).close;
    expect(close).toMatchObject({ reason: "protocol-error", code: null, signal: null });
    expectClosedError(error, close);
    const decodeError = (close as { error: BridgeDecodeError }).error;
    expect(decodeError).toBeInstanceOf(BridgeDecodeError);
    expect(decodeError.message).toBe("Invalid runtime config document: bad doc");
    expect(decodeError.fields).toEqual(["config"]);
    expect(l.rec.diagnostics()).toEqual([{ kind: "protocol", error: decodeError, line: "" }]);
    expect(l.rec.of("configChanged")).toEqual([]);
    expect(await within(l.spawn.exit, "the child's exit")).toEqual({ code: null, signal: "SIGKILL" });
    expect(l.rec.of("close").map((e) => e.close)).toEqual([close]);
  });
});

//

describe("run errors carry a stable code", () => {
  it("run-failed, command-refused, run-active, invalid-prompt (with the encoder's refusal as cause)", async () => {
    const l = await h.launch();
    const failing = await startRun(l);
    l.fake.emit(ev.runError("model exploded"));
    expect(((await failing.error()) as RunError).code).toBe("run-failed");

    const refused = observe(l.session.run("\u001c"));
    await l.fake.expect("prompt");
    l.fake.emit(ev.commandError("Prompt must not be empty."));
    expect(((await refused.error()) as RunError).code).toBe("command-refused");

    const active = await startRun(l);
    expect(((await observe(l.session.run("again")).error()) as SessionStateError).code).toBe("run-active");
    l.fake.emit(ev.runComplete("done"));
    await active.value();

    expect(((await observe(l.session.run(" ")).error()) as SessionStateError).code).toBe("invalid-prompt");
    const unencodable = (await observe(l.session.run("a\ud800")).error()) as SessionStateError;
    expect(unencodable.code).toBe("invalid-prompt");
    expect(unencodable.cause).toBeInstanceOf(BridgeCommandError);
    expect((unencodable.cause as BridgeCommandError).code).toBe("unpaired-surrogate");
    await barrier(l);
  });
});

describe("the §12 prompt race, exactly (issue \"Drop-in and pleasant\")", () => {
  it("a refusal that cannot be the race (no run ended just before) rejects at once with RunError, as the reference does", async () => {
    const l = await h.launch();
    const run = observe(l.session.run("again"));
    await l.fake.expect("prompt");
    l.fake.emit(ev.commandError("A run is already active."));
    const error = await run.error();
    expect(error).toBeInstanceOf(RunError);
    expect([(error as RunError).message, (error as RunError).code]).toEqual(["A run is already active.", "command-refused"]);
    await barrier(l); // not resent
  });

  it("raced, with a reset sent after the prompt: not resent (that would reorder them); the run ends cancelled and the reset resolves", async () => {
    const l = await h.launch();
    await justEnded(l);
    const run = observe(l.session.run("again"));
    const reset = observe(l.session.reset());
    await l.fake.expect("prompt");
    await l.fake.expect("reset");
    l.fake.emit(ev.commandError("A run is already active."));
    expect(await run.value()).toEqual({ status: "cancelled" });
    l.fake.emit(ev.reset());
    await reset.value();
    await barrier(l); // no prompt after the reset
  });
});

describe("the reset race (issue \"Hangs, leaks and wrong results\", item 10)", () => {
  const refusal = "Command failed: Cannot reset while a primary run is active.";

  it("a reset refused just after its cancel ended the run is sent again, and resolves", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    const reset = observe(l.session.reset());
    await l.fake.expect("reset");
    l.fake.emit(ev.runCancelled(), ev.commandError(refusal));
    expect(await run.value()).toEqual({ status: "cancelled" });
    await l.fake.expect("reset");
    expect(reset.state.status).toBe("pending");
    l.fake.emit(ev.reset());
    await reset.value();
    expect(l.rec.diagnostics()).toEqual([]);
  });

  it("the same refusal without a run that just ended, or with another command sent since, rejects as before", async () => {
    const l = await h.launch();
    const reset = observe(l.session.reset());
    await l.fake.expect("reset");
    l.fake.emit(ev.commandError(refusal));
    expect(((await reset.error()) as RunError).message).toBe(refusal);

    const run = await startRun(l);
    const second = observe(l.session.reset());
    await l.fake.expect("reset");
    const configure = observe(l.session.configure({ model: "m" }));
    await l.fake.expect("configure");
    l.fake.emit(ev.runCancelled(), ev.commandError(refusal), ev.configOk({ model: "m" }));
    await run.value();
    expect(((await second.error()) as RunError).message).toBe(refusal);
    await configure.value();
    await barrier(l);
  });
});
