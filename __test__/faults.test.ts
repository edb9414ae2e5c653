/**
 * Process faults (docs/protocol.md §8.8–§8.10, §9.2–§9.3): a backend that is
 * killed, dies mid-line, closes its stdout, never becomes ready, ignores
 * shutdown or closes its stdin, and a host that is killed. Each test checks
 * the callbacks and their order. The backends are fixtures/fault-backend.js
 * (its output is written synchronously, so its order is exact); the tests
 * wait for callbacks and exits, never for a fixed time.
 *
 * The host exiting without shutdown (its exit hook SIGKILLs the backend) is
 * covered in process.test.ts ("no orphan backends"); here the host is
 * SIGKILLed, so no hook can run and the backend must end on stdin EOF.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  createAgentSession,
  createBridgeChannel,
  SessionClosedError,
  SessionStartError,
  spawnBridgeProcess,
  type AgentSession,
  type AgentSessionOptions,
  type BridgeChannel,
  type BridgeEvent,
  type SessionClose,
  type BridgeProcessOptions,
} from "../lib/index";
import { alive, goneWithin as gone, repoRoot } from "./helpers";

const fixtures = join(__dirname, "fixtures");
const faultBackend = (mode: string, n?: number) => ({ command: process.execPath, args: [join(fixtures, "fault-backend.js"), mode, ...(n === undefined ? [] : [String(n)])] });

/** Backends and sessions the tests started: a failing test must not leave one running. */
const started: ChildProcess[] = [];
const sessions: AgentSession[] = [];
afterEach(async () => {
  for (const child of started.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  }
  await Promise.all(sessions.splice(0).map((session) => session.close()));
});

/** createAgentSession, with the session closed after the test whatever happens. */
async function startSession(options: AgentSessionOptions): Promise<AgentSession> {
  const session = await createAgentSession(options);
  sessions.push(session);
  return session;
}

function label(event: BridgeEvent): string {
  return event.type === "run_event" ? `run_event ${event.ts}` : event.type;
}

/** Spawns a backend with a channel; every callback goes into one ordered log. */
function start(mode: string, n?: number, graceMs = 1500, spawnOptions: Partial<BridgeProcessOptions> = {}) {
  const log: string[] = [];
  const lines: string[] = [];
  const waiters: { match: (entry: string) => boolean; resolve: () => void }[] = [];
  const push = (entry: string) => {
    log.push(entry);
    for (const waiter of waiters.splice(0)) {
      if (waiter.match(entry)) waiter.resolve();
      else waiters.push(waiter);
    }
  };
  let exited!: (value: { code: number | null; signal: string | null }) => void;
  const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) => (exited = resolve));
  let channel!: BridgeChannel;
  const child = spawnBridgeProcess({ ...faultBackend(mode, n), ...spawnOptions }, {
    onEvent: (event) => push(`event ${label(event)}`),
    onDecodeError: (error, line) => {
      lines.push(line);
      push(`decodeError ${error.message.startsWith("Invalid JSON bridge event: SyntaxError: ") ? "syntax" : error.message}`);
    },
    onInvalidLine: (line) => push(`invalidLine ${line === lines.at(-1) ? "same" : "other"}`),
    onStderr: (line) => push(`stderr ${line}`),
    onSpawnError: (error) => push(`spawnError ${error.message}`),
    onExit: (code, signal) => {
      push(`exit ${code} ${signal}`);
      exited({ code, signal });
    },
  });
  started.push(child);
  channel = createBridgeChannel(child, {
    graceMs,
    onSendError: (message) => push(`sendError ${message}`),
    onFinalize: () => push("finalize"),
  });
  /** Resolves when an entry matching `match` is (or was) logged. */
  const seen = (match: string | ((entry: string) => boolean)) => {
    const test = typeof match === "string" ? (entry: string) => entry === match : match;
    if (log.some(test)) return Promise.resolve();
    return new Promise<void>((resolve) => waiters.push({ match: test, resolve }));
  };
  return { child, channel, log, lines, exit, seen };
}

