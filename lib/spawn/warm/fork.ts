/**
 * One fork of a warm backend (docs/prefork.md §3–§4): its channels (the
 * same as a spawned backend's, `UnixStdio`), its request (sent without
 * waiting, `requests.ts`), and its supervisor's reports on the control
 * socket, until the conversation ends, or the fork is given up.
 *
 * Until the supervisor says `started`, nothing the backend says reaches
 * the callbacks (a forked backend can write `ready` before its `started`
 * is read): it waits, in order, behind what the app's import wrote (a
 * cold backend writes that on its own stderr first). A fork given up
 * (the start is abandoned, the server stopped serving, or went before this
 * backend's `ready`) is silenced at once and its channels closed: if the
 * server forks it later, its supervisor finds its control socket closed
 * and ends it.
 */
import { constants } from "node:os";
import type { Socket } from "node:net";
import { WarmStartError } from "../../errors";
import type { StartPlan } from "../start-plan";
import type { BridgeProcessCallbacks } from "../../wiring";
import { Containment, guardAgainstOrphan } from "../containment";
import { readControl, type ControlStream } from "../control";
import { ExitTracker } from "../exit";
import { UnixStdio } from "../stdio";
import type { PendingFork } from "./requests";
import type { WarmServer } from "./server";

export const SIGNAL_NAMES = new Map(Object.entries(constants.signals).map(([name, number]) => [number, name as NodeJS.Signals]));

/** What a fork tells the child that stands for it (`WarmChild`). */
export interface ForkEvents {
  /** The request is sent: the backend's stdin. */
  stdin(socket: Socket): void;
  /** The backend's host channel (declared by the start), as it runs: before `started`. */
  hostChannel(socket: Socket): void;
  /** The backend runs under its supervisor (`pid`), signalled this way. */
  started(supervisorPid: number, signal: (signal: NodeJS.Signals | number) => boolean): void;
  /** The backend has exited (a child's `exit`). */
  exited(code: number | null, signal: NodeJS.Signals | null): void;
  /** The conversation is over: its supervisor has closed the control socket (a child's `close`). */
  closed(): void;
  /** This fork gives no backend (it is given up): the start falls back, or fails, with `error`. */
  notForked(error: WarmStartError): void;
}

export class ForkAttempt implements PendingFork {
  private readonly gate: CallbackGate;
  private readonly exit: ExitTracker;
  private stdio: UnixStdio | undefined;
  private control: ControlStream | undefined;
  private stdinSocket: Socket | undefined;
  /** The host channel's host end, from the request's send until the conversation's end. */
  private hostSocket: Socket | undefined;
  private conversationEnded: (() => void) | undefined;
  private stopWatchingServer: (() => void) | undefined;
  private releaseGuard: () => void = () => {};
  private started = false;
  private over = false;

  constructor(
    private readonly server: WarmServer,
    private readonly plan: StartPlan,
    callbacks: BridgeProcessCallbacks,
    private readonly onServerEnded: ((message: string) => void) | undefined,
    private readonly events: ForkEvents,
    readonly patienceMs: number,
  ) {
    this.gate = new CallbackGate(callbacks);
    this.exit = new ExitTracker(plan.exitDrainMs, this.gate.callbacks);
  }

  /** Makes the channels and sends (or queues) the request. Throws when the channels cannot be made. */
  begin(): void {
    try {
      this.stdio = new UnixStdio(this.gate.callbacks, this.plan.options, this.exit, true, this.plan.hostChannel);
    } catch (error) {
      this.exit.dispose();
      throw error;
    }
    const refusal = this.server.requests.submit(this, (late) => this.giveUp(this.refusalError(late.message)));
    if (refusal !== null) this.giveUp(this.refusalError(refusal.message));
  }

  /** `PendingFork`: the request goes now, or the server says why not. */
  send(): { code: string; message: string } | null {
    const ends = this.stdio!.childEnds;
    const refusal = this.server.native.fork(ends.stdin, ends.stdout, ends.stderr, ends.control!, ends.host ?? null, this.plan.termGraceWholeMs);
    if (refusal === null) this.sent();
    return refusal;
  }

  /** The start no longer wants this backend (killed, or given up): nothing of it reaches the callbacks any more. */
  abandon(): void {
    if (this.over) return;
    this.over = true;
    this.gate.mute();
    this.server.requests.withdraw(this);
    this.stopWatchingServer?.();
    this.releaseGuard();
    if (this.stdinSocket) this.stdinSocket.destroy();
    else this.stdio?.abandon();
    this.hostSocket?.destroy();
    this.control?.destroy();
    this.exit.dispose();
    this.conversationEnded?.();
  }

  /** `PendingFork`: this fork gives no backend; the start falls back or fails with `error`. */
  giveUp(error: WarmStartError): void {
    if (this.over) return;
    this.abandon();
    this.events.notForked(error);
  }

  private refusalError(message: string): WarmStartError {
    if (this.server.closed !== undefined || this.server.ended) return this.server.closedError();
    return new WarmStartError(`The prefork server for ${this.server.plan.app} could not take this start: ${message}`, "server-failed");
  }

