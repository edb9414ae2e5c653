/**
 * Spawning a backend (docs/protocol.md §9.2, §9.4) and making sure it does not
 * outlive the host.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { BridgeReadError } from "./errors";
import { createLineReader, type LineReader, type StreamFailure } from "./stream/line-reader";
import { wireBridgeProcess, type BridgeProcessCallbacks, type LineReaderOptions } from "./wiring";

export interface BridgeProcessOptions extends LineReaderOptions {
  command: string;
  args?: string[];
  /** Default: the host process's cwd. */
  cwd?: string;
  /** Default: the host process's environment. */
  env?: NodeJS.ProcessEnv;
  shell?: boolean;
  /**
   * SIGKILL the child if the host process exits while it is still running
   * (default `true`). The hook is removed once the child has exited.
   */
  killOnHostExit?: boolean;
  /**
   * After the child has exited, how long its output may stay silent before
   * `onExit` comes anyway (default 1000 ms). A tool's background process that
   * inherited the pipes can hold them open for ever; while output keeps
   * arriving, `onExit` keeps waiting for it.
   */
  exitDrainMs?: number;
}

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
  const projectDir = python.projectDir ?? process.cwd();
  return {
    command: "uv",
    args: ["run", "--project", projectDir, "python", "-m", "agentlane_process_bridge", "--app", app],
    cwd: projectDir,
    env: python.env ?? process.env,
  };
}

// ---- no orphans -------------------------------------------------------------

const liveChildren = new Set<ChildProcess>();

function killLiveChildren(): void {
  for (const child of liveChildren) {
    try {
      child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
  }
}

/** Kills `child` if the host exits first; one shared `exit` listener for all children. */
function guardAgainstOrphan(child: ChildProcess): () => void {
  if (liveChildren.size === 0) process.on("exit", killLiveChildren);
  liveChildren.add(child);
  return () => {
    if (!liveChildren.delete(child)) return;
    if (liveChildren.size === 0) process.off("exit", killLiveChildren);
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
 * On Unix, stdout and stderr are OS pipes read by native threads, so the
 * returned child's `stdout` and `stderr` are `null`: Node's event loop never
 * touches that data. Use `stdin` through `createBridgeChannel`.
 */
export function spawnBridgeProcess(options: BridgeProcessOptions, callbacks: BridgeProcessCallbacks): ChildProcess {
  const spawnOptions = {
    cwd: options.cwd,
    env: options.env ?? process.env,
    shell: options.shell ?? false,
  };
  let stdoutDone = false;
  let stderrDone = false;
  let closed: { code: number | null; signal: string | null } | undefined;
  let finished = false;
  let releaseGuard = () => {};
  const readers: LineReader[] = [];
  let disposeWiring = () => {
    for (const reader of readers) reader.dispose();
  };

  const finish = () => {
    if (finished || !closed || !stdoutDone || !stderrDone) return;
    finished = true;
    clearTimeout(drainTimer);
    disposeWiring();
    callbacks.onExit?.(closed.code, closed.signal);
  };

  // Once the child has exited, its output gets `exitDrainMs` of silence at
  // most: a grandchild holding the pipes must not delay onExit for ever.
  let drainTimer: ReturnType<typeof setTimeout> | undefined;
  const armDrain = () => {
    if (!closed || finished) return;
    clearTimeout(drainTimer);
    drainTimer = setTimeout(() => {
      // Output still being read, judged or delivered is not silence.
      if (readers.some((reader) => reader.busy())) return armDrain();
      stdoutDone = true;
      stderrDone = true;
      finish();
    }, options.exitDrainMs ?? 1000);
  };

  let child: ChildProcess;
  if (process.platform !== "win32") {
    const streamEnded = (which: "stdout" | "stderr") => (failure: StreamFailure) => {
      if (failure !== null) callbacks.onReadError?.(new BridgeReadError(which, failure));
      if (which === "stdout") stdoutDone = true;
      else stderrDone = true;
      finish();
    };
    const stdout = createLineReader("events", callbacks, options, streamEnded("stdout"), armDrain);
    const stderr = createLineReader("text", callbacks, options, streamEnded("stderr"), armDrain);
    readers.push(stdout, stderr);
    const stdoutFd = stdout.reader.openPipe();
    const stderrFd = stderr.reader.openPipe();
    try {
      child = spawn(options.command, options.args ?? [], { ...spawnOptions, stdio: ["pipe", stdoutFd, stderrFd] });
    } catch (error) {
      disposeWiring();
      throw error;
    } finally {
      // The child has its copies now; ours must go for end of file to come.
      stdout.reader.closePipeWriter();
      stderr.reader.closePipeWriter();
    }
  } else {
    child = spawn(options.command, options.args ?? [], { ...spawnOptions, stdio: ["pipe", "pipe", "pipe"] });
    const wiring = wireBridgeProcess(child, callbacks, options);
    disposeWiring = () => wiring.dispose();
    // Node's own streams end before `close`.
    stdoutDone = true;
    stderrDone = true;
  }

  if (options.killOnHostExit ?? true) {
    releaseGuard = guardAgainstOrphan(child);
    child.once("exit", () => releaseGuard());
  }
  child.on("error", (error) => {
    callbacks.onSpawnError?.(error);
  });
  child.once("close", (code: number | null, signal: NodeJS.Signals | null) => {
    releaseGuard();
    closed = { code, signal };
    finish();
    armDrain();
  });
  return child;
}