/** Direct children of this process (Linux); a thread may end while we look. */
function children(): number[] {
  return readdirSync("/proc/self/task").flatMap((task) => {
    try {
      return readFileSync(`/proc/self/task/${task}/children`, "utf8").split(" ").filter(Boolean).map(Number);
    } catch {
      return [];
    }
  });
}

const linux = process.platform === "linux";

describe.runIf(linux)("process faults: callbacks in the expected order", () => {
  it("backend SIGKILLed mid-line: every complete line, then the fragment as one invalid line, then exit(null, SIGKILL)", async () => {
    const b = start("sigkill-mid-line", 5);
    expect(await b.exit).toEqual({ code: null, signal: "SIGKILL" });
    expect(b.log).toEqual([
      "event ready",
      "event run_start",
      ...[1, 2, 3, 4, 5].map((ts) => `event run_event ${ts}`),
      "decodeError syntax",
      "invalidLine same",
      "exit null SIGKILL",
    ]);
    expect(b.lines).toEqual(['{"protocol_version":"1.0","type":"run_ev']); // the 40 bytes written
  });

  it("backend SIGKILLed by the host while streaming: a gapless prefix of the stream, at most one fragment, exit last", async () => {
    const b = start("stream");
    await b.seen("event run_event 1000");
    b.child.kill("SIGKILL");
    expect(await b.exit).toEqual({ code: null, signal: "SIGKILL" });
    const events = b.log.filter((entry) => entry.startsWith("event run_event "));
    expect(events.length).toBeGreaterThanOrEqual(1000);
    expect(events).toEqual(events.map((_, i) => `event run_event ${i + 1}`));
    const rest = b.log.slice(1 + events.length);
    // The kill may land between two lines or inside one.
    expect([["exit null SIGKILL"], ["decodeError syntax", "invalidLine same", "exit null SIGKILL"]]).toContainEqual(rest);
    if (b.lines.length === 1) expect(b.lines[0].startsWith('{"protocol_version":"1.0","type":"run_event"')).toBe(true);
  });

  it("session: backend SIGKILLed mid-run rejects run() with SessionClosedError after onClose(exit, SIGKILL)", async () => {
    const order: string[] = [];
    const session = await startSession({
      backend: faultBackend("prompt-sigkill", 3),
      onEvent: (event) => order.push(`event ${label(event)}`),
      onClose: (close) => order.push(`close ${close.reason} ${close.code} ${close.signal}`),
      onDiagnostic: (d) => order.push(`diagnostic ${d.kind}`),
      textDelivery: "immediate",
      onAssistantText: (chunk) => order.push(`text ${JSON.stringify(chunk.delta)}${chunk.done ? " done" : ""}`),
    });
    const error = await session.run("hello").then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(SessionClosedError);
    expect((error as SessionClosedError).close).toEqual({ reason: "exit", code: null, signal: "SIGKILL" } satisfies SessionClose);
    expect(order).toEqual([
      "event ready",
      "event run_start",
      "event run_event 2",
      'text "t0 "',
      "event run_event 3",
      'text "t1 "',
      "event run_event 4",
      'text "t2 "',
      'text "" done', // the teardown ends the open text segment
      "close exit null SIGKILL",
    ]);
    await session.close(); // idempotent, never rejects
  });

  it("backend exiting mid-line: the fragment is one invalid line, then exit(3)", async () => {
    const b = start("exit-mid-line");
    expect(await b.exit).toEqual({ code: 3, signal: null });
    expect(b.log).toEqual(["event ready", "event run_start", "decodeError syntax", "invalidLine same", "exit 3 null"]);
    expect(b.lines).toEqual(['{"protocol_version":"1.0","type":"run_ev']);
  });

  it("backend closing stdout but staying alive: no exit is reported while it lives; shutdown still works", async () => {
    const b = start("close-stdout");
    // stdout and stderr are separate pipes: their relative order is not defined.
    await Promise.all([b.seen("event ready"), b.seen("stderr fault: stdout closed")]);
    expect([...b.log].sort()).toEqual(["event ready", "stderr fault: stdout closed"]);
    expect(b.child.exitCode).toBeNull();
    expect(alive(b.child.pid!)).toBe(true);
    b.channel.shutdown(); // stdin is still open: the command gets through
    expect(await b.exit).toEqual({ code: 0, signal: null });
    expect([...b.log.slice(0, 2)].sort()).toEqual(["event ready", "stderr fault: stdout closed"]);
    expect([...b.log.slice(2, 4)].sort()).toEqual(["finalize", "stderr fault: got shutdown"]);
    expect(b.log.slice(4)).toEqual(["exit 0 null"]);
  });

  it("backend never sending ready: SessionStartError after readyTimeoutMs, and the child is SIGKILLed", async () => {
    const before = new Set(children());
    let closed = 0;
    const started = Date.now();
    const promise = createAgentSession({ backend: faultBackend("no-ready"), readyTimeoutMs: 300, onClose: () => closed++, onDiagnostic: () => {} });
    // The spawn is synchronous: the new child is the backend.
    const spawned = children().filter((pid) => !before.has(pid));
    expect(spawned).toHaveLength(1);
    const error = await promise.then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(SessionStartError);
    expect((error as Error).message).toBe("Timed out waiting for bridge ready event.");
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    // It ignores SIGTERM: only the session's SIGKILL ends it.
    expect(await gone(spawned[0])).toBe(true);
    expect(closed).toBe(0); // startup failures never call onClose
  });

  it("backend ignoring shutdown (and SIGTERM): SIGKILL after graceMs, finalize once, then exit(null, SIGKILL)", async () => {
    const b = start("ignore-shutdown", undefined, 300);
    await b.seen("event ready");
    const t0 = Date.now();
    b.channel.shutdown();
    b.channel.shutdown(); // idempotent
    expect(await b.exit).toEqual({ code: null, signal: "SIGKILL" });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(290);
    expect(b.log[0]).toBe("event ready");
    expect(b.log.filter((entry) => entry === "finalize")).toHaveLength(1);
    expect(b.log.indexOf("stderr fault: ignoring shutdown")).toBeGreaterThan(0);
    expect(b.log.indexOf("finalize")).toBeLessThan(b.log.indexOf("exit null SIGKILL"));
    expect(b.log.at(-1)).toBe("exit null SIGKILL");
    expect(b.log.some((entry) => entry.startsWith("sendError") || entry.includes("SIGTERM"))).toBe(false);
  });

  it("session: close() on a backend ignoring shutdown resolves, with onClose(shutdown, SIGKILL)", async () => {
    const closes: SessionClose[] = [];
    const session = await startSession({ backend: faultBackend("ignore-shutdown"), shutdownGraceMs: 300, onClose: (c) => closes.push(c), onDiagnostic: () => {} });
    await session.close();
    expect(closes).toEqual([{ reason: "shutdown", code: null, signal: "SIGKILL" }]);
  });

  it("backend closing its stdin while the host sends: EPIPE through onSendError, never thrown", async () => {
    const b = start("close-stdin");
    await Promise.all([b.seen("event ready"), b.seen("stderr fault: stdin closed")]);
    // The write itself succeeds (the failure is asynchronous)…
    expect(b.channel.send({ type: "prompt", text: "into a closed pipe" })).toBe(true);
    await b.seen((entry) => entry.startsWith("sendError"));
    // …and the next send finds stdin destroyed.
    expect(b.channel.send({ type: "cancel" })).toBe(false);
    expect([...b.log.slice(0, 2)].sort()).toEqual(["event ready", "stderr fault: stdin closed"]);
    expect(b.log.slice(2)).toEqual(["sendError write EPIPE", "sendError bridge stdin is closed (command: cancel)"]);
    // shutdown cannot be sent either: the child gets the default signal (SIGTERM).
    b.channel.shutdown();
    expect(await b.exit).toEqual({ code: null, signal: "SIGTERM" });
    expect(b.log.slice(4)).toEqual(["finalize", "exit null SIGTERM"]);
  });

  it("session: run() after the backend closed its stdin rejects with SessionClosedError; send-failed diagnostic; child killed", async () => {
    const diagnostics: string[] = [];
    let stdinClosed!: () => void;
    const stdinClosedSeen = new Promise<void>((resolve) => (stdinClosed = resolve));
    const closes: SessionClose[] = [];
    const session = await startSession({
      backend: faultBackend("close-stdin"),
      onClose: (c) => closes.push(c),
      onDiagnostic: (d) => {
        diagnostics.push(d.kind === "stderr" ? `stderr ${d.line}` : d.kind === "send-failed" ? `send-failed ${d.message}` : d.kind);
        if (d.kind === "stderr" && d.line === "fault: stdin closed") stdinClosed();
      },
    });
    await stdinClosedSeen;
    const error = await session.run("hello").then(
      () => null,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(SessionClosedError);
    expect(closes).toEqual([{ reason: "exit", code: null, signal: null }]);
    expect(diagnostics).toEqual(["stderr fault: stdin closed", "send-failed write EPIPE"]);
    await session.close();
  });
});

describe.runIf(linux).each([
  ["supervised (the default)", "auto" as const],
  ["without the supervisor", false as const],
])("a buggy tool: a grandchild that inherited the backend's stdout and stderr, %s", (_name, supervise) => {
  // Regression: onExit waited for end of file on both pipes (as the
  // reference's `close` event does), and a grandchild holding them kept it
  // from coming, for ever for a daemon. Supervised, the grandchild is ended
  // with the backend; without the supervisor (it left the backend's group),
  // the readers let go `exitDrainMs` (1 s) after the backend's exit.
  const settle = <T>(promise: Promise<T>, ms: number) =>
    Promise.race([promise.then(() => "settled"), new Promise<string>((resolve) => setTimeout(() => resolve(`still pending ${ms} ms later`), ms))]);
  const killIfAlive = (pid: number) => {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Already ended (supervised).
    }
  };

  async function withGrandchild<T>(run: (b: ReturnType<typeof start>, grandchild: number) => Promise<T>): Promise<T> {
    const b = start("grandchild", undefined, 1500, { supervise });
    await Promise.all([b.seen("event ready"), b.seen((entry) => entry.startsWith("stderr fault: grandchild "))]);
    const grandchild = Number(b.log.find((entry) => entry.startsWith("stderr fault: grandchild "))!.split(" ").at(-1));
    try {
      return await run(b, grandchild);
    } finally {
      killIfAlive(grandchild);
      await b.exit;
    }
  }

  it("onExit comes within 3 s of the backend's exit", async () => {
    await withGrandchild(async (b, grandchild) => {
      const backendExit = new Promise((resolve) => b.child.once("exit", resolve));
      b.channel.shutdown();
      await backendExit; // the backend itself is gone…
      expect(await settle(b.exit, 3000)).toBe("settled"); // …and onExit does not wait for the grandchild
      if (supervise === "auto") expect(await gone(grandchild)).toBe(true);
    });
  });

  it("session.close() resolves within 3 s", async () => {
    let grandchild = 0;
    let seen!: () => void;
    const started = new Promise<void>((resolve) => (seen = resolve));
    const session = await startSession({
      backend: { ...faultBackend("grandchild"), supervise },
      onDiagnostic: (d) => {
        if (d.kind === "stderr" && d.line.startsWith("fault: grandchild ")) {
          grandchild = Number(d.line.split(" ").at(-1));
          seen();
        }
      },
    });
    await started;
    const closing = session.close();
    try {
      expect(await settle(closing, 3000)).toBe("settled");
      if (supervise === "auto") expect(await gone(grandchild)).toBe(true);
    } finally {
      killIfAlive(grandchild);
      await closing;
    }
  });
});

