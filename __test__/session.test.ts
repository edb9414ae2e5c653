/**
 * The session layer (`createAgentSession`, PROTOCOL.md §9.5) against the
 * scripted fake backend in fixtures/fake-backend.js.
 *
 * Each test starts a real child process (the fake) and drives it through its
 * control channel: the test reads every command the session wrote to the
 * fake's stdin and decides which lines the fake writes to stdout. Waits are
 * on events (session callbacks, commands arriving, promises settling, the
 * child's exit as handled by the session); the only timers are the ones
 * under test (ready timeout, shutdown grace, the 120 ms text coalescing, the
 * prompt retry delay).
 *
 * `spawnBridgeProcess` is wrapped (not replaced) so that a test can see the
 * child (to check it was SIGKILLed) and know when the session has handled
 * its exit.
 */
import { afterEach, describe, expect, it, vi } from "vitest";

vi.mock("../lib/process", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../lib/process")>();
  const { spySpawn } = await import("./session-harness");
  return { ...actual, spawnBridgeProcess: spySpawn(actual.spawnBridgeProcess) };
});

import {
  BridgeDecodeError,
  ConfigureError,
  createAgentSession,
  RunError,
  SessionClosedError,
  SessionStartError,
  SessionStateError,
  type AgentSession,
  type ApprovalRequest,
  type SessionClose,
} from "../lib/index";
import {
  APPROVAL_REQUEST,
  ev,
  flushMicrotasks,
  Harness,
  observe,
  Recorder,
  spawned,
  STUBBORN,
  within,
  type Launched,
} from "./session-harness";

const h = new Harness(createAgentSession);
afterEach(() => h.cleanup());

const x = (n: number, c = "x") => c.repeat(n);

/** Starts a run and lets the fake acknowledge it with run_start. */
async function startRun(l: Launched, text = "go") {
  const run = observe(l.session.run(text));
  await l.fake.expect("prompt");
  l.fake.emit(ev.runStart(text));
  await l.rec.waitEvent("run_start");
  return run;
}

/**
 * Proves that nothing else was written to stdin before it: sends a
 * `configure({})`, requires it to be the very next command, and answers it.
 */
async function barrier(l: Launched): Promise<void> {
  const done = observe(l.session.configure({}));
  const next = await l.fake.next("the barrier command");
  expect(next.command?.type, `unexpected command before the barrier: ${next.line}`).toBe("configure");
  l.fake.emit(ev.configOk({}));
  await done.value("the barrier configure");
}

