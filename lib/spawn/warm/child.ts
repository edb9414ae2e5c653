/**
 * A warm backend as the session sees a spawned one (docs/prefork.md): a
 * child that satisfies `BridgeChildLike` and emits `exit` and `close` as a
 * `ChildProcess` does, whose output and exit reach the same callbacks with
 * the same timing (`ExitTracker`), made of the same channels
 * (`UnixStdio`), contained the same way (`Containment`, supervised).
 *
 * The backend is forked by the prefork server and adopted by a supervisor
 * of its own, which reports on the control socket (`started <pid>
 * <supervisor pid>`, and last the backend's exit: the host is not its
 * parent). Until the server is ready the child waits (commands written
 * meanwhile are kept, in order); when the server turns out unable to fork
 * (a refusal), the child falls back to a spawned backend, or fails the
 * start, as the option says.
 */
import type { ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import { constants } from "node:os";
import type { Socket } from "node:net";
import { WarmStartError } from "../../errors";
import type { BridgeProcessOptions } from "../../process";
import type { BridgeProcessCallbacks } from "../../wiring";
import { Containment, guardAgainstOrphan } from "../containment";
import { readControl, reportedSpawnError } from "../control";
import { ExitTracker } from "../exit";
import { withErrnoCode } from "../spawn-error";
import { UnixStdio } from "../stdio";
import type { WarmServer } from "./servers";

/** What a warm start tells besides the callbacks (the session turns them into diagnostics). */
export interface WarmHooks {
  /** The warm start was not possible; the backend starts cold (fallback `"cold"`). */
  onFallback?: (error: WarmStartError) => void;
  /** The prefork server ended while this conversation ran: its backend ends with it. */
  onServerEnded?: (message: string) => void;
}

/** Starts the backend cold (the fallback), with the same callbacks. */
export type ColdStart = () => ChildProcess;

const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, number]) => [number, name as NodeJS.Signals]));

/**
 * The stdin of a backend that may not exist yet: what is written before
 * it does waits here, in order, and goes to the real stream once there is
 * one (the warm socket, or a fallback's stdin). Only what the command
 * channel uses (`BridgeChildLike["stdin"]`).
 */
class PendingStdin {
  private target: Socket | NodeJS.WritableStream | null = null;
  private readonly waiting: string[] = [];
  private waitingBytes = 0;
  private readonly errorListeners: ((error: Error) => void)[] = [];
  private closed = false;

  private get stream(): (Socket & { destroyed: boolean }) | null {
    return this.target as (Socket & { destroyed: boolean }) | null;
  }

  get destroyed(): boolean {
    return this.stream ? this.stream.destroyed : this.closed;
  }

  get writable(): boolean {
    return this.stream ? this.stream.writable : !this.closed;
  }

  get writableLength(): number {
    return this.stream ? this.stream.writableLength : this.waitingBytes;
  }

  write(chunk: string): boolean {
    if (this.stream) return this.stream.write(chunk);
    if (this.closed) throw new Error("write after end");
    this.waiting.push(chunk);
    this.waitingBytes += Buffer.byteLength(chunk);
    return true;
  }

  on(event: "error", listener: (error: Error) => void): this {
    this.errorListeners.push(listener);
    this.stream?.on(event, listener);
    return this;
  }

  end(): void {
    if (this.stream) this.stream.end();
    else this.closed = true;
  }

  destroy(): void {
    if (this.stream) this.stream.destroy();
    else this.closed = true;
    this.waiting.length = 0;
  }

  /** The backend's stdin exists: what waited goes first. */
  attach(stream: Socket | NodeJS.WritableStream | null): void {
    if (stream === null) return this.destroy();
    this.target = stream;
    for (const listener of this.errorListeners) stream.on("error", listener);
    for (const chunk of this.waiting.splice(0)) stream.write(chunk);
    this.waitingBytes = 0;
    if (this.closed) stream.end();
  }
}

export class WarmChild extends EventEmitter {
  /** The supervisor's pid once it has started (as a supervised child's `pid`), or a fallback's. */
  pid: number | undefined;
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  readonly stdin = new PendingStdin();
  /** While waiting for the server: how to stop waiting. */
  private stopWaiting: (() => void) | undefined;
  /** A signal asked for before there was anything to signal. */
  private pendingSignal: NodeJS.Signals | number | undefined;
  private signalNow: ((signal: NodeJS.Signals | number) => boolean) | undefined;
  private done = false;

