/**
 * Cancellation and liveness (issue "Contained and diagnosable", item 3, and
 * the hangs of issue "adversarially", item 4): `run()`, `configure()`,
 * `reset()` and `cancel()` take an AbortSignal; a run timeout and an idle
 * watchdog; a cancel the backend never carries out closes the session
 * instead of leaving callers waiting for ever. Against the scripted fake
 * backend, through a real child process.
 */
import { afterEach, describe, expect, it } from "vitest";

import { createAgentSession, SessionClosedError } from "../../lib/index";
import { ev, Harness, observe, STUBBORN, within } from "./harness";
import { barrier, startRun } from "./common";

const h = new Harness(createAgentSession);
afterEach(() => h.cleanup());

describe("AbortSignal", () => {
  it("aborting a run sends cancel; the run settles as a cancelled run does", async () => {
    const l = await h.launch();
    const controller = new AbortController();
    const run = observe(l.session.run("go", { signal: controller.signal }));
    await l.fake.expect("prompt");
    l.fake.emit(ev.runStart("go"));
    await l.rec.waitEvent("run_start");
    controller.abort();
    await l.fake.expect("cancel");
    l.fake.emit(ev.cancelRequested(), ev.runCancelled());
    expect(await run.value()).toEqual({ status: "cancelled" });
    await barrier(l);
  });

  it("a signal aborted before run() starts nothing: cancelled at once, no prompt sent", async () => {
    const l = await h.launch();
    expect(await l.session.run("go", { signal: AbortSignal.abort() })).toEqual({ status: "cancelled" });
    await barrier(l);
  });

  it("configure() and reset() against a backend that never answers: aborting rejects with the signal's reason; a late answer is still matched", async () => {
    const l = await h.launch();
    const configure = new AbortController();
    const pending = observe(l.session.configure({ model: "x" }, { signal: configure.signal }));
    await l.fake.expect("configure");
    configure.abort(new Error("gave up on configure"));
    expect(((await pending.error()) as Error).message).toBe("gave up on configure");
    const reset = observe(l.session.reset({ signal: AbortSignal.timeout(50) }));
    await l.fake.expect("reset");
    expect(((await reset.error()) as Error).name).toBe("TimeoutError");
    // The backend answers now: the configure's answer goes to the configure, not to the next one.
    l.fake.emit(ev.configOk({ model: "x" }), ev.reset());
    await l.rec.waitEvent("reset");
    expect(l.session.config).toEqual({ model: "x" });
    await barrier(l);
  });
});

describe("timeouts and the watchdog", () => {
  it("runTimeoutMs: a run-timeout diagnostic and a cancel; the run ends cancelled", async () => {
    const l = await h.launch({}, { runTimeoutMs: 100 });
    const run = await startRun(l);
    await l.fake.expect("cancel");
    expect(l.rec.diagnostics()).toEqual([{ kind: "run-timeout", timeoutMs: 100 }]);
    l.fake.emit(ev.cancelRequested(), ev.runCancelled());
    expect(await run.value()).toEqual({ status: "cancelled" });
  });

  it("idleTimeoutMs: a stalled diagnostic once per silence; with onStall 'cancel' the run is cancelled", async () => {
    const l = await h.launch({}, { idleTimeoutMs: 80 });
    const run = await startRun(l);
    await l.rec.waitFor((e) => e.kind === "diagnostic", "the stalled diagnostic");
    expect(l.rec.diagnostics()).toEqual([{ kind: "stalled", idleMs: 80 }]);
    l.fake.emit(ev.runComplete("done"));
    expect(await run.value()).toMatchObject({ status: "completed" });

    const c = await h.launch({}, { idleTimeoutMs: 80, onStall: "cancel" });
    const cancelled = await startRun(c);
    await c.fake.expect("cancel");
    c.fake.emit(ev.cancelRequested(), ev.runCancelled());
    expect(await cancelled.value()).toEqual({ status: "cancelled" });
  });

  it("cancel() that the backend never carries out: after cancelTimeoutMs the session closes and everything waiting rejects", async () => {
    const l = await h.launch({}, { cancelTimeoutMs: 150 });
    const run = await startRun(l);
    const cancel = observe(l.session.cancel());
    await l.fake.expect("cancel");
    // The backend acknowledges, then never ends the run.
    l.fake.emit(ev.cancelRequested());
    const message = "The backend did not end the run within 150 ms of a cancel; closing the session.";
    // The close says what closed it, not a plain exit (issue 19).
    const closed = { reason: "unresponsive", message, code: null, signal: null };
    expect(await cancel.error()).toBeInstanceOf(SessionClosedError);
    const error = (await run.error()) as SessionClosedError;
    expect(error.close).toEqual(closed);
    expect(error.message).toBe("Agent session closed: unresponsive");
    await l.rec.waitClose();
    expect(l.rec.of("close").map((e) => e.close)).toEqual([closed]);
    expect(l.rec.diagnostics()).toContainEqual({ kind: "unresponsive", message });
  });

  it("configure() or reset() the backend never answers: after commandTimeoutMs the session closes (unresponsive) and what waits rejects (issue 29, item 16)", async () => {
    const l = await h.launch({}, { commandTimeoutMs: 150 });
    const configure = observe(l.session.configure({ model: "x" }));
    await l.fake.expect("configure");
    // Before: pending until close(), with no run for a watchdog to watch.
    const message = "The backend did not answer a configure command within 150 ms; closing the session.";
    const closed = { reason: "unresponsive", message, code: null, signal: null };
    const error = (await configure.error()) as SessionClosedError;
    expect(error).toBeInstanceOf(SessionClosedError);
    expect(error.close).toEqual(closed);
    await l.rec.waitClose();
    expect(l.rec.of("close").map((e) => e.close)).toEqual([closed]);
    expect(l.rec.diagnostics("unresponsive")).toEqual([{ kind: "unresponsive", message }]);

    // A caller that stopped waiting leaves the backend owing the answer: the deadline holds.
    const r = await h.launch({}, { commandTimeoutMs: 150 });
    const gaveUp = new AbortController();
    const reset = observe(r.session.reset({ signal: gaveUp.signal }));
    await r.fake.expect("reset");
    gaveUp.abort(new Error("stopped waiting"));
    expect(((await reset.error()) as Error).message).toBe("stopped waiting");
    await r.rec.waitClose();
    expect(r.rec.of("close").map((e) => e.close)).toEqual([
      { reason: "unresponsive", message: "The backend did not answer a reset command within 150 ms; closing the session.", code: null, signal: null },
    ]);
  });

  it("configure() and reset() answered in time keep the session open past commandTimeoutMs", async () => {
    const l = await h.launch({}, { commandTimeoutMs: 100 });
    const configure = observe(l.session.configure({ model: "x" }));
    await l.fake.expect("configure");
    l.fake.emit(ev.configOk({ model: "x" }));
    await configure.value();
    const reset = observe(l.session.reset());
    await l.fake.expect("reset");
    l.fake.emit(ev.reset());
    await reset.value();
    // Past both deadlines: nothing fires for answered commands.
    await new Promise((resolve) => setTimeout(resolve, 300));
    await barrier(l);
    expect(l.rec.of("close")).toEqual([]);
    expect(l.rec.diagnostics("unresponsive")).toEqual([]);
  });

  it("a backend that closes its stdout and keeps running: the session closes as stdout-closed, and its error says so", async () => {
    const l = await h.launch(STUBBORN);
    const run = await startRun(l);
    l.fake.steps({ closeStdout: true });
    const error = (await run.error("the run to reject")) as SessionClosedError;
    const message = "The backend closed its stdout but kept running; no event can come any more.";
    expect(error).toBeInstanceOf(SessionClosedError);
    expect(error.message).toBe("Agent session closed: stdout-closed");
    expect(error.close).toEqual({ reason: "stdout-closed", message, code: null, signal: null });
    await l.rec.waitClose();
    expect(l.rec.of("close").map((e) => e.close)).toEqual([error.close]);
    expect(l.rec.diagnostics("stdout-closed")).toEqual([{ kind: "stdout-closed", message }]);
    expect(await within(l.spawn.exit, "the child's exit")).toEqual({ code: null, signal: "SIGKILL" });
  });
});

