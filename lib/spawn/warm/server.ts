/**
 * One prefork server as this host sees it (docs/prefork.md): its start and
 * handshake, the fork requests it is sent (`requests.ts`), its idle time,
 * its close (bounded, whatever the app started), and its end. Started here
 * under its supervisor, or a connection to a shared server (`shared.ts`).
 *
 * Nothing here keeps the event loop alive but a start that waits for the
 * server (a warm start, `prewarm`): the native server's callback is weak,
 * the timers are unreferenced. A terminated worker's servers are killed by
 * the addon (`src/prefork.rs`), an exiting host's by the exit hook.
 */
import { WarmStartError, type WarmUnavailableReason } from "../../errors";
import { native, type NativeBinding } from "../../native";
import { guardAgainstOrphan } from "../containment";
import type { ServerPlan } from "./plan";
import { ForkRequests } from "./requests";

type NativeServer = InstanceType<NativeBinding["PreforkServer"]>;
type NativeEvent = Parameters<ConstructorParameters<NativeBinding["PreforkServer"]>[8]>[0];

/** The refusal codes a server gives (`bridge_prefork::StartError::code`) that are the app's, and stay. */
const REFUSALS: ReadonlySet<string> = new Set(["threads", "event-loop", "import-failed", "bad-app"]);

/**
 * After it was closed and its last conversation of this host has ended, how
 * long a server has to exit (beyond its supervisor's grace) before it is
 * killed: a server exits at once then, unless it is stopped or hung.
 */
const EXIT_BOUND_MS = 5000;

/** Why this host closed a server: no fork is sent to it after. */
export type ServerClose = "close" | "kill" | "idle" | "unresponsive";

/** How a warm server ended, as its running conversations are told. */
export interface ServerEnd {
  /** Whether this host asked for it (`closeWarmServers({ kill: true })`). */
  requested: boolean;
}

/** What a running server tells about itself (`prewarm`). */
export interface WarmServerInfo {
  /** The Python server's pid. */
  pid: number;
  /** Its supervisor's pid (`null` for a server shared by another host: not this host's to end). */
  supervisorPid: number | null;
  /** `module:factory`. */
  app: string;
  /** The Python and agentlane versions it runs. */
  python: string;
  agentlane: string | null;
}

export class WarmServer {
  state: "starting" | "ready" | "failed" = "starting";
  failure: WarmStartError | undefined;
  info: WarmServerInfo | undefined;
  /** Why this host closed it, once it has. */
  closed: ServerClose | undefined;
  /** Set once the server has gone (it forks no more). */
  ended: ServerEnd | undefined;
  /** Its supervisor has exited too: nothing of it is left. */
  private hasExited = false;
  readonly requests = new ForkRequests(() => this.close("unresponsive"));
  /** What its import wrote (a cold backend writes it on its own stderr). */
  importOutput: string[] = [];
  /** Conversations forked (sent) and not yet ended: how each is killed. */
  private readonly conversations = new Set<() => void>();
  private readonly waiting = new Set<() => void>();
  /** The running conversations, told when the server goes. */
  private readonly goneWatchers = new Set<(end: ServerEnd) => void>();
  private readonly exitWaiters = new Set<() => void>();
  private idleTimer: ReturnType<typeof setTimeout> | undefined;
  private exitTimer: ReturnType<typeof setTimeout> | undefined;
  /** Referenced while a start waits for the server: that host must not exit. */
  private keepAlive: ReturnType<typeof setInterval> | undefined;
  private readonly releaseGuard: () => void;
  readonly native: NativeServer;

  private constructor(
    readonly plan: ServerPlan,
    private idleMs: number,
    private readonly termGraceMs: number,
    private readonly forget: (server: WarmServer) => void,
    open: (onEvent: (event: NativeEvent) => void) => NativeServer,
    /** What this server's `kill` ends: the whole tree, or (shared by another host) this host's conversations. */
    private readonly owned: boolean,
    /** It listens for other hosts (`shareWarmServer`): their conversations are not counted here. */
    private readonly sharing = false,
  ) {
    this.native = open((event) => this.onEvent(event));
    this.releaseGuard = owned ? guardAgainstOrphan({ killNow: () => this.native.kill() }) : () => {};
    this.updateIdle();
  }

