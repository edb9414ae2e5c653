/**
 * Spawning a backend (docs/protocol.md §9.2, §9.4) and making sure neither
 * it nor anything it starts outlives the host (`spawn/containment.ts`).
 */
import { spawn, type ChildProcess } from "node:child_process";
import type { Socket } from "node:net";
import { resolve as resolvePath } from "node:path";
import { Containment, guardAgainstOrphan, type BackendProcess, type ContainmentMode } from "./spawn/containment";
import { ExitTracker } from "./spawn/exit";
import { explainSpawnError, withErrnoCode, type SpawnAttempt } from "./spawn/spawn-error";
import { readControl, reportedSpawnError } from "./spawn/control";
import { holdUntilStarted } from "./spawn/hold";
import { CHANNEL_FD, HOST_CHANNEL_ENV } from "./spawn/channels";
import { resolveStart, type StartPlan } from "./spawn/start-plan";
import { InvalidOptionError } from "./errors";
import { UnixStdio } from "./spawn/stdio";
import { findSupervisor, runnableSupervisor } from "./spawn/supervisor";
import type { WarmOption } from "./spawn/warm/options";
import type { FlowGate } from "./stream/flow";
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
   * of its own (Unix), which signals and the exit hook reach as a whole;
   * where the binary exists it still launches the backend (`--exec`), so
   * that the backend inherits only its channels (README "No process outlives
   * the host").
   */
  supervise?: boolean | "auto";
  /**
   * After SIGTERM, how long the backend's processes get before SIGKILL
   * (default 500 ms).
   */
  termGraceMs?: number;
  /** While this gate is closed, stdout's reader waits (backpressure from a consumer; `stream/flow.ts`). */
  flow?: FlowGate;
  /**
   * Fork the backend from a prefork server that imported the app once
   * (docs/prefork.md; `createAgentSession` and `startBridgeProcess`).
   * Default: cold. `spawnBridgeProcess` always starts cold and refuses a
   * warm option (`InvalidOptionError`) instead of ignoring it.
   */
  warm?: WarmOption;
  /**
   * Give the backend a host channel (docs/host-channel.md): a socket pair
   * whose backend end is its fd 4 (the launch layer's table), named in
   * `AGENTLANE_HOST_CHANNEL_FD` of its environment, cold or warm, with or
   * without the supervisor. The host's end comes through
   * `onHostChannel` and as the child's `hostChannel`. Default: none (the
   * backend inherits stdin, stdout and stderr only). Unix only.
   */
  hostChannel?: boolean;
}

/** A started backend's child with its host channel's host end, when the start declared one. */
export type WithHostChannel<T> = T & { hostChannel?: Socket };