describe.runIf(linux)("a grandchild holding the pipes does not keep the host alive", () => {
  /** A host whose backend starts a 30 s sleep that inherits its stdout and stderr (escaping its group), then exits. */
  async function hostWithGrandchild(supervise: boolean) {
    const ready = JSON.stringify({ protocol_version: "1.0", type: "ready", ts: 1, version: "0", package: "x", metadata: {} });
    const backend = `echo '${ready}'; setsid sh -c 'echo "grandchild $$" >&2; exec sleep 30' & sleep 0.2; exit 0`;
    const script = `
      const { spawnBridgeProcess } = require(${JSON.stringify(join(repoRoot, "dist", "index.js"))});
      spawnBridgeProcess({ command: "sh", args: ["-c", ${JSON.stringify(backend)}], supervise: ${supervise} }, {
        onEvent: (e) => console.log("event " + e.type),
        onStderr: (line) => console.log(line),
        onExit: (code, signal) => console.log("exit " + code + " " + signal),
      });`;
    const host = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    host.stdout!.on("data", (chunk) => (out += chunk));
    const code = await new Promise((resolve) => host.on("close", resolve));
    return { code, out, grandchild: Number(/grandchild (\d+)/.exec(out)?.[1]) };
  }

  it("a host exits by itself after onExit, while the grandchild still runs (without the supervisor)", async () => {
    const { code, out, grandchild } = await hostWithGrandchild(false);
    try {
      expect(code).toBe(0);
      expect(out).toMatch(/^event ready\n/);
      expect(out.trim().split("\n").at(-1)).toBe("exit 0 null");
      // The host exited while the grandchild still holds the pipes.
      expect(alive(grandchild)).toBe(true);
    } finally {
      if (grandchild > 0) process.kill(grandchild, "SIGKILL");
    }
  });

  it("supervised, the grandchild that left the backend's group ends with the backend, and the host exits", async () => {
    const { code, out, grandchild } = await hostWithGrandchild(true);
    expect(code).toBe(0);
    expect(out).toMatch(/^event ready\n/);
    expect(out.trim().split("\n").at(-1)).toBe("exit 0 null");
    expect(grandchild).toBeGreaterThan(0);
    expect(await gone(grandchild)).toBe(true);
  });
});