  constructor(
    private readonly options: BridgeProcessOptions,
    private readonly callbacks: BridgeProcessCallbacks,
    private readonly hooks: WarmHooks,
    private readonly fallback: "cold" | "error",
    private readonly coldStart: ColdStart,
  ) {
    super();
  }

  /** Forks on `server` once it is ready (now, if it is). */
  startOn(server: WarmServer): void {
    this.stopWaiting = server.whenSettled(() => {
      this.stopWaiting = undefined;
      if (this.done) return;
      if (server.state === "ready" && !server.ended) this.fork(server);
      else this.unavailable(server.failure);
    });
  }

  kill(signal: NodeJS.Signals | number = "SIGTERM"): boolean {
    if (this.done || this.exitCode !== null || this.signalCode !== null) return false;
    if (this.signalNow) return this.signalNow(signal);
    if (this.stopWaiting) {
      // Nothing runs yet: the start is given up.
      this.stopWaiting();
      this.stopWaiting = undefined;
      this.finishUnstarted(null, typeof signal === "number" ? (SIGNAL_NAMES.get(signal) ?? null) : signal);
      return true;
    }
    // Forked, not yet started: signalled once the supervisor says it runs.
    this.pendingSignal = signal === "SIGKILL" || signal === 9 || this.pendingSignal === undefined ? signal : this.pendingSignal;
    return true;
  }

  /** The server cannot fork this backend: a cold start, or the start fails. */
  private unavailable(failure: WarmStartError | undefined): void {
    const error = failure ?? warmGone();
    if (this.fallback === "error") {
      this.callbacks.onSpawnError?.(error);
      this.finishUnstarted(null, null);
      return;
    }
    this.hooks.onFallback?.(error);
    let child: ChildProcess;
    try {
      child = this.coldStart();
    } catch (spawnError) {
      this.callbacks.onSpawnError?.(spawnError instanceof Error ? spawnError : new Error(String(spawnError)));
      this.finishUnstarted(null, null);
      return;
    }
    this.adoptCold(child);
  }

  /** A fallback's spawned child stands behind this one. */
  private adoptCold(child: ChildProcess): void {
    this.stdin.attach(child.stdin);
    this.signalNow = (signal) => child.kill(signal);
    const sync = () => {
      this.pid = child.pid;
      this.exitCode = child.exitCode;
      this.signalCode = child.signalCode;
    };
    sync();
    child.once("spawn", sync);
    child.once("exit", (code, signal) => {
      sync();
      this.emit("exit", code, signal);
    });
    child.once("close", (code, signal) => {
      sync();
      this.done = true;
      this.emit("close", code, signal);
    });
    child.on("error", (error) => {
      if (this.listenerCount("error") > 0) this.emit("error", error);
    });
    if (this.pendingSignal !== undefined) child.kill(this.pendingSignal);
  }

  /** Forks the backend: its channels, the fork request, its control socket. */
  private fork(server: WarmServer): void {
    const { options } = this;
    // A forked backend can write `ready` before its supervisor's `started`
    // is read: what it says waits, so that `onStarted` comes first, as
    // for a spawned backend.
    const held = holdUntilStarted(this.callbacks);
    const callbacks = held.callbacks;
    const exit = new ExitTracker(options.exitDrainMs ?? 1000, callbacks);
    let stdio: UnixStdio;
    try {
      stdio = new UnixStdio(callbacks, options, exit, true);
    } catch (error) {
      exit.dispose();
      this.callbacks.onSpawnError?.(withErrnoCode(error) as Error);
      return this.finishUnstarted(null, null);
    }
    const [stdinFd, stdoutFd, stderrFd, controlFd] = stdio.spawnStdio as number[];
    const refused = server.native.fork(stdinFd, stdoutFd, stderrFd, controlFd, Math.max(0, Math.round(options.termGraceMs ?? 500)));
    if (refused) {
      // The server went away between its readiness and this request.
      stdio.abandon();
      exit.dispose();
      return this.unavailable(undefined);
    }
    const adopted = stdio.adopt(true);
    this.stdin.attach(adopted.stdin);
    this.run(server, exit, adopted.controlFd!, held.release);
  }