/** A Python AgentLane backend, run with `uv` in its project (§9.4). */
export interface PythonBackendSpec {
  /** `module:attribute` of the backend factory. */
  app: string;
  /** Default: the host process's cwd. */
  projectDir?: string;
  env?: NodeJS.ProcessEnv;
  /** A warm start (see `BridgeProcessOptions.warm`). */
  warm?: WarmOption;
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
    ...(python.warm !== undefined ? { warm: python.warm } : {}),
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
 * Throws `InvalidOptionError` for an unusable number (`maxLineBytes`,
 * `exitDrainMs`, `termGraceMs`) before anything starts, and, leaving
 * nothing behind, when the pipes cannot be made (e.g. out
 * of file descriptors: `code` `EMFILE`) or `spawn` itself throws. Every
 * other failure to start comes as `onSpawnError` (a `BridgeSpawnError`:
 * the backend's command, the errno `code`, and `reason` where it can be
 * told: a missing working directory, command or supervisor), then
 * `onExit` with the negative errno.
 */
export function spawnBridgeProcess(options: BridgeProcessOptions, callbacks: BridgeProcessCallbacks): WithHostChannel<ChildProcess> {
  const plan = resolveStart(options);
  if (plan.warm !== undefined) {
    throw new InvalidOptionError("spawnBridgeProcess always starts cold: give warm to startBridgeProcess or createAgentSession.", "warm");
  }
  return spawnPlanned(plan, callbacks);
}

/** `spawnBridgeProcess` of a start already resolved (`spawn/start-plan.ts`). */
export function spawnPlanned(plan: StartPlan, callbacks: BridgeProcessCallbacks): WithHostChannel<ChildProcess> {
  const { options, hostChannel, termGraceMs } = plan;
  if (hostChannel && process.platform === "win32") throw new Error("A host channel needs Unix (hostChannel: true).");
  // Bun 1.4 reads nothing from a net.Socket on a descriptor (spawn/control.ts), so the channel's host end would stay silent.
  if (hostChannel && process.versions.bun !== undefined) throw new Error("A host channel cannot be read on Bun (1.4): hostChannel: true needs Node or Deno.");
  const supervisor = supervisorFor(options);
  const mode: ContainmentMode = supervisor !== null ? "supervised" : process.platform === "win32" ? "plain" : "grouped";
  // Grouped, the supervisor binary still launches the backend when there
  // is one (`--exec`: it places the descriptors, then becomes the
  // backend), so that it inherits only its channels, as in every other
  // mode; without one, Node's spawn passes on what the host holds.
  const launcher = supervisor ?? (mode === "grouped" ? runnableSupervisor() : null);
  const [command, args] = commandLine(plan, launcher, mode === "grouped");
  const env = options.env ?? process.env;
  const spawnOptions = {
    cwd: options.cwd,
    env: hostChannel ? { ...env, [HOST_CHANNEL_ENV]: String(CHANNEL_FD.host) } : env,
    shell: launcher !== null ? false : (options.shell ?? false),
    // A group of its own (Unix): signals and the exit hook reach it whole.
    detached: mode !== "plain",
    windowsHide: true,
  };
  // When the supervisor could not start the backend, the exit is reported
  // as Node reports a failed spawn: the negative errno. Decided when the
  // exit is reported, not at the supervisor's `close`: the report may be
  // read after it (Bun reads the control socket as a file stream).
  let failedErrno: number | undefined;
  // Supervised, what the backend says waits for the supervisor's report
  // (`spawn/hold.ts`): `onStarted` comes first, as for a warm start.
  // Launched through `--exec`, until the exec is done (its control socket's end).
  const held = launcher !== null ? holdUntilStarted(callbacks) : { callbacks, release: () => {} };
  const exit = new ExitTracker(plan.exitDrainMs, {
    ...held.callbacks,
    onExit: (code, signal) => held.callbacks.onExit?.(failedErrno !== undefined ? -failedErrno : code, signal),
  });
  const attempt: SpawnAttempt = { command: options.command, cwd: options.cwd, supervisor: launcher };

  let child: WithHostChannel<ChildProcess>;
  let controlFd: number | undefined;
  if (process.platform !== "win32") {
    let stdio: UnixStdio;
    try {
      stdio = new UnixStdio(held.callbacks, options, exit, launcher !== null, hostChannel);
    } catch (error) {
      exit.dispose();
      throw spawnFailure(error, attempt);
    }
    try {
      child = spawn(command, args, { ...spawnOptions, stdio: stdio.spawnStdio });
    } catch (error) {
      stdio.abandon();
      exit.dispose();
      throw spawnFailure(error, attempt);
    }
    const adopted = stdio.adopt(child.pid !== undefined);
    // Bun's ChildProcess has `stdin` as a getter only: an own property works everywhere.
    Object.defineProperty(child, "stdin", { value: adopted.stdin, writable: true, configurable: true, enumerable: true });
    controlFd = adopted.controlFd;
    const hostEnd = adopted.hostChannel;
    if (hostEnd !== undefined) {
      child.hostChannel = hostEnd;
      child.once("close", () => hostEnd.destroy());
      callbacks.onHostChannel?.(hostEnd);
    }
  } else {
    child = spawn(command, args, { ...spawnOptions, stdio: ["pipe", "pipe", "pipe"] });
    exit.add(wirePushed(child, callbacks, options));
  }
  // First: a spawn that failed reports it in a later turn, and an `error`
  // event without a listener would end the host.
  child.on("error", (error) => callbacks.onSpawnError?.(explainSpawnError(error, attempt)));

  const containment = new Containment(child, mode);
  child.kill = (signal) => containment.signal(signal);
  exit.watch(child);
  if (controlFd !== undefined) {
    exit.await("control");
    const controlEnded = exit.streamEnded("control");
    const socket = readControl(controlFd, {
      started: (pid) => {
        containment.backendPid = pid;
        callbacks.onStarted?.(containment.info);
        held.release();
      },
      failed: (report) => {
        failedErrno = report.errno;
        child.emit("error", reportedSpawnError(options.command, options.args ?? [], report));
        held.release();
      },
      ended: () => {
        // `--exec` reports nothing once the backend runs: its end is the start.
        if (mode === "grouped" && failedErrno === undefined && child.pid !== undefined) callbacks.onStarted?.(containment.info);
        held.release();
        controlEnded(null);
      },
    });
    child.once("exit", () => socket.ref());
  } else {
    // No supervisor, or none started (its spawn failed): nothing to wait for.
    held.release();
    if (child.pid !== undefined) callbacks.onStarted?.(containment.info);
  }

  const releaseGuard = plan.killOnHostExit ? guardAgainstOrphan(containment) : () => {};
  child.once("exit", () => {
    if (mode === "grouped") containment.endLeftovers(termGraceMs, releaseGuard);
    else releaseGuard();
  });
  child.once("close", (code: number | null, signal: NodeJS.Signals | null) => {
    // Node's own streams (Windows) end before `close`; native pipes may outlast it.
    if (process.platform === "win32") exit.closed(code, signal);
    else exit.exited(code, signal);
  });
  return child;
}

/** A spawn that threw, as the error `spawnBridgeProcess` throws. */
function spawnFailure(error: unknown, attempt: SpawnAttempt): unknown {
  const failure = withErrnoCode(error);
  return failure instanceof Error ? explainSpawnError(failure, attempt) : failure;
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

/**
 * The command and arguments to spawn: the backend's, under the supervisor
 * if there is one, or launched through it (`exec`: grouped mode).
 */
function commandLine(plan: StartPlan, supervisor: string | null, exec: boolean): [string, string[]] {
  const { options } = plan;
  const args = options.args ?? [];
  if (supervisor === null) return [options.command, args];
  // As Node's own `shell: true` does on Unix.
  const backend = options.shell ? ["/bin/sh", "-c", [options.command, ...args].join(" ")] : [options.command, ...args];
  // The supervisor passes the backend exactly the declared channels.
  const channels = plan.hostChannel ? ["--channel-fd", String(CHANNEL_FD.host)] : [];
  if (exec) return [supervisor, ["--exec", ...channels, "--", ...backend]];
  return [supervisor, ["--term-grace-ms", String(plan.termGraceWholeMs), ...channels, "--", ...backend]];
}
