/**
 * Spawning a backend (docs/protocol.md §9.2, §9.4) and making sure neither
 * it nor anything it starts outlives the host (`spawn/containment.ts`).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { resolve as resolvePath } from "node:path";
import type { Readable } from "node:stream";
import { BridgeReadError } from "./errors";
import { Containment, guardAgainstOrphan, type BackendProcess, type ContainmentMode } from "./spawn/containment";
import { findSupervisor, parseReport, type SupervisorReport } from "./spawn/supervisor";
import type { FlowGate } from "./stream/flow";
import { createLineReader, type LineReader, type StreamFailure } from "./stream/line-reader";
import { wirePushed, type BridgeProcessCallbacks, type LineReaderOptions } from "./wiring";

export type { BackendProcess, ContainmentMode };

export interface BridgeProcessOptions extends LineReaderOptions {
  command: string;
  args?: string[];
  /** Default: the host process's cwd. */
  cwd?: string;
  /** Default: the host process's environment. */
  env?: NodeJS.ProcessEnv;
  shell?: boolean;
  /**
   * Kill the backend and everything it started if the host process exits
   * while it is still running (default `true`). The hook is removed once the
   * child has exited.
   */
  killOnHostExit?: boolean;
  /**
   * After the child has exited, how long the readers may wait for end of
   * file on its pipes (default 1000 ms). A tool's background process that
   * inherited them can hold them open for ever: after this time, what the
   * pipes hold is still read and delivered, and then the readers let go.
   */
  exitDrainMs?: number;
  /**
   * Run the backend under the native supervisor (`true`), without it
   * (`false`), or under it where it is available (`"auto"`, the default:
   * Linux and macOS). Supervised, no descendant survives the host, even a
   * SIGKILLed host; `child.pid` is then the supervisor's pid (the backend's
   * comes through `onStarted`). Without it, the backend has a process group
   * of its own (Unix), which signals and the exit hook reach as a whole.
   */
  supervise?: boolean | "auto";
  /**
   * After SIGTERM, how long the backend's processes get before SIGKILL
   * (default 500 ms).
   */
  termGraceMs?: number;
  /** While this gate is closed, stdout's reader waits (backpressure from a consumer; `stream/flow.ts`). */
  flow?: FlowGate;
}

/** How long after stdout's end the backend has to exit before the end counts as closing it early. */
const STDOUT_END_GRACE_MS = 1000;

/** A Python AgentLane backend, run with `uv` in its project (§9.4). */
export interface PythonBackendSpec {
  /** `module:attribute` of the backend factory. */
  app: string;
  /** Default: the host process's cwd. */
  projectDir?: string;
  env?: NodeJS.ProcessEnv;
}

export type BackendSpec = PythonBackendSpec | BridgeProcessOptions;

/** §9.4: turns a backend spec into spawn options. */
export function resolveBackendSpec(spec: BackendSpec): BridgeProcessOptions {
  const app = (spec as Partial<PythonBackendSpec>).app;
  const command = (spec as Partial<BridgeProcessOptions>).command;
  if (typeof app === "string" && typeof command === "string") {
    throw new Error("Backend spec must not include both app and command.");
  }
  if (typeof command === "string") return spec as BridgeProcessOptions;
  if (typeof app !== "string") throw new Error("Backend spec must include app or command.");
  const python = spec as PythonBackendSpec;
  // Absolute: it is both the child's cwd and uv's --project, which uv would
  // read relative to that cwd.
  const projectDir = resolvePath(python.projectDir ?? process.cwd());
  return {
    command: "uv",
    args: ["run", "--project", projectDir, "python", "-m", "agentlane_process_bridge", "--app", app],
    cwd: projectDir,
    env: python.env ?? process.env,
  };
}

// ---- spawn -----------------------------------------------------------------

/**
 * Spawns the backend and wires it: stdout lines are decoded to `onEvent` (or
 * reported as invalid), stderr lines go to `onStderr`, the child's `error`
 * to `onSpawnError`, and once the child has closed and both streams have
 * been read to their end, the readers are disposed and `onExit(code, signal)`
 * is called, once.
 *
 * The backend and what it starts are contained (see `supervise`):
 * `child.kill(signal)` reaches all of them, SIGTERM with a grace
 * (`termGraceMs`) before SIGKILL, and what the backend leaves behind when it
 * exits is ended too.
 *
 * On Unix, stdout and stderr are OS pipes read by native threads, so the
 * returned child's `stdout` and `stderr` are `null`: Node's event loop never
 * touches that data. Use `stdin` through `createBridgeChannel`.
 *
 * Throws, leaving nothing behind, when the pipes cannot be made (e.g. out
 * of file descriptors) or `spawn` itself throws.
 */