describe.runIf(linux)("the host going away without shutdown", () => {
  /** Starts fault-host.js, returns it and the backend's pid once ready. */
  async function killableHost(backend: "fault" | "python"): Promise<{ host: ChildProcess; pid: number }> {
    const host = spawn(process.execPath, [join(fixtures, "fault-host.js"), backend, repoRoot], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    host.stderr!.on("data", (chunk) => (err += chunk));
    const pid = await new Promise<number>((resolve, reject) => {
      host.stdout!.on("data", (chunk) => {
        out += chunk;
        if (out.includes("\n")) resolve(Number(out.trim()));
      });
      host.once("close", (code) => reject(new Error(`host exited ${code}: ${err}`)));
    });
    return { host, pid };
  }

  it("host SIGKILLed (no exit hook can run): a backend that exits on stdin EOF (like the real one, §8.9) is gone", async () => {
    const { host, pid } = await killableHost("fault");
    expect(alive(pid)).toBe(true);
    host.kill("SIGKILL");
    // The backend ignores SIGTERM; nothing kills it: it leaves because its stdin reached EOF.
    expect(await gone(pid)).toBe(true);
  });

  it("the host calling process.exit in the middle of a 1 GB stream: clean exit (code 0), backend killed", async () => {
    // The reader threads are busy (or blocked on the full queue) when the
    // host exits; the exit hook SIGKILLs the backend.
    for (const n of [1, 1000, 20_000, 100_000]) {
      const host = spawn(process.execPath, [join(fixtures, "fault-host.js"), "stream", repoRoot, String(n)], { stdio: ["ignore", "pipe", "pipe"] });
      let out = "";
      let err = "";
      host.stdout!.on("data", (chunk) => (out += chunk));
      host.stderr!.on("data", (chunk) => (err += chunk));
      const [code, signal] = await new Promise<[number | null, string | null]>((resolve) => host.once("close", (c, s) => resolve([c, s])));
      expect({ n, code, signal, err }).toEqual({ n, code: 0, signal: null, err: "" });
      expect(await gone(Number(out.trim()))).toBe(true);
    }
  });

  it.runIf(existsSync(join(repoRoot, ".venv/bin/python")))("host SIGKILLed: the real Python backend is gone too", async () => {
    const { host, pid } = await killableHost("python");
    expect(alive(pid)).toBe(true);
    host.kill("SIGKILL");
    expect(await gone(pid, 20_000)).toBe(true);
  }, 60_000);
});
