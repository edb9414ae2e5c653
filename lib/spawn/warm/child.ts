/**
 * A warm backend as the session sees a spawned one (docs/prefork.md): a
 * child that satisfies `BridgeChildLike` and emits `exit` and `close` as a
 * `ChildProcess` does, whose output and exit reach the same callbacks with
 * the same timing, made of the same channels, contained the same way
 * (`fork.ts`).
 *
 * Until the server is ready the child waits (commands written meanwhile
 * are kept, in order). When the warm start turns out impossible (a
 * refusal, a server that stopped serving, a fork that failed, a server
 * closed or gone before this backend's `ready`), the child falls back to a
 * spawned backend (in a start slot, when the session gives it one), or
 * fails the start, as the option says.
 */
import type { ChildProcess } from "node:child_process";
import { EventEmitter } from "node:events";
import type { Socket } from "node:net";
import type { WarmStartError } from "../../errors";
import type { StartPlan } from "../start-plan";
import type { BridgeProcessCallbacks } from "../../wiring";
import { withErrnoCode } from "../spawn-error";
import { ForkAttempt, SIGNAL_NAMES } from "./fork";
import { STALL_MS } from "./requests";
import type { WarmServer } from "./server";
import { PendingStdin } from "./stdin";

/** What a warm start tells and asks besides the callbacks (the session gives them). */
export interface WarmHooks {
  /** The warm start was not possible; the backend starts cold (fallback `"cold"`). */
  onFallback?: (error: WarmStartError) => void;
  /** The prefork server ended while this conversation ran: its backend ends with it. */
  onServerEnded?: (message: string) => void;
  /** This start made a new prefork server while one serves the same app under another key: what differs. */
  onNewServer?: (message: string) => void;
  /**
   * A fallback's cold start waits for one of the host's start slots: calls
   * `start` once it has one, and returns what stops the wait. Without it,
   * the cold start is at once.
   */
  coldSlot?: (start: () => void) => () => void;
  /** The start's ready timeout: a stalled server is given up on by half of it (at most `STALL_MS`). */
  readyTimeoutMs?: number;
}

/** Starts the backend cold (the fallback), with the same callbacks. */
export type ColdStart = () => ChildProcess;

export class WarmChild extends EventEmitter {
  /** The supervisor's pid once it has started (as a supervised child's `pid`), or a fallback's. */
  pid: number | undefined;
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  readonly stdin = new PendingStdin();
  /** The host's end of the host channel of the backend that runs (declared by the start), once it runs. */
  hostChannel: Socket | undefined;
  /** While waiting for the server, or for a fallback's start slot: how to stop waiting. */
  private stopWaiting: (() => void) | undefined;
  /** The fork in flight, until its backend runs or it is given up. */
  private attempt: ForkAttempt | undefined;
  private signalNow: ((signal: NodeJS.Signals | number) => boolean) | undefined;
  private done = false;

  constructor(
    private readonly plan: StartPlan,
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
      if (server.closed !== undefined || server.ended) this.unavailable(server.closedError());
      else if (server.state === "ready") this.fork(server);
      else this.unavailable(server.failure ?? server.closedError());
    });
  }

  kill(signal: NodeJS.Signals | number = "SIGTERM"): boolean {
    if (this.done || this.exitCode !== null || this.signalCode !== null) return false;
    if (this.signalNow) return this.signalNow(signal);
    // Nothing runs yet: the start is given up (a fork the server serves
    // later ends at once: its control socket is closed).
    this.stopWaiting?.();
    this.stopWaiting = undefined;
    this.attempt?.abandon();
    this.attempt = undefined;
    this.finishUnstarted(null, typeof signal === "number" ? (SIGNAL_NAMES.get(signal) ?? null) : signal);
    return true;
  }

  /** A warm start known impossible before any server (fallback `"cold"`): the cold start. */
  fallBack(error: WarmStartError): void {
    this.unavailable(error);
  }

  /** The warm start is not possible: a cold start, or the start fails. */
  private unavailable(error: WarmStartError): void {
    if (this.fallback === "error") {
      this.callbacks.onSpawnError?.(error);
      this.finishUnstarted(null, null);
      return;
    }
    this.hooks.onFallback?.(error);
    if (this.hooks.coldSlot === undefined) return this.startCold();
    let now = false;
    const stop = this.hooks.coldSlot(() => {
      now = true;
      this.stopWaiting = undefined;
      this.startCold();
    });
    if (!now) this.stopWaiting = stop;
  }

  private startCold(): void {
    if (this.done) return;
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
  private adoptCold(child: ChildProcess & { hostChannel?: Socket }): void {
    this.stdin.attach(child.stdin);
    this.hostChannel = child.hostChannel;
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
  }

  /** Forks the backend on a ready server. */
  private fork(server: WarmServer): void {
    const patienceMs = Math.min(STALL_MS, (this.hooks.readyTimeoutMs ?? Number.POSITIVE_INFINITY) / 2);
    const attempt = new ForkAttempt(
      server,
      this.plan,
      this.callbacks,
      this.hooks.onServerEnded,
      {
        stdin: (socket) => this.stdin.attach(socket),
        hostChannel: (socket) => {
          this.hostChannel = socket;
        },
        started: (supervisorPid, signal) => {
          this.attempt = undefined;
          this.pid = supervisorPid;
          this.signalNow = signal;
          this.emit("spawn");
        },
        exited: (code, signal) => {
          this.exitCode = code;
          this.signalCode = signal;
          this.signalNow = () => false;
          this.stdin.destroy();
          this.emit("exit", code, signal);
        },
        closed: () => {
          this.done = true;
          this.emit("close", this.exitCode, this.signalCode);
        },
        notForked: (error) => {
          this.attempt = undefined;
          this.signalNow = undefined;
          this.pid = undefined;
          this.hostChannel = undefined;
          this.stdin.detach();
          if (!this.done) this.unavailable(error);
        },
      },
      patienceMs,
    );
    this.attempt = attempt;
    try {
      attempt.begin();
    } catch (error) {
      this.attempt = undefined;
      this.callbacks.onSpawnError?.(withErrnoCode(error) as Error);
      this.finishUnstarted(null, null);
    }
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
