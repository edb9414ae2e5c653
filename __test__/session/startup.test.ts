/**
 * Startup and ready gating. The session layer (`createAgentSession`, docs/protocol.md §9.5)
 * against the scripted fake backend in ../fixtures/fake-backend.js; see
 * `harness.ts` for how a test drives it (real child process, waits on
 * events, the only timers are the ones under test).
 */
import { afterEach, describe, expect, it, vi } from "vitest";

import { AgentSessionError, attachAgentSession, BridgeDecodeError, createAgentSession, SessionStartError, type SessionStateError } from "../../lib/index";
import { fakeBackendChild } from "../../lib/testing/index";
import { ev, Harness, observe, Recorder, spawned, within, STUBBORN } from "./harness";
import { x, startRun } from "./common";

const h = new Harness(createAgentSession);
afterEach(() => h.cleanup());

describe("startup and ready gating (§9.5.4 1-6)", () => {
  it("resolves with ReadyInfo from the first ready; metadata defaults to {}; no config; onEvent sees ready", async () => {
    const l = await h.launch({ start: [{ emit: [{ type: "ready", version: "1.2.3", package: "pkg" }] }] });
    expect(l.session.ready).toEqual({ version: "1.2.3", package: "pkg", metadata: {} });
    expect(l.session.config).toBeUndefined();
    expect(l.rec.eventTypes()).toEqual(["ready"]);
    expect(Object.keys(l.session).sort()).toEqual(["bufferedInputBytes", "cancel", "close", "config", "configure", "flightRecord", "process", "ready", "reset", "run", "snapshot", "stream"]);
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
    // (Not waiting for the fake to connect: on a loaded machine the 200 ms
    // can end, and the fake be killed, before Node has started it.)
    const { rec, spawn, pending } = await h.begin({ ...STUBBORN, start: [] }, { readyTimeoutMs: 200 });
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

//

describe("start failures carry a stable code", () => {
  it("invalid-spec, spawn-failed (with the OS error as cause), ready-timeout, exited-before-ready, bad-ready", async () => {
    const codeOf = async (pending: Promise<unknown>) => {
      const error = (await observe(pending).error()) as SessionStartError;
      expect(error).toBeInstanceOf(AgentSessionError);
      return error;
    };
    expect((await codeOf(createAgentSession({ backend: {} as never }))).code).toBe("invalid-spec");

    const before = spawned.length;
    const spawnFailed = await codeOf(createAgentSession({ backend: { command: "/nonexistent/agentlane-fake-backend" } }));
    expect(spawnFailed.code).toBe("spawn-failed");
    expect((spawnFailed.cause as NodeJS.ErrnoException).code).toBe("ENOENT");
    await within(spawned[before].exit, "the failed child's exit");

    const timeout = await h.begin({ ...STUBBORN, start: [] }, { readyTimeoutMs: 200 });
    expect(((await timeout.pending.error()) as SessionStartError).code).toBe("ready-timeout");

    const exited = await h.begin({ start: [{ exit: 1 }] });
    expect(((await exited.pending.error()) as SessionStartError).code).toBe("exited-before-ready");

    const badReady = await h.begin(
      { ...STUBBORN, start: [{ emit: [ev.ready({ config: { model: 42 } })] }] },
      {
        decodeConfig: () => {
          throw new Error("model must be a string");
        },
      },
    );
    const bad = (await badReady.pending.error()) as SessionStartError;
    expect(bad.code).toBe("bad-ready");
    expect(bad.cause).toBeInstanceOf(BridgeDecodeError);
    expect((bad.cause as BridgeDecodeError).code).toBe("invalid-config-document");
  });
});

describe("every async API rejects, never throws, and says what was wrong", () => {
  it("createAgentSession with an unusable spec or options rejects with SessionStartError", async () => {
    const cases: [unknown, Partial<Parameters<typeof createAgentSession>[0]>, string, string][] = [
      [null, {}, "invalid-spec", "A backend spec is required: { app, projectDir } or { command, args }."],
      ["python3", {}, "invalid-spec", "The backend spec must be an object, not a string."],
      [{ command: "" }, {}, "invalid-spec", "The backend spec's command must be a non-empty string."],
      [{ command: "sh", args: "-c true" }, {}, "invalid-spec", "The backend spec's args must be an array of strings."],
      [{ command: "sh", env: { BAD: "a\u0000b" } }, {}, "spawn-failed", ""],
      [{ command: "sh", maxLineBytes: 0 }, {}, "invalid-spec", "backend.maxLineBytes must be a whole number of at least 1, not 0."],
    ];
    for (const [backend, options, code, message] of cases) {
      let pending!: Promise<unknown>;
      expect(() => (pending = createAgentSession({ backend: backend as never, ...options }))).not.toThrow();
      const error = (await observe(pending).error()) as SessionStartError;
      expect(error, JSON.stringify(backend)).toBeInstanceOf(SessionStartError);
      expect(error.code).toBe(code);
      if (message) expect(error.message).toBe(message);
    }
  });

  it("every numeric option is checked before anything starts: invalid-spec, naming the option (issue 19)", async () => {
    // Before: readyTimeoutMs NaN or -1 started the backend and failed at once with ready-timeout.
    const bad: [string, Record<string, unknown>, string][] = [];
    for (const name of ["readyTimeoutMs", "shutdownGraceMs", "termGraceMs", "runTimeoutMs", "idleTimeoutMs", "cancelTimeoutMs"]) {
      for (const value of [Number.NaN, -1, Number.POSITIVE_INFINITY, 2 ** 31, "5"]) {
        bad.push([name, { [name]: value }, `${name} must be a number of milliseconds from 0 to 2147483647, not ${typeof value === "string" ? JSON.stringify(value) : value}.`]);
      }
    }
    for (const value of [0, 1.5, Number.NaN, -3]) {
      bad.push(["maxStdinBufferBytes", { maxStdinBufferBytes: value }, `maxStdinBufferBytes must be a whole number of at least 1, not ${value}.`]);
      bad.push(["flightRecorder.lines", { flightRecorder: { lines: value } }, `flightRecorder.lines must be a whole number of at least 1 (or Infinity), not ${value}.`]);
    }
    const before = spawned.length;
    for (const [name, options, message] of bad) {
      const error = (await observe(createAgentSession({ backend: { command: "sh", args: ["-c", "exit 0"] }, ...options })).error()) as SessionStartError;
      expect(error, name).toBeInstanceOf(SessionStartError);
      expect(error.code, name).toBe("invalid-spec");
      expect(error.message, name).toBe(message);
      expect(error.cause, name).toMatchObject({ name: "InvalidOptionError", code: "invalid-option", option: name });
    }
    for (const [name, backend, message] of [
      ["backend.exitDrainMs", { exitDrainMs: -5 }, "backend.exitDrainMs must be a number of milliseconds from 0 to 2147483647, not -5."],
      ["backend.termGraceMs", { termGraceMs: Number.NaN }, "backend.termGraceMs must be a number of milliseconds from 0 to 2147483647, not NaN."],
    ] as const) {
      const error = (await observe(createAgentSession({ backend: { command: "sh", ...backend } })).error()) as SessionStartError;
      expect([error.code, error.message], name).toEqual(["invalid-spec", message]);
    }
    expect(spawned.length, "nothing was spawned").toBe(before);
    // The same checks for attached sessions, and for one run's own options.
    const attached = (await observe(attachAgentSession(fakeBackendChild(), { readyTimeoutMs: Number.NaN })).error()) as SessionStartError;
    expect([attached.code, attached.message]).toEqual(["invalid-spec", "readyTimeoutMs must be a number of milliseconds from 0 to 2147483647, not NaN."]);
    const l = await h.launch();
    const run = (await observe(l.session.run("hi", { timeoutMs: -1 })).error()) as SessionStateError;
    expect([run.name, run.code, run.message]).toEqual(["SessionStateError", "invalid-option", "timeoutMs must be a number of milliseconds from 0 to 2147483647, not -1."]);
    expect(l.fake.unread()).toEqual([]);
  });

  it("run() with a prompt that is not a string says so", async () => {
    const l = await h.launch();
    for (const [prompt, message] of [
      [new String("hi"), "The prompt must be a string, not a String object."],
      [42, "The prompt must be a string, not a number."],
      [undefined, "The prompt must be a string, not undefined."],
    ] as const) {
      const error = await observe(l.session.run(prompt as never)).error();
      expect((error as Error).message).toBe(message);
    }
  });
});