  /** Starts a server for `plan` (`listen`: a shared server's socket). Throws what the addon throws. */
  static start(plan: ServerPlan, idleMs: number, termGraceMs: number, forget: (server: WarmServer) => void, listen: string | null = null): WarmServer {
    const grace = Math.max(0, Math.round(termGraceMs));
    const open = (onEvent: (event: NativeEvent) => void) =>
      new native.PreforkServer(plan.command, plan.prefix, plan.app, plan.cwd, plan.env, plan.supervisor, grace, listen, onEvent);
    return new WarmServer(plan, idleMs, termGraceMs, forget, open, true, listen !== null);
  }

  /** Connects to the shared server listening on `path`. Throws when nothing listens there. */
  static connect(plan: ServerPlan, path: string, importOutput: string[], idleMs: number, forget: (server: WarmServer) => void): WarmServer {
    const server = new WarmServer(plan, idleMs, 0, forget, (onEvent) => native.PreforkServer.connect(path, onEvent), false);
    server.importOutput = importOutput;
    return server;
  }

  /** Calls `then` once the server is ready, has failed or is closed (at once if it is). */
  whenSettled(then: () => void): () => void {
    if (this.state !== "starting" || this.closed !== undefined) {
      then();
      return () => {};
    }
    this.waiting.add(then);
    this.updateKeepAlive();
    this.updateIdle();
    return () => {
      this.waiting.delete(then);
      this.updateKeepAlive();
      this.updateIdle();
    };
  }

  /** Watches the server's end while a conversation runs on it. */
  onGone(watch: (end: ServerEnd) => void): () => void {
    this.goneWatchers.add(watch);
    return () => this.goneWatchers.delete(watch);
  }

  /**
   * A conversation was forked (`kill` ends it: what `close("kill")` does
   * for a shared server, whose tree is not this host's); the function
   * returned is to be called once when it is over.
   */
  conversationStarted(kill: () => void): () => void {
    const entry = () => kill();
    this.conversations.add(entry);
    this.updateIdle();
    return () => {
      if (!this.conversations.delete(entry)) return;
      this.updateIdle();
      this.boundExit();
    };
  }

  /** Keeps the longest idle time asked for by the specs that use this server. */
  wantIdle(idleMs: number): void {
    this.idleMs = Math.max(this.idleMs, idleMs);
  }

  /**
   * No more conversations: the server exits once its running ones have
   * ended (`close`), or now with them (`kill`). Starts still waiting for it
   * are told (`server-closed`, `server-unresponsive`).
   */
  close(how: ServerClose): void {
    if (this.closed !== undefined && how !== "kill") return;
    this.closed = how;
    this.forget(this);
    clearTimeout(this.idleTimer);
    // Queued requests cannot be sent any more; an unresponsive server's
    // sent ones will not be served.
    this.requests.giveUpAll(this.closedError(), how === "unresponsive");
    if (how === "kill") {
      this.native.kill();
      if (!this.owned) for (const kill of [...this.conversations]) kill();
      // Its conversations are told now, not when the end is read: which of
      // their exits and the server's end is read first is a race.
      this.tellGone({ requested: true });
    } else {
      this.native.shutdown();
      this.boundExit();
    }
    this.settle();
  }

  /** Why a start cannot be forked here now that it is closed or gone. */
  closedError(): WarmStartError {
    const app = this.plan.app;
    switch (this.closed) {
      case "unresponsive":
        return new WarmStartError(
          `The prefork server for ${app} stopped taking requests (it forked nothing while this start waited: stopped or hung); it is closed, and the next warm start starts a new one.`,
          "server-unresponsive",
          this.native.logTail(),
        );
      case "close":
      case "kill":
        return new WarmStartError(`closeWarmServers() closed the prefork server for ${app} before this backend was ready.`, "server-closed");
      default:
        return this.failure ?? new WarmStartError(`The prefork server for ${app} ended before this backend was ready.`, "server-failed", this.native.logTail());
    }
  }

  /** Calls `then` once the server has exited (at once if it has), keeping nothing alive. */
  whenExited(then: () => void): void {
    if (this.hasExited) then();
    else this.exitWaiters.add(then);
  }

  /** Resolves once the server has exited; the host stays until then. */
  exited(): Promise<void> {
    // Someone waits for it: the host must not exit first.
    const keepAlive = setInterval(() => {}, 1 << 30);
    return new Promise<void>((resolve) => this.whenExited(resolve)).finally(() => clearInterval(keepAlive));
  }