/** A deferred the test resolves by hand (slow approval policies). */
function manual<T>() {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** Every segment seen in the log got exactly one done:true chunk, its last. */
function expectOneDonePerSegment(rec: Recorder): void {
  const bySegment = new Map<number, boolean[]>();
  for (const chunk of rec.chunks()) bySegment.set(chunk.segment, [...(bySegment.get(chunk.segment) ?? []), chunk.done]);
  for (const [segment, dones] of bySegment) {
    expect(dones.filter(Boolean), `segment ${segment}`).toHaveLength(1);
    expect(dones[dones.length - 1], `segment ${segment}`).toBe(true);
  }
}

/**
 * Closes a session whose `run()` threw synchronously after creating its run
 * promise (the bugs below): teardown rejects that promise, which nobody can
 * observe. Its unhandled rejection is caught here, inside the test that
 * caused it, instead of being reported against whichever test runs next.
 * Returns the reasons caught.
 */
async function closeCatchingOrphanRejections(session: AgentSession): Promise<unknown[]> {
  const caught: unknown[] = [];
  const saved = process.listeners("unhandledRejection");
  process.removeAllListeners("unhandledRejection");
  const catcher = (reason: unknown) => caught.push(reason);
  process.on("unhandledRejection", catcher);
  try {
    await within(session.close(), "close()");
    // Unhandled rejections are reported once the microtask queue has drained.
    await flushMicrotasks();
    await flushMicrotasks();
  } finally {
    process.off("unhandledRejection", catcher);
    for (const listener of saved) process.on("unhandledRejection", listener as (...args: unknown[]) => void);
  }
  return caught;
}

function expectClosedError(error: unknown, close: SessionClose): void {
  expect(error).toBeInstanceOf(SessionClosedError);
  expect((error as SessionClosedError).name).toBe("SessionClosedError");
  expect((error as SessionClosedError).message).toBe(`Agent session closed: ${close.reason}`);
  expect((error as SessionClosedError).close).toEqual(close);
}

// ---------------------------------------------------------------------------------

describe("error classes (§9.5.3)", () => {
  it("SessionStartError, RunError and SessionStateError carry name and message", () => {
    for (const [Class, name] of [
      [SessionStartError, "SessionStartError"],
      [RunError, "RunError"],
      [SessionStateError, "SessionStateError"],
    ] as const) {
      const error = new Class("boom");
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toBe(name);
      expect(error.message).toBe("boom");
    }
  });

  it("SessionClosedError: message from the close reason, `close` property", () => {
    const decode = new BridgeDecodeError("bad", ["type"]);
    for (const close of [
      { reason: "shutdown", code: 0, signal: null },
      { reason: "exit", code: null, signal: "SIGKILL" },
      { reason: "protocol-error", error: decode, code: null, signal: null },
    ] as SessionClose[]) {
      const error = new SessionClosedError(close);
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toBe("SessionClosedError");
      expect(error.message).toBe(`Agent session closed: ${close.reason}`);
      expect(error.close).toBe(close);
    }
  });

  it("ConfigureError: `code` property and message", () => {
    const error = new ConfigureError("rejected", "Unknown model.");
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe("ConfigureError");
    expect(error.code).toBe("rejected");
    expect(error.message).toBe("Unknown model.");
  });
});

// ---------------------------------------------------------------------------------

describe("startup and ready gating (§9.5.4 1-6)", () => {
  it("resolves with ReadyInfo from the first ready; metadata defaults to {}; no config; onEvent sees ready", async () => {
    const l = await h.launch({ start: [{ emit: [{ type: "ready", version: "1.2.3", package: "pkg" }] }] });
    expect(l.session.ready).toEqual({ version: "1.2.3", package: "pkg", metadata: {} });
    expect(l.session.config).toBeUndefined();
    expect(l.rec.eventTypes()).toEqual(["ready"]);
    expect(Object.keys(l.session).sort()).toEqual(["cancel", "close", "config", "configure", "ready", "reset", "run"]);
  });

  it("ready.config is decoded and cached without onConfigChanged; metadata is kept", async () => {
    const decodeConfig = vi.fn((raw: Record<string, unknown>) => ({ ...raw, decoded: true }));
    const l = await h.launch(
      { start: [{ emit: [ev.ready({ metadata: { app: "notes" }, config: { model: "gpt-a" } })] }] },
      { decodeConfig },
    );
    expect(l.session.ready).toEqual({ version: "0.22.0", package: "agentlane-process-bridge", metadata: { app: "notes" } });
    expect(decodeConfig).toHaveBeenCalledTimes(1);
    expect(decodeConfig).toHaveBeenCalledWith({ model: "gpt-a" });
    expect(l.session.config).toEqual({ model: "gpt-a", decoded: true });
    expect(l.rec.of("configChanged")).toEqual([]);
  });

  it("later ready events only reach onEvent", async () => {
    const l = await h.launch({ start: [{ emit: [ev.ready({ config: { model: "gpt-a" } })] }] });
    l.fake.emit(ev.ready({ version: "9.9.9", metadata: { other: 1 }, config: { model: "gpt-z" } }));
    await l.rec.waitEvent("ready", 2);
    expect(l.session.ready.version).toBe("0.22.0");
    expect(l.session.config).toEqual({ model: "gpt-a" });
    expect(l.rec.of("configChanged")).toEqual([]);
    const run = await startRun(l);
    l.fake.emit(ev.runComplete("ok"));
    expect(await run.value()).toMatchObject({ status: "completed" });
  });

  it("an invalid backend spec rejects with SessionStartError without spawning", async () => {
    const before = spawned.length;
    for (const [backend, message] of [
      [{}, "Backend spec must include app or command."],
      [{ app: "m:a", command: "x" }, "Backend spec must not include both app and command."],
    ] as const) {
      const error = await observe(createAgentSession({ backend: backend as never })).error();
      expect(error).toBeInstanceOf(SessionStartError);
      expect((error as Error).name).toBe("SessionStartError");
      expect((error as Error).message).toBe(message);
    }
    expect(spawned.length).toBe(before);
  });

  it("ready timeout: rejects with 'Timed out waiting for bridge ready event.', SIGKILLs the child, no onClose", async () => {
    const { rec, spawn, pending, fake } = await h.begin({ ...STUBBORN, start: [] }, { readyTimeoutMs: 200 });
    await within(fake.connected, "the fake to start");
    const error = await pending.error();
    expect(error).toBeInstanceOf(SessionStartError);
    expect((error as Error).message).toBe("Timed out waiting for bridge ready event.");
    expect(await within(spawn.exit, "the child's exit")).toEqual({ code: null, signal: "SIGKILL" });
    expect(rec.of("close")).toEqual([]);
    expect(rec.of("event")).toEqual([]);
  });

  it("spawn error: rejects with the OS error message, no onClose", async () => {
    const rec = new Recorder();
    const before = spawned.length;
    const command = "/nonexistent/agentlane-fake-backend";
    const error = await observe(createAgentSession({ backend: { command }, ...rec.callbacks() })).error();
    expect(error).toBeInstanceOf(SessionStartError);
    expect((error as Error).message).toBe(`spawn ${command} ENOENT`);
    await within(spawned[before].exit, "the failed child's exit");
    expect(rec.of("close")).toEqual([]);
  });

  it("exit before ready: rejects with 'Backend exited before ready event.', stderr still reported, no onClose", async () => {
    const { rec, spawn, pending } = await h.begin({
      start: [{ stderr: ["agentlane_process_bridge: No module named 'my_app'"] }, { exit: 1 }],
    });
    const error = await pending.error();
    expect(error).toBeInstanceOf(SessionStartError);
    expect((error as Error).message).toBe("Backend exited before ready event.");
    expect(rec.diagnostics()).toEqual([{ kind: "stderr", line: "agentlane_process_bridge: No module named 'my_app'" }]);
    expect(await spawn.exit).toEqual({ code: 1, signal: null });
    expect(rec.of("close")).toEqual([]);
  });

  it("decodeConfig throwing on ready.config: rejects with 'Invalid runtime config document: <msg>', SIGKILL, no onClose", async () => {
    const { rec, spawn, pending } = await h.begin(
      { ...STUBBORN, start: [{ emit: [ev.ready({ config: { model: 42 } })] }] },
      {
        decodeConfig: () => {
          throw new Error("model must be a string");
        },
      },
    );
    const error = await pending.error();
    expect(error).toBeInstanceOf(SessionStartError);
    expect((error as Error).message).toBe("Invalid runtime config document: model must be a string");
    expect(await within(spawn.exit, "the child's exit")).toEqual({ code: null, signal: "SIGKILL" });
    expect(rec.of("close")).toEqual([]);
  });

  it("a bad stdout line before ready: protocol diagnostic, SIGKILL, then 'Backend exited before ready event.', no onClose", async () => {
    const { rec, spawn, pending } = await h.begin({ ...STUBBORN, start: [{ emit: ["this is not json", ev.ready()] }] });
    const error = await pending.error();
    expect(error).toBeInstanceOf(SessionStartError);
    expect((error as Error).message).toBe("Backend exited before ready event.");
    // The rejection waited for the exit, which was a SIGKILL.
    expect(spawn.exited).toEqual({ code: null, signal: "SIGKILL" });
    const [diagnostic] = rec.diagnostics();
    expect(rec.diagnostics()).toHaveLength(1);
    expect(diagnostic).toMatchObject({ kind: "protocol", line: "this is not json" });
    const decodeError = (diagnostic as { error: BridgeDecodeError }).error;
    expect(decodeError).toBeInstanceOf(BridgeDecodeError);
    expect(decodeError.message.startsWith("Invalid JSON bridge event: ")).toBe(true);
    expect(decodeError.fields).toEqual([]);
    // The ready after the bad line was ignored completely.
    expect(rec.of("event")).toEqual([]);
    expect(rec.of("close")).toEqual([]);
  });

  it("the host-exit hook is registered while the child lives and removed after close and after a startup failure", async () => {
    const baseline = process.listenerCount("exit");
    const l = await h.launch();
    expect(process.listenerCount("exit")).toBe(baseline + 1);
    await l.session.close();
    await within(l.spawn.exit, "exit");
    expect(process.listenerCount("exit")).toBe(baseline);

    const failed = await h.begin({ start: [{ exit: 2 }] });
    await failed.pending.error();
    expect(process.listenerCount("exit")).toBe(baseline);
  });
});

// ---------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------

describe("configure() and the config cache (§9.5.4)", () => {
  it("ok: resolves with the decoded document, updates the cache, calls onConfigChanged; the patch is a shallow copy", async () => {
    const l = await h.launch(
      { start: [{ emit: [ev.ready({ config: { model: "gpt-a" } })] }] },
      { decodeConfig: (raw: Record<string, unknown>) => ({ ...raw, decoded: true }) },
    );
    const patch = { model: "gpt-b", limits: { tokens: 5 } };
    const configure = observe(l.session.configure(patch));
    const received = await l.fake.next();
    expect(received.line).toBe('{"type":"configure","patch":{"model":"gpt-b","limits":{"tokens":5}},"protocol_version":"1.0"}');
    expect(patch).toEqual({ model: "gpt-b", limits: { tokens: 5 } });
    expect(l.session.config).toEqual({ model: "gpt-a", decoded: true }); // never predicted from the patch
    l.fake.emit(ev.configOk({ model: "gpt-b", temperature: 0 }));
    expect(await configure.value()).toEqual({ model: "gpt-b", temperature: 0, decoded: true });
    expect(l.session.config).toEqual({ model: "gpt-b", temperature: 0, decoded: true });
    expect(l.rec.of("configChanged").map((e) => e.config)).toEqual([{ model: "gpt-b", temperature: 0, decoded: true }]);
  });

  it("a top-level undefined value rejects locally with ConfigureError('invalid', …) and sends nothing", async () => {
    const l = await h.launch();
    const error = await observe(l.session.configure({ ok: 1, model: undefined })).error();
    expect(error).toBeInstanceOf(ConfigureError);
    expect((error as ConfigureError).name).toBe("ConfigureError");
    expect((error as ConfigureError).code).toBe("invalid");
    expect((error as ConfigureError).message).toBe("Configure patch value must not be undefined: model.");
    await barrier(l);
  });

  it("failed with a snapshot: the cache is updated and onConfigChanged fires before configure() rejects", async () => {
    const l = await h.launch({ start: [{ emit: [ev.ready({ config: { model: "gpt-a" } })] }] });
    const configure = observe(l.session.configure({ model: "nope" }));
    void configure.settled.then(() => l.rec.note("configure settled"));
    await l.fake.expect("configure");
    l.fake.emit(ev.configFailed("rejected", "Unknown model.", { model: "gpt-a", epoch: 2 }));
    const error = await configure.error();
    expect(error).toBeInstanceOf(ConfigureError);
    expect((error as ConfigureError).code).toBe("rejected");
    expect((error as ConfigureError).message).toBe("Unknown model.");
    expect(l.session.config).toEqual({ model: "gpt-a", epoch: 2 });
    expect(l.rec.trace().slice(-3)).toEqual(["event config", 'configChanged {"model":"gpt-a","epoch":2}', "configure settled"]);
  });

  it("failed without a document: ConfigureError(code, message) for every code; cache unchanged, no onConfigChanged", async () => {
    const l = await h.launch({ start: [{ emit: [ev.ready({ config: { model: "gpt-a" } })] }] });
    for (const [code, message] of [
      ["unsupported", "Runtime configuration is not supported by this backend."],
      ["invalid", "Configure command patch must be a JSON object."],
      ["internal", "Runtime configuration failed inside the backend."],
      ["rejected", "Runtime configuration was rejected."],
    ]) {
      const configure = observe(l.session.configure({ model: "x" }));
      await l.fake.expect("configure");
      l.fake.emit(ev.configFailed(code, message, null));
      const error = await configure.error();
      expect(error).toBeInstanceOf(ConfigureError);
      expect((error as ConfigureError).code).toBe(code);
      expect((error as ConfigureError).message).toBe(message);
    }
    expect(l.session.config).toEqual({ model: "gpt-a" });
    expect(l.rec.of("configChanged")).toEqual([]);
  });

  it("a command error attributed to configure rejects with ConfigureError('unsupported', message)", async () => {
    const l = await h.launch();
    const configure = observe(l.session.configure({ model: "x" }));
    await l.fake.expect("configure");
    l.fake.emit(ev.commandError("Unknown command: configure"));
    const error = await configure.error();
    expect(error).toBeInstanceOf(ConfigureError);
    expect((error as ConfigureError).code).toBe("unsupported");
    expect((error as ConfigureError).message).toBe("Unknown command: configure");
  });

  it("settlement always takes the oldest pending configure", async () => {
    const l = await h.launch();
    const first = observe(l.session.configure({ v: 1 }));
    const second = observe(l.session.configure({ v: 2 }));
    await l.fake.expect("configure");
    await l.fake.expect("configure");
    l.fake.emit(ev.configOk({ v: 1 }), ev.configFailed("rejected", "v2 refused", { v: 1 }));
    expect(await first.value()).toEqual({ v: 1 });
    expect(((await second.error()) as ConfigureError).message).toBe("v2 refused");
    expect(l.rec.of("configChanged").map((e) => e.config)).toEqual([{ v: 1 }, { v: 1 }]);
  });

  it("a config event with no pending configure: protocol-error close (fields ['type']), SIGKILL, pending run rejects", async () => {
    const l = await h.launch(STUBBORN);
    const run = await startRun(l);
    l.fake.emit(ev.configOk({ model: "surprise" }));
    await l.rec.waitClose();
    const [close] = l.rec.of("close").map((e) => e.close);
    expect(close).toMatchObject({ reason: "protocol-error", code: null, signal: null });
    expect(close.error).toBeInstanceOf(BridgeDecodeError);
    expect(close.error.message).toBe("Unexpected config event without pending configure.");
    expect(close.error.fields).toEqual(["type"]);
    expect(l.rec.diagnostics()).toEqual([{ kind: "protocol", error: close.error, line: "" }]);
    expect(l.session.config).toBeUndefined();
    expectClosedError(await run.error(), close as SessionClose);
    expect(await within(l.spawn.exit, "the child's exit")).toEqual({ code: null, signal: "SIGKILL" });
    expect(l.rec.of("close")).toHaveLength(1);
  });

  it.each([
    ["ok: true", ev.configOk({ bad: true })],
    ["ok: false with a snapshot", ev.configFailed("rejected", "no", { bad: true })],
  ])(
    "regression: a config document (%s) that decodeConfig rejects: protocol-error close + SIGKILL, and the pending configure() rejects with SessionClosedError",
    async (_label, event) => {
      const l = await h.launch(STUBBORN, {
        decodeConfig: (raw: Record<string, unknown>) => {
          if (raw.bad) throw new Error("bad doc");
          return raw;
        },
      });
      const configure = observe(l.session.configure({ x: 1 }));
      await l.fake.expect("configure");
      l.fake.emit(event);
      await l.rec.waitClose();
      const [close] = l.rec.of("close").map((e) => e.close);
      expect(close).toMatchObject({ reason: "protocol-error", code: null, signal: null });
      expect(close.error.message).toBe("Invalid runtime config document: bad doc");
      expect(close.error.fields).toEqual(["config"]);
      expect(l.rec.diagnostics()).toEqual([{ kind: "protocol", error: close.error, line: "" }]);
      expect(l.rec.of("configChanged")).toEqual([]);
      expect(await within(l.spawn.exit, "the child's exit")).toEqual({ code: null, signal: "SIGKILL" });
      // Teardown step 3: every pending command operation rejects. Teardown
      // ran synchronously before onClose, so the promise must have settled.
      await flushMicrotasks();
      expect(configure.state.status).toBe("rejected");
      expectClosedError((configure.state as { error: unknown }).error, close as SessionClose);
    },
  );
});

// ---------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------

describe("text segmentation through the session (§9.5.4)", () => {
  it("deltas, empty deltas and tool start/end closing segments (immediate)", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    l.fake.emit(
      ev.text("Saving"),
      ev.text(""),
      ev.text("."),
      ev.toolStart("call-1"),
      ev.text(""),
      ev.toolEnd("call-1"),
      ev.runComplete(null),
    );
    await run.value();
    expect(l.rec.chunks("assistant")).toEqual([
      { delta: "Saving", text: "Saving", segment: 1, done: false },
      { delta: ".", text: "Saving.", segment: 1, done: false },
      { delta: "", text: "Saving.", segment: 1, done: true },
      { delta: "", text: "", segment: 2, done: true },
    ]);
    expectOneDonePerSegment(l.rec);
  });

  it("reasoning then assistant: the reasoning segment closes first; segment numbers are shared", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    l.fake.emit(ev.reasoning("Checking"), ev.text("Two files."), ev.reasoning(null, "More"), ev.runComplete(null));
    await run.value();
    expect(l.rec.log.filter((e) => e.kind === "assistant" || e.kind === "reasoning").map((e) => [e.kind, (e as any).chunk])).toEqual([
      ["reasoning", { delta: "Checking", text: "Checking", segment: 1, done: false }],
      ["reasoning", { delta: "", text: "Checking", segment: 1, done: true }],
      ["assistant", { delta: "Two files.", text: "Two files.", segment: 2, done: false }],
      ["assistant", { delta: "", text: "Two files.", segment: 2, done: true }],
      ["reasoning", { delta: "More", text: "More", segment: 3, done: false }],
      ["reasoning", { delta: "", text: "More", segment: 3, done: true }],
    ]);
  });

  it("reasoning takes text when not null, else reasoning; a non-string value does nothing (no flush)", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    await startRun(l);
    // One burst: had the non-string reasoning flushed "ab", a done:false chunk would show.
    l.fake.emit(
      ev.text("ab"),
      ev.reasoning({ summary: "structured" }, null),
      ev.reasoning(null, null),
      ev.reasoning("from reasoning", null),
      ev.reasoning("ignored", "from text"),
      ev.runCancelled(),
    );
    await l.rec.waitEvent("run_cancelled");
    expect(l.rec.log.filter((e) => e.kind === "assistant" || e.kind === "reasoning").map((e) => [e.kind, (e as any).chunk])).toEqual([
      ["assistant", { delta: "ab", text: "ab", segment: 1, done: true }],
      ["reasoning", { delta: "from reasoningfrom text", text: "from reasoningfrom text", segment: 2, done: true }],
    ]);
  });

  it("other model kinds and a text_delta with non-string text flush pending text; the segment stays open", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    await startRun(l);
    const flushers = [
      ev.model("provider", { provider_event_type: "response.created" }),
      ev.model("tool_call_arguments_delta", { tool_call_id: "c", arguments_delta: "{" }),
      ev.model("completed"),
      ev.model("error", { error: { type: "RateLimitError", message: "slow" } }),
      ev.text(null),
      ev.record("model_stream", { event: { kind: "web_search_progress", query: "files" } }),
    ];
    let count = 0;
    for (const [i, flusher] of flushers.entries()) {
      l.fake.emit(ev.text(`t${i}`), flusher);
      count += 2;
      await l.rec.waitRecord("model_stream", count);
      expect(l.rec.chunks().at(-1), `flusher ${i}`).toEqual({ delta: `t${i}`, text: flushers.slice(0, i + 1).map((_, j) => `t${j}`).join(""), segment: 1, done: false });
    }
    expect(l.rec.chunks()).toHaveLength(flushers.length);
  });

  it("agent, plan, approval, llm, snapshot, handoff and unknown records flush pending text but keep the segment open", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced", approvals: () => true });
    await startRun(l);
    const records: [string, Record<string, unknown>][] = [
      ["agent_start", ev.agentStart({ taskId: "task-2", parent: "task-1", agent: "Helper" })],
      ["agent_end", ev.agentEnd(null, { taskId: "task-2", parent: "task-1", agent: "Helper" })],
      ["plan_updated", ev.plan([{ step: "a", status: "pending" }])],
      ["tool_approval", ev.approvalPending("tool-approval-1")],
      ["tool_approval", ev.approvalResolved("tool-approval-1", "allow")],
      ["llm_start", ev.llmStart()],
      ["state_snapshot", ev.stateSnapshot()],
      ["handoff_start", ev.handoffStart()],
      ["subagent_progress", ev.unknownKind()],
    ];
    const seen = new Map<string, number>();
    let text = "";
    for (const [i, [type, record]] of records.entries()) {
      l.fake.emit(ev.text(`t${i}`), record);
      seen.set(type, (seen.get(type) ?? 0) + 1);
      await l.rec.waitRecord(type, seen.get(type));
      text += `t${i}`;
      expect(l.rec.chunks().at(-1), type).toEqual({ delta: `t${i}`, text, segment: 1, done: false });
    }
  });

  it("coalesced: 96 code units or a 32-unit sentence are delivered at once; shorter text after 120 ms", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    await startRun(l);
    // Each pair arrives in one burst: 95 units are held, the 96th unit delivers both at once.
    l.fake.emit(ev.text(x(95)), ev.text("y"));
    await l.rec.waitRecord("model_stream", 2);
    expect(l.rec.chunks()).toEqual([{ delta: x(95) + "y", text: x(95) + "y", segment: 1, done: false }]);
    // 31 units ending a sentence are held; 35 ending a sentence are delivered at once.
    l.fake.emit(ev.text(x(29) + ". "), ev.text("ab! "));
    await l.rec.waitRecord("model_stream", 4);
    const sentence = x(29) + ". ab! ";
    expect(l.rec.chunks()).toEqual([
      { delta: x(95) + "y", text: x(95) + "y", segment: 1, done: false },
      { delta: sentence, text: x(95) + "y" + sentence, segment: 1, done: false },
    ]);
    const started = Date.now();
    l.fake.emit(ev.text("short"));
    await l.rec.waitRecord("model_stream", 5);
    expect(l.rec.chunks()).toHaveLength(2);
    await l.rec.waitFor((e) => e.kind === "assistant", "the coalescing timer", 3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(100);
    expect(l.rec.chunks().at(-1)).toEqual({ delta: "short", text: x(95) + "y" + sentence + "short", segment: 1, done: false });
  });

  it("final-output reconciliation: equal, extends, different, non-string, no open segment, reasoning open", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    const cases: { name: string; deltas: Record<string, unknown>[]; final: unknown; expected: unknown[] }[] = [
      {
        name: "equal",
        deltas: [ev.text("Two "), ev.text("files.")],
        final: "Two files.",
        expected: [["assistant", { delta: "Two files.", text: "Two files.", done: true }]],
      },
      {
        name: "extends",
        deltas: [ev.text(x(96)), ev.text("ab")],
        final: x(96) + "abcd",
        expected: [
          ["assistant", { delta: x(96), text: x(96), done: false }],
          ["assistant", { delta: "abcd", text: x(96) + "abcd", done: true }],
        ],
      },
      {
        name: "different",
        deltas: [ev.text(x(96)), ev.text("draft")],
        final: "Final answer",
        expected: [
          ["assistant", { delta: x(96), text: x(96), done: false }],
          ["assistant", { delta: "Final answer", text: "Final answer", done: true }],
        ],
      },
      {
        name: "non-string",
        deltas: [ev.text("Partial")],
        final: { answer: 42 },
        expected: [["assistant", { delta: "Partial", text: "Partial", done: true }]],
      },
      { name: "no open segment", deltas: [], final: "Saved.", expected: [["assistant", { delta: "Saved.", text: "Saved.", done: true }]] },
      { name: "no open segment, empty output", deltas: [], final: "", expected: [] },
      {
        name: "reasoning open",
        deltas: [ev.reasoning("thinking")],
        final: "Answer",
        expected: [
          ["reasoning", { delta: "thinking", text: "thinking", done: true }],
          ["assistant", { delta: "Answer", text: "Answer", done: true }],
        ],
      },
    ];
    let lastSegment = 0;
    for (const c of cases) {
      const before = l.rec.log.length;
      const run = await startRun(l, c.name);
      l.fake.emit(...c.deltas, ev.runComplete(c.final));
      expect(await run.value(), c.name).toMatchObject({ status: "completed", finalOutput: c.final });
      const got = l.rec.log
        .slice(before)
        .filter((e) => e.kind === "assistant" || e.kind === "reasoning")
        .map((e) => [e.kind, (e as any).chunk]);
      expect(
        got.map(([kind, { segment: _segment, ...chunk }]) => [kind, chunk]),
        c.name,
      ).toEqual(c.expected);
      for (const [, chunk] of got) expect(chunk.segment, c.name).toBeGreaterThan(lastSegment);
      if (got.length > 0) lastSegment = got.at(-1)![1].segment;
    }
    expectOneDonePerSegment(l.rec);
  });

  it("cancel_requested and cancel_ignored flush pending text; the segment stays open", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    const run = await startRun(l);
    const cancel = observe(l.session.cancel());
    await l.fake.expect("cancel");
    l.fake.emit(ev.text("ab"), ev.cancelRequested());
    await l.rec.waitEvent("cancel_requested");
    expect(l.rec.chunks()).toEqual([{ delta: "ab", text: "ab", segment: 1, done: false }]);
    l.fake.emit(ev.text("cd"), ev.cancelIgnored("cancellation already in progress"));
    await l.rec.waitEvent("cancel_ignored");
    expect(l.rec.chunks().at(-1)).toEqual({ delta: "cd", text: "abcd", segment: 1, done: false });
    l.fake.emit(ev.runCancelled());
    await cancel.value();
    await run.value();
    expect(l.rec.chunks().at(-1)).toEqual({ delta: "", text: "abcd", segment: 1, done: true });
  });

  it.each([
    ["reset", ev.reset()],
    ["shutdown", ev.shutdown()],
  ])("a %s event sweeps: the open segment closes, open tools and agents are cancelled", async (type, event) => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    await startRun(l);
    l.fake.emit(ev.agentStart(), ev.toolStart("call-1"), ev.text("partial"), event);
    await l.rec.waitEvent(type);
    expect(l.rec.trace().slice(-4)).toEqual([
      `event ${type}`,
      'assistant 1 "partial" done',
      "tool cancelled call-1",
      "agent cancelled task-1",
    ]);
  });

  it("run_cancelled and run errors close the open segment normally", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    let run = await startRun(l);
    l.fake.emit(ev.text("Partial"), ev.runCancelled());
    await run.value();
    run = await startRun(l);
    l.fake.emit(ev.reasoning("Hmm"), ev.runError("boom"));
    await run.error();
    expect(l.rec.chunks()).toEqual([
      { delta: "Partial", text: "Partial", segment: 1, done: true },
      { delta: "Hmm", text: "Hmm", segment: 2, done: true },
    ]);
  });
});