describe("stray stdout lines", () => {
  it("strict by default: a line of plain text closes the session (protocol-error)", async () => {
    const l = await h.launch();
    l.fake.emit("Downloading model weights... 42%");
    await l.rec.waitFor((e) => e.kind === "close", "onClose");
    expect(l.rec.of("close")[0].close).toMatchObject({ reason: "protocol-error" });
  });

  it("tolerated: text and JSON without protocol_version become stray-line diagnostics, in order, and the run goes on; a wrong event is still fatal", async () => {
    const l = await h.launch({}, { strayStdout: "tolerate" });
    const run = await startRun(l);
    l.fake.emit("Downloading model weights... 42%", '{"progress": 0.5}', "[1,2]", ev.runComplete("done"));
    expect(await run.value()).toMatchObject({ status: "completed", finalOutput: "done" });
    expect(l.rec.diagnostics().map((d) => (d.kind === "stray-line" ? [d.kind, d.head, d.error.code] : d.kind))).toEqual([
      ["stray-line", "Downloading model weights... 42%", "invalid-json"],
      ["stray-line", '{"progress": 0.5}', "version-not-a-string"],
      ["stray-line", "[1,2]", "not-an-object"],
    ]);
    l.fake.emit({ protocol_version: "1.0", type: "run_start", ts: 1 }); // an event without its prompt
    await l.rec.waitFor((e) => e.kind === "close", "onClose");
    expect(l.rec.of("close")[0].close).toMatchObject({ reason: "protocol-error" });
  });
});

describe("the flight recorder", () => {
  it("off by default; on, the last lines (bounded) go with SessionClosedError and protocol diagnostics", async () => {
    const off = await h.launch();
    const offRun = await startRun(off);
    off.fake.emit("not json");
    expect(((await offRun.error()) as SessionClosedError).flightRecord).toBeUndefined();

    const l = await h.launch({}, { flightRecorder: { lines: 3 } });
    const run = await startRun(l, "secret prompt");
    l.fake.stderr("a warning");
    await l.rec.waitFor((e) => e.kind === "diagnostic" && e.diagnostic.kind === "stderr", "the stderr line");
    l.fake.emit("not json");
    const error = (await run.error()) as SessionClosedError;
    const streams = error.flightRecord!.map((r) => [r.stream, r.line]);
    // Three lines kept: the prompt sent before them has gone.
    expect(streams.map(([stream]) => stream)).toEqual(["stdout", "stderr", "stdout"]);
    expect(JSON.parse(streams[0][1])).toMatchObject({ type: "run_start", prompt: "secret prompt" });
    expect(streams.slice(1)).toEqual([
      ["stderr", "a warning"],
      ["stdout", "not json"],
    ]);
    const protocol = l.rec.diagnostics().find((d) => d.kind === "protocol");
    expect(protocol && "flightRecord" in protocol && protocol.flightRecord?.map((r) => r.line)).toEqual(streams.map(([, line]) => line));
  });
});