  /**
   * Idle: no conversation, no start waiting. A server stays `idleMs` so
   * (ready or still importing: one whose only start gave up, or that was
   * only prewarmed, goes too), then it is closed.
   */
  private updateIdle(): void {
    const idle = this.conversations.size === 0 && this.waiting.size === 0 && this.requests.waiting === 0;
    if (!idle || this.closed !== undefined || this.ended || this.state === "failed" || !Number.isFinite(this.idleMs)) {
      clearTimeout(this.idleTimer);
      this.idleTimer = undefined;
      return;
    }
    if (this.idleTimer !== undefined) return;
    this.idleTimer = setTimeout(() => this.close("idle"), this.idleMs);
    this.idleTimer.unref();
  }

  /**
   * Closed, with none of this host's conversations left: it exits now, or
   * is killed. (Not a shared one: other hosts' conversations may run on it,
   * which this host does not count; it ends with this host at the latest.)
   */
  private boundExit(): void {
    if (this.closed === undefined || this.conversations.size > 0 || this.hasExited || this.exitTimer !== undefined || !this.owned || this.sharing) return;
    this.exitTimer = setTimeout(() => this.native.kill(), this.termGraceMs + EXIT_BOUND_MS);
    this.exitTimer.unref();
  }

  private updateKeepAlive(): void {
    const wanted = this.waiting.size > 0 && this.state === "starting" && this.closed === undefined;
    if (wanted && this.keepAlive === undefined) this.keepAlive = setInterval(() => {}, 1 << 30);
    if (!wanted && this.keepAlive !== undefined) {
      clearInterval(this.keepAlive);
      this.keepAlive = undefined;
    }
  }

  private onEvent(event: NativeEvent): void {
    if (event.kind === "ready") {
      this.state = "ready";
      if (this.owned) this.importOutput = this.native.importOutput();
      this.info = {
        pid: event.pid!,
        supervisorPid: this.native.supervisorPid ?? null,
        app: this.plan.app,
        python: event.python ?? "",
        agentlane: event.agentlane ?? null,
      };
      this.settle();
    } else if (event.kind === "failed") {
      const code = event.code ?? "server-failed";
      const reason: WarmUnavailableReason = REFUSALS.has(code) ? (code as WarmUnavailableReason) : "server-failed";
      const tail = event.logTail.length > 0 ? `\n${event.logTail.join("\n")}` : "";
      this.failure = new WarmStartError(`The prefork server for ${this.plan.app} ${describeFailure(code, event.message)}${tail}`, reason, event.logTail);
      this.state = "failed";
      // A refusal is the app's, and stays (until `closeWarmServers()`); any
      // other failure is forgotten, and the next conversation tries again.
      if (reason === "server-failed") this.forget(this);
      this.settle();
    } else if (event.kind === "gone") {
      // The server has exited (its supervisor's exit comes once what it
      // forked has ended): it forks no more, and its running conversations
      // are ending with it.
      this.gone();
    } else {
      this.gone();
      this.hasExited = true;
      this.settle();
      clearTimeout(this.idleTimer);
      clearTimeout(this.exitTimer);
      this.releaseGuard();
      for (const resolve of [...this.exitWaiters]) resolve();
      this.exitWaiters.clear();
    }
  }

  private gone(): void {
    if (this.ended !== undefined) return;
    this.ended = { requested: this.closed === "kill" };
    // What was not sent never will be; what was is told by its control socket.
    this.requests.giveUpAll(this.closedError(), false);
    clearTimeout(this.idleTimer);
    // A refusing server exits: its refusal stays known.
    if (this.state !== "failed") this.forget(this);
    this.tellGone(this.ended);
    this.settle();
  }

  private tellGone(end: ServerEnd): void {
    const watchers = [...this.goneWatchers];
    this.goneWatchers.clear();
    for (const watch of watchers) watch(end);
  }

  private settle(): void {
    const waiting = [...this.waiting];
    this.waiting.clear();
    this.updateKeepAlive();
    for (const then of waiting) then();
    this.updateIdle();
  }
}

function describeFailure(code: string, message: string | null | undefined): string {
  const why = message ?? code;
  return REFUSALS.has(code) ? `refused it (${code}): ${why}` : `did not start (${code}): ${why}`;
}