// ---------------------------------------------------------------------------------

describe("approvals (§9.5.4)", () => {
  async function pendingApproval(options: Parameters<Harness["launch"]>[1], id = "tool-approval-1", reason: string | null = "File writes need approval.") {
    const l = await h.launch({}, options);
    const run = await startRun(l);
    l.fake.emit(ev.approvalPending(id, reason));
    return { l, run };
  }

  it("true: sends approve {allowed: true} without reason; the policy gets request, reason and a live signal", async () => {
    const calls: ApprovalRequest[] = [];
    const { l } = await pendingApproval({
      approvals: (request) => {
        calls.push(request);
        return true;
      },
    });
    expect((await l.fake.next()).line).toBe('{"type":"approve","id":"tool-approval-1","allowed":true,"protocol_version":"1.0"}');
    expect(calls).toHaveLength(1);
    expect(calls[0].request).toEqual(APPROVAL_REQUEST);
    expect(calls[0].reason).toBe("File writes need approval.");
    expect(calls[0].signal.aborted).toBe(false);
    l.fake.emit(ev.approvalResolved("tool-approval-1", "allow", null));
    await l.rec.waitFor((e) => e.kind === "resolved", "onApprovalResolved");
    expect(l.rec.of("resolved").map((e) => e.resolution)).toEqual([
      { request: APPROVAL_REQUEST, allowed: true, reason: null, decidedByApp: true },
    ]);
    // Aborted also after an app decision, so a UI can dismiss its prompt.
    expect(calls[0].signal.aborted).toBe(true);
  });

  it("the policy is called asynchronously, not inside the event dispatch", async () => {
    let dispatching = false;
    const insideDispatch: boolean[] = [];
    const rec = new Recorder();
    const base = rec.callbacks();
    const l = await h.launch(
      {},
      {
        ...base,
        onEvent: (event) => {
          base.onEvent!(event);
          dispatching = true;
          // Runs before any continuation queued by the processing of this event.
          queueMicrotask(() => (dispatching = false));
        },
        approvals: () => {
          insideDispatch.push(dispatching);
          return true;
        },
      },
    );
    const run = observe(l.session.run("go"));
    await l.fake.expect("prompt");
    l.fake.emit(ev.runStart("go"), ev.approvalPending("tool-approval-1"));
    await l.fake.expect("approve");
    expect(insideDispatch).toEqual([false]);
    l.fake.emit(ev.runComplete(null));
    await run.value();
  });

  it("false: sends approve {allowed: false} without reason", async () => {
    const { l } = await pendingApproval({ approvals: () => false }, "tool-approval-2", null);
    expect((await l.fake.next()).line).toBe('{"type":"approve","id":"tool-approval-2","allowed":false,"protocol_version":"1.0"}');
  });

  it("objects: the reason is sent when given and left out when undefined; allowed is a real boolean", async () => {
    const decisions = [
      { allowed: false, reason: "Not in this folder." },
      { allowed: true },
      { allowed: true, reason: "fine" },
      { allowed: false, reason: undefined },
    ];
    const l = await h.launch({}, { approvals: ({ request }) => decisions[Number(request.metadata.n)] });
    await startRun(l);
    for (const n of decisions.keys()) l.fake.emit(ev.approvalPending(`a${n}`, null, { ...APPROVAL_REQUEST, metadata: { n } }));
    const lines = [];
    for (const _ of decisions) lines.push((await l.fake.next()).line);
    expect(lines).toEqual([
      '{"type":"approve","id":"a0","allowed":false,"reason":"Not in this folder.","protocol_version":"1.0"}',
      '{"type":"approve","id":"a1","allowed":true,"protocol_version":"1.0"}',
      '{"type":"approve","id":"a2","allowed":true,"reason":"fine","protocol_version":"1.0"}',
      '{"type":"approve","id":"a3","allowed":false,"protocol_version":"1.0"}',
    ]);
  });

  it("the default policy denies with 'No approval policy configured.'", async () => {
    const { l } = await pendingApproval({});
    expect((await l.fake.next()).line).toBe(
      '{"type":"approve","id":"tool-approval-1","allowed":false,"reason":"No approval policy configured.","protocol_version":"1.0"}',
    );
  });

  it.each([
    ["throws", () => {
      throw new Error("policy exploded");
    }, "policy exploded"],
    ["rejects", () => Promise.reject(new Error("policy exploded")), "policy exploded"],
    ["returns undefined", () => undefined, "Not an approval decision: undefined"],
    ["returns a non-boolean allowed", () => ({ allowed: "yes" }), "Not an approval decision: [object Object]"],
    ["gives a reason the encoder refuses", () => ({ allowed: true, reason: "bad \ud800" }), "contains an unpaired UTF-16 surrogate"],
  ])("a policy that %s: handler-error diagnostic (approvals), then a denial 'Approval policy failed.'", async (_label, policy, message) => {
    const { l } = await pendingApproval({ approvals: policy as unknown as () => boolean });
    const received = await l.fake.next();
    expect(received.line).toBe(
      '{"type":"approve","id":"tool-approval-1","allowed":false,"reason":"Approval policy failed.","protocol_version":"1.0"}',
    );
    const diagnostics = l.rec.diagnostics();
    expect(diagnostics).toHaveLength(1);
    expect(diagnostics[0]).toMatchObject({ kind: "handler-error", handler: "approvals" });
    expect(((diagnostics[0] as { error: Error }).error).message).toContain(message);
  });

  it("a slow policy whose approval was resolved meanwhile: signal aborted, decision dropped, decidedByApp false", async () => {
    const decision = manual<boolean>();
    const called = manual<ApprovalRequest>();
    const { l, run } = await pendingApproval({
      approvals: (request) => {
        called.resolve(request);
        return decision.promise;
      },
    });
    const request = await within(called.promise, "the policy call");
    // An automatic decision recorded by the backend's broker.
    l.fake.emit(ev.approvalResolved("tool-approval-1", "deny", "Denied by rule."));
    await l.rec.waitFor((e) => e.kind === "resolved", "onApprovalResolved");
    expect(request.signal.aborted).toBe(true);
    expect(l.rec.of("resolved").map((e) => e.resolution)).toEqual([
      { request: APPROVAL_REQUEST, allowed: false, reason: "Denied by rule.", decidedByApp: false },
    ]);
    decision.resolve(true);
    await decision.promise;
    await flushMicrotasks();
    await barrier(l);
    l.fake.emit(ev.runComplete(null));
    await run.value();
  });

  it.each([
    ["run_complete", [ev.runComplete("done")]],
    ["run_cancelled", [ev.runCancelled()]],
    ["run error", [ev.runError("boom")]],
    ["reset", [ev.reset()]],
    ["shutdown", [ev.shutdown()]],
  ])("a terminal %s aborts pending approval signals without onApprovalResolved; a late decision is dropped", async (_label, lines) => {
    const decision = manual<boolean>();
    const requests: ApprovalRequest[] = [];
    const { l, run } = await pendingApproval({
      approvals: (request) => {
        requests.push(request);
        return decision.promise;
      },
    });
    l.fake.emit(ev.approvalPending("tool-approval-2"));
    await l.rec.waitRecord("tool_approval", 2);
    await flushMicrotasks();
    expect(requests.map((r) => r.signal.aborted)).toEqual([false, false]);
    l.fake.emit(...(lines as Record<string, unknown>[]));
    await l.rec.waitEvent((lines[0] as { type: string }).type);
    expect(requests.map((r) => r.signal.aborted)).toEqual([true, true]);
    decision.resolve(true);
    await decision.promise;
    await flushMicrotasks();
    await barrier(l);
    expect(l.rec.of("resolved")).toEqual([]);
    void run.settled;
  });

  it("several approvals can be pending at once, each decided under its own id", async () => {
    const l = await h.launch({}, { approvals: ({ request }) => request.tool_call_id === "call-a" });
    await startRun(l);
    l.fake.emit(
      ev.approvalPending("tool-approval-1", null, { ...APPROVAL_REQUEST, tool_call_id: "call-a" }),
      ev.approvalPending("tool-approval-2", null, { ...APPROVAL_REQUEST, tool_call_id: "call-b" }),
    );
    const commands = [await l.fake.expect("approve"), await l.fake.expect("approve")];
    expect(commands.map((c) => [c.id, c.allowed])).toEqual([
      ["tool-approval-1", true],
      ["tool-approval-2", false],
    ]);
  });

  it("a resolved record without a remembered pending approval: decidedByApp false, reason from final_decision", async () => {
    const l = await h.launch();
    await startRun(l);
    l.fake.emit(ev.approvalResolved("tool-approval-9", "deny", "Denied by bridge client."));
    await l.rec.waitFor((e) => e.kind === "resolved", "onApprovalResolved");
    expect(l.rec.of("resolved").map((e) => e.resolution)).toEqual([
      { request: APPROVAL_REQUEST, allowed: false, reason: "Denied by bridge client.", decidedByApp: false },
    ]);
    await barrier(l);
  });
});