export function spawnBridgeProcess(options: BridgeProcessOptions, callbacks: BridgeProcessCallbacks): ChildProcess {
  const supervisor = supervisorFor(options);
  const mode: ContainmentMode = supervisor !== null ? "supervised" : process.platform === "win32" ? "plain" : "grouped";
  const termGraceMs = options.termGraceMs ?? 500;
  const [command, args] = commandLine(options, supervisor, termGraceMs);
  const spawnOptions = {
    cwd: options.cwd,
    env: options.env ?? process.env,
    shell: mode === "supervised" ? false : (options.shell ?? false),
    // A group of its own (Unix): signals and the exit hook reach it whole.
    detached: mode !== "plain",
    windowsHide: true,
  };
  const exit = new ExitTracker(options, callbacks);

  let child: ChildProcess;
  if (process.platform !== "win32") {
    const stdout = createLineReader("events", callbacks, options, exit.streamEnded("stdout"), options.flow);
    const stderr = createLineReader("text", callbacks, options, exit.streamEnded("stderr"));
    exit.readers.push(stdout, stderr);
    try {
      const stdoutFd = stdout.reader.openPipe();
      const stderrFd = stderr.reader.openPipe();
      const control = mode === "supervised" ? "pipe" : "ignore";
      child = spawn(command, args, { ...spawnOptions, stdio: ["pipe", stdoutFd, stderrFd, control] });
    } catch (error) {
      exit.dispose();
      throw error;
    } finally {
      // The child has its copies now; ours must go for end of file to come.
      stdout.reader.closePipeWriter();
      stderr.reader.closePipeWriter();
    }
  } else {
    child = spawn(command, args, { ...spawnOptions, stdio: ["pipe", "pipe", "pipe"] });
    exit.useWiring(wirePushed(child, callbacks, options));
  }

  const containment = new Containment(child, mode);
  child.kill = (signal) => containment.signal(signal);
  exit.watch(child);
  // When the supervisor could not start the backend, the exit is reported
  // as Node reports a failed spawn: the negative errno.
  let failedErrno: number | undefined;
  if (mode === "supervised") readControl(child, options, containment, callbacks, (errno) => (failedErrno = errno));
  else if (child.pid !== undefined) callbacks.onStarted?.(containment.info);

  const releaseGuard = options.killOnHostExit ?? true ? guardAgainstOrphan(containment) : () => {};
  child.on("error", (error) => callbacks.onSpawnError?.(error));
  child.once("exit", () => {
    if (mode === "grouped") containment.endLeftovers(termGraceMs, releaseGuard);
    else releaseGuard();
  });
  child.once("close", (code: number | null, signal: NodeJS.Signals | null) =>
    exit.closed(failedErrno !== undefined ? -failedErrno : code, signal),
  );
  return child;
}

/** The supervisor to use, or `null` (see `BridgeProcessOptions.supervise`). */
function supervisorFor(options: BridgeProcessOptions): string | null {
  const wanted = options.supervise ?? "auto";
  if (wanted === false) return null;
  const path = findSupervisor();
  if (path === null && wanted === true) {
    throw new Error("The native supervisor is not available on this platform (supervise: true).");
  }
  return path;
}

/** The command and arguments to spawn: the backend's, under the supervisor if there is one. */
function commandLine(options: BridgeProcessOptions, supervisor: string | null, termGraceMs: number): [string, string[]] {
  const args = options.args ?? [];
  if (supervisor === null) return [options.command, args];
  // As Node's own `shell: true` does on Unix.
  const backend = options.shell ? ["/bin/sh", "-c", [options.command, ...args].join(" ")] : [options.command, ...args];
  return [supervisor, ["--term-grace-ms", String(Math.max(0, Math.round(termGraceMs))), "--", ...backend]];
}

/**
 * Reads the supervisor's control socket: the backend's pid once it runs, or
 * why it could not start (reported as the spawn error Node would give).
 * The socket does not keep the host alive.
 */