  /** The request is on its way: the host keeps its own ends, and reads the control socket. */
  private sent(): void {
    const { plan, server } = this;
    const adopted = this.stdio!.adopt(true);
    this.stdinSocket = adopted.stdin!;
    this.hostSocket = adopted.hostChannel;
    this.events.stdin(this.stdinSocket);
    // What the import wrote comes first, as a cold backend's stderr.
    for (const line of server.importOutput) this.gate.callbacks.onStderr?.(line);
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
    this.conversationEnded = server.conversationStarted(() => containment.signal("SIGKILL"));
    this.releaseGuard = plan.killOnHostExit ? guardAgainstOrphan(containment) : () => {};
    this.exit.await("control");
    const controlEnded = this.exit.streamEnded("control");
    let failure: WarmStartError | undefined;
    let reported = false;
    this.stopWatchingServer = server.onGone((end) => {
      // Closed without `kill`, a server exits only once its conversations
      // have (a connection to a shared one closes at once): this one goes
      // on, and its control socket says how it ends.
      if (!end.requested && server.closed !== undefined) return;
      // Before its `ready`, the backend is a start the server's end undid:
      // it falls back or fails as one. After, its conversation ends with it.
      if (!this.gate.sawEvent) return this.giveUp(server.closedError());
      const why = end.requested ? "was killed by closeWarmServers({ kill: true })" : "exited";
      this.onServerEnded?.(`The prefork server of this conversation (${server.plan.app}) ${why} while it ran: its backend ends with it.`);
    });
    const exited = (code: number | null, signal: NodeJS.Signals | null) => {
      if (reported) return;
      reported = true;
      supervisor.exitCode = code;
      supervisor.signalCode = signal;
      this.releaseGuard();
      this.stopWatchingServer?.();
      this.conversationEnded?.();
      this.hostSocket?.destroy();
      this.events.exited(code, signal);
      this.exit.exited(code, signal);
    };
    this.control = readControl(adopted.controlFd!, {
      started: (pid, ownPid) => {
        server.requests.answered(this);
        if (this.over) return;
        this.started = true;
        containment.backendPid = pid;
        supervisorPid = ownPid;
        if (this.hostSocket !== undefined) {
          this.events.hostChannel(this.hostSocket);
          this.gate.callbacks.onHostChannel?.(this.hostSocket);
        }
        this.gate.callbacks.onStarted?.(containment.info);
        this.gate.open();
        this.events.started(ownPid ?? pid, (signal) => containment.signal(signal));
      },
      failed: (report) => {
        server.requests.answered(this);
        failure = new WarmStartError(
          `The prefork server for ${server.plan.app} could not fork this backend: ${report.message} (${report.code}).`,
          "fork-failed",
          server.native.logTail(),
        );
      },
      exited: (code, signal) => exited(code, signal === null ? null : (SIGNAL_NAMES.get(signal) ?? null)),
      ended: () => {
        server.requests.answered(this);
        if (this.over) return;
        if (!this.started) return this.giveUp(failure ?? this.unserved());
        // Without an exit line, the supervisor itself was killed: how the
        // backend ended is not known.
        exited(null, null);
        this.over = true;
        controlEnded(null);
        this.events.closed();
      },
    });
    // A running conversation keeps the host alive, as a spawned child does.
    this.control.ref();
  }

  /** The control socket ended before any report: the server never served the request. */
  private unserved(): WarmStartError {
    if (this.server.closed !== undefined || this.server.ended) return this.server.closedError();
    const tail = this.server.native.logTail();
    const last = tail.length > 0 ? ` Its log ends: ${tail[tail.length - 1]}` : "";
    return new WarmStartError(`The prefork server for ${this.server.plan.app} did not fork this backend (the request was dropped).${last}`, "fork-failed", tail);
  }
}

/**
 * The callbacks of a fork: held back (in order) until `open()`, then
 * straight through, and after `mute()` dropped.
 */
class CallbackGate {
  readonly callbacks: BridgeProcessCallbacks;
  /** An event of the backend's stdout has been delivered (its `ready`, normally). */
  sawEvent = false;
  private held: (() => void)[] | undefined = [];
  private muted = false;

  constructor(target: BridgeProcessCallbacks) {
    const wrap = <K extends keyof BridgeProcessCallbacks>(name: K): BridgeProcessCallbacks[K] => {
      const callback = target[name] as ((...args: unknown[]) => void) | undefined;
      if (callback === undefined) return undefined as BridgeProcessCallbacks[K];
      return ((...args: unknown[]) => {
        if (this.muted) return;
        const call = () => {
          if (this.muted) return;
          if (name === "onEvent") this.sawEvent = true;
          callback(...args);
        };
        if (this.held) this.held.push(call);
        else call();
      }) as BridgeProcessCallbacks[K];
    };
    const direct = <K extends "onStarted" | "onSpawnError" | "onHostChannel">(name: K): BridgeProcessCallbacks[K] => {
      const callback = target[name] as ((...args: unknown[]) => void) | undefined;
      if (callback === undefined) return undefined;
      return ((...args: unknown[]) => {
        if (!this.muted) callback(...args);
      }) as BridgeProcessCallbacks[K];
    };
    this.callbacks = {
      onEvent: wrap("onEvent")!,
      onDecodeError: wrap("onDecodeError"),
      onInvalidLine: wrap("onInvalidLine"),
      onStderr: wrap("onStderr"),
      onReadError: wrap("onReadError"),
      onStdoutClosed: wrap("onStdoutClosed"),
      onExit: wrap("onExit"),
      onStarted: direct("onStarted"),
      onSpawnError: direct("onSpawnError"),
      onHostChannel: direct("onHostChannel"),
    };
  }

  open(): void {
    const waiting = this.held;
    this.held = undefined;
    for (const call of waiting ?? []) call();
  }

  mute(): void {
    this.muted = true;
    this.held = undefined;
  }
}