// ---------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------

describe("guarded callbacks (§9.5.1)", () => {
  it("an exception in any callback becomes a handler-error diagnostic naming it, and processing continues", async () => {
    const rec = new Recorder();
    const handlerErrors: { handler: string; error: unknown }[] = [];
    const thrower = (name: string, record?: (arg: any) => void) => (arg: any) => {
      record?.(arg);
      throw new Error(`${name} failed`);
    };
    const base = rec.callbacks();
    const l = await h.launch(
      {},
      {
        ...base,
        onEvent: thrower("onEvent", base.onEvent),
        onAssistantText: thrower("onAssistantText", base.onAssistantText),
        onReasoningText: thrower("onReasoningText", base.onReasoningText),
        onToolActivity: thrower("onToolActivity", base.onToolActivity),
        onAgentActivity: thrower("onAgentActivity", base.onAgentActivity),
        onPlan: thrower("onPlan", base.onPlan),
        onApprovalResolved: thrower("onApprovalResolved", base.onApprovalResolved),
        onConfigChanged: thrower("onConfigChanged", base.onConfigChanged),
        onClose: thrower("onClose", base.onClose),
        onDiagnostic: (diagnostic) => {
          if (diagnostic.kind === "handler-error") handlerErrors.push({ handler: diagnostic.handler, error: diagnostic.error });
          base.onDiagnostic!(diagnostic);
        },
      },
    );
    const run = observe(l.session.run("go"));
    await l.fake.expect("prompt");
    l.fake.emit(
      ev.runStart("go"),
      ev.agentStart(),
      ev.reasoning("hmm"),
      ev.text("Hello"),
      ev.text(" world"),
      ev.toolStart("call-1"),
      ev.toolEnd("call-1"),
      ev.plan([{ step: "a", status: "completed" }]),
      ev.approvalResolved("tool-approval-1", "allow"),
      ev.agentEnd({ final_output: "Hello world" }),
      ev.runComplete("Hello world"),
    );
    expect(await run.value()).toMatchObject({ status: "completed", finalOutput: "Hello world" });
    const configure = observe(l.session.configure({ a: 1 }));
    await l.fake.expect("configure");
    l.fake.emit(ev.configOk({ a: 1 }));
    expect(await configure.value()).toEqual({ a: 1 });
    await within(l.session.close(), "close()");

    // Every callback was still called for everything (processing continued).
    expect(rec.of("event")).toHaveLength(14);
    expect(rec.chunks("assistant").map((c) => c.delta)).toEqual(["Hello", " world", "", "Hello world"]);
    expect(rec.of("tool").map((e) => e.activity.phase)).toEqual(["start", "end"]);
    expect(rec.of("agent").map((e) => e.activity.phase)).toEqual(["start", "end"]);
    expect(rec.of("close")).toHaveLength(1);
    const names = new Set(handlerErrors.map((e) => e.handler));
    expect([...names].sort()).toEqual(
      [
        "onAgentActivity",
        "onApprovalResolved",
        "onAssistantText",
        "onClose",
        "onConfigChanged",
        "onEvent",
        "onPlan",
        "onReasoningText",
        "onToolActivity",
      ].sort(),
    );
    expect(handlerErrors.filter((e) => e.handler === "onEvent")).toHaveLength(rec.of("event").length);
    for (const { handler, error } of handlerErrors) expect((error as Error).message).toBe(`${handler} failed`);
  });

  it("an exception in onDiagnostic goes to console.error and is not reported again", async () => {
    const logged = manual<unknown[]>();
    const spy = vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => logged.resolve(args));
    try {
      const calls: unknown[] = [];
      const failure = new Error("diagnostic sink broke");
      const l = await h.launch(
        {},
        {
          onDiagnostic: (diagnostic) => {
            calls.push(diagnostic);
            throw failure;
          },
        },
      );
      l.fake.stderr("a warning");
      const args = await within(logged.promise, "console.error");
      expect(calls).toEqual([{ kind: "stderr", line: "a warning" }]);
      expect(args).toContain(failure);
      expect(String(args[0])).toMatch(/^\[session\]/);
      expect(spy).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
    }
  });

  it("without onDiagnostic, diagnostics are printed to console.error with the prefix [session]", async () => {
    const logged = manual<unknown[]>();
    const spy = vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => logged.resolve(args));
    try {
      const l = await h.launch({}, { onDiagnostic: undefined });
      l.fake.stderr("backend warning");
      const args = await within(logged.promise, "console.error");
      expect(args.join(" ")).toMatch(/^\[session\] .*backend warning/);
    } finally {
      spy.mockRestore();
    }
  });
});

// ---------------------------------------------------------------------------------

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