function readControl(
  child: ChildProcess,
  options: BridgeProcessOptions,
  containment: Containment,
  callbacks: BridgeProcessCallbacks,
  failed: (errno: number) => void,
): void {
  const socket = child.stdio[3] as (Readable & { unref?: () => void; ref?: () => void }) | null;
  if (!socket) return;
  // Unreferenced while the supervisor runs (its process handle keeps the
  // loop alive, and `child.unref()` must let the host go); referenced once
  // it has exited, until its end of file is read: the child's `close`, and
  // so `onExit`, waits for this socket, and an unreferenced socket with its
  // end of file still unread let a host with nothing else to do exit
  // silently before `onExit` (seen once in 1,500 spawns).
  socket.unref?.();
  child.once("exit", () => socket.ref?.());
  socket.setEncoding("utf8");
  let buffered = "";
  socket.on("data", (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf("\n"); end >= 0; end = buffered.indexOf("\n")) {
      const report = parseReport(buffered.slice(0, end));
      buffered = buffered.slice(end + 1);
      if (report?.kind === "started") {
        containment.backendPid = report.pid;
        callbacks.onStarted?.(containment.info);
      } else if (report?.kind === "failed") {
        failed(report.errno);
        child.emit("error", spawnError(options, report));
      }
    }
  });
  socket.on("error", () => {});
}

/** The error Node's `spawn` gives when a command cannot be started. */
function spawnError(options: BridgeProcessOptions, report: Extract<SupervisorReport, { kind: "failed" }>): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException & { spawnargs?: string[] } = new Error(`spawn ${options.command} ${report.code}`);
  error.errno = -report.errno;
  error.code = report.code;
  error.syscall = `spawn ${options.command}`;
  error.path = options.command;
  error.spawnargs = options.args ?? [];
  return error;
}

/**
 * When `onExit` comes: once the child has closed and both streams have been
 * read to their end, or, when something else holds the pipes open, once
 * `exitDrainMs` after the close what the pipes held has been delivered.
 * Also notices stdout ending while the backend keeps running.
 */
class ExitTracker {
  readonly readers: LineReader[] = [];
  private stdoutDone = false;
  private stderrDone = false;
  private exit: { code: number | null; signal: string | null } | undefined;
  private finished = false;
  private drainTimer: ReturnType<typeof setTimeout> | undefined;
  private stdoutEndTimer: ReturnType<typeof setTimeout> | undefined;
  private disposeWiring = () => {
    for (const reader of this.readers) reader.dispose();
  };
  private child: ChildProcess | undefined;

  constructor(
    private readonly options: BridgeProcessOptions,
    private readonly callbacks: BridgeProcessCallbacks,
  ) {}

  /** Windows: Node's own streams, which end before `close`. */
  useWiring(wiring: { dispose(): void }): void {
    this.disposeWiring = () => wiring.dispose();
    this.stdoutDone = true;
    this.stderrDone = true;
  }

  /** The child whose exit is awaited. */
  watch(child: ChildProcess): void {
    this.child = child;
  }

  streamEnded(which: "stdout" | "stderr"): (failure: StreamFailure) => void {
    return (failure) => {
      if (failure !== null) this.callbacks.onReadError?.(new BridgeReadError(which, failure));
      if (which === "stdout") {
        this.stdoutDone = true;
        this.watchStdoutEnd();
      } else {
        this.stderrDone = true;
      }
      this.finish();
    };
  }

  /**
   * Stdout ended: if the backend has not exited shortly after, it closed
   * its stdout while running, and no event can come any more.
   */
  private watchStdoutEnd(): void {
    const child = this.child;
    if (!child || this.exit || child.exitCode !== null || child.signalCode !== null) return;
    this.stdoutEndTimer = setTimeout(() => {
      if (!this.exit && child.exitCode === null && child.signalCode === null) this.callbacks.onStdoutClosed?.();
    }, STDOUT_END_GRACE_MS);
    this.stdoutEndTimer.unref();
  }

  closed(code: number | null, signal: string | null): void {
    this.exit = { code, signal };
    clearTimeout(this.stdoutEndTimer);
    this.finish();
    if (this.finished) return;
    // Something still holds the pipes open: after exitDrainMs, take what
    // they hold and let go.
    this.drainTimer = setTimeout(() => {
      for (const reader of this.readers) reader.cutOff();
    }, this.options.exitDrainMs ?? 1000);
  }

  private finish(): void {
    if (this.finished || !this.exit || !this.stdoutDone || !this.stderrDone) return;
    this.finished = true;
    clearTimeout(this.drainTimer);
    this.disposeWiring();
    this.callbacks.onExit?.(this.exit.code, this.exit.signal);
  }

  /** Spawning failed: nothing is left behind. */
  dispose(): void {
    this.finished = true;
    this.disposeWiring();
  }
}