  /** The forked backend's life, from its supervisor's reports. */
  private run(server: WarmServer, exit: ExitTracker, controlFd: number, release: () => void): void {
    const { options, callbacks } = this;
    const conversationEnded = server.conversationStarted();
    let supervisorPid: number | undefined;
    const supervisor = {
      get pid() {
        return supervisorPid;
      },
      exitCode: null as number | null,
      signalCode: null as NodeJS.Signals | null,
      kill: (signal?: NodeJS.Signals | number) => {
        if (supervisorPid === undefined) return false;
        try {
          process.kill(supervisorPid, signal);
          return true;
        } catch {
          return false;
        }
      },
    };
    const containment = new Containment(supervisor, "supervised", "warm");
    const releaseGuard = options.killOnHostExit ?? true ? guardAgainstOrphan(containment) : () => {};
    exit.watch(this);
    exit.await("control");
    const controlEnded = exit.streamEnded("control");
    let failedErrno: number | undefined;
    let reported = false;
    const stopWatchingServer = server.onGone((end) => {
      const why = end.requested ? "was killed by closeWarmServers({ kill: true })" : "exited";
      this.hooks.onServerEnded?.(`The prefork server of this conversation (${server.plan.app}) ${why} while it ran: its backend ends with it.`);
    });
    const exited = (code: number | null, signal: NodeJS.Signals | null) => {
      if (reported) return;
      reported = true;
      this.exitCode = code;
      this.signalCode = signal;
      supervisor.exitCode = code;
      supervisor.signalCode = signal;
      this.signalNow = () => false;
      this.stdin.destroy();
      releaseGuard();
      stopWatchingServer();
      conversationEnded();
      this.emit("exit", code, signal);
      exit.exited(failedErrno !== undefined ? -failedErrno : code, signal);
    };
    const socket = readControl(controlFd, {
      started: (pid, ownPid) => {
        containment.backendPid = pid;
        supervisorPid = ownPid;
        this.pid = ownPid;
        this.signalNow = (signal) => containment.signal(signal);
        callbacks.onStarted?.(containment.info);
        release();
        this.emit("spawn");
        if (this.pendingSignal !== undefined) containment.signal(this.pendingSignal);
      },
      failed: (report) => {
        failedErrno = report.errno;
        callbacks.onSpawnError?.(reportedSpawnError(options.command, options.args ?? [], report));
        release();
      },
      exited: (code, signal) => exited(code, signal === null ? null : (SIGNAL_NAMES.get(signal) ?? null)),
      ended: () => {
        release();
        // Without an exit line, the supervisor itself was killed: how the
        // backend ended is not known.
        exited(null, null);
        this.done = true;
        controlEnded(null);
        this.emit("close", this.exitCode, this.signalCode);
      },
    });
    // A running conversation keeps the host alive, as a spawned child does.
    socket.ref();
  }

  /** Nothing was started: the exit is reported at once (no output can come). */
  private finishUnstarted(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.done) return;
    this.done = true;
    this.exitCode = code;
    this.signalCode = signal;
    this.stdin.destroy();
    this.emit("exit", code, signal);
    this.emit("close", code, signal);
    this.callbacks.onExit?.(code, signal);
  }
}

/**
 * The callbacks, with every call held back (in order) until `release()`;
 * after it, straight through.
 */
function holdUntilStarted(callbacks: BridgeProcessCallbacks): { callbacks: BridgeProcessCallbacks; release: () => void } {
  let held: (() => void)[] | undefined = [];
  const wrap = <K extends keyof BridgeProcessCallbacks>(name: K): BridgeProcessCallbacks[K] => {
    const callback = callbacks[name] as ((...args: unknown[]) => void) | undefined;
    if (callback === undefined) return undefined as BridgeProcessCallbacks[K];
    return ((...args: unknown[]) => {
      if (held) held.push(() => callback(...args));
      else callback(...args);
    }) as BridgeProcessCallbacks[K];
  };
  return {
    callbacks: {
      onEvent: wrap("onEvent")!,
      onDecodeError: wrap("onDecodeError"),
      onInvalidLine: wrap("onInvalidLine"),
      onStderr: wrap("onStderr"),
      onReadError: wrap("onReadError"),
      onStdoutClosed: wrap("onStdoutClosed"),
      onExit: wrap("onExit"),
      onStarted: callbacks.onStarted,
      onSpawnError: callbacks.onSpawnError,
    },
    release: () => {
      const waiting = held;
      held = undefined;
      for (const call of waiting ?? []) call();
    },
  };
}

function warmGone(): WarmStartError {
  return new WarmStartError("The prefork server ended before it could fork this backend.", "server-failed");
}
