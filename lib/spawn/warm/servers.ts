/**
 * The prefork servers of this host, one per key (`plan.ts`): started on
 * the first warm conversation (or `prewarm`), shut down after an idle
 * time once their last conversation has ended, by `closeWarmServers()`,
 * and with the host (docs/prefork.md).
 *
 * Nothing here keeps the event loop alive but a server's start while
 * someone waits for it: the native server's callback is weak, the idle
 * timer unreferenced. A terminated worker's servers are killed by the
 * addon (`src/prefork.rs`), an exiting host's by the exit hook.
 */
import { WarmStartError, type WarmUnavailableReason } from "../../errors";
import { native, type NativeBinding } from "../../native";
import type { BridgeProcessOptions } from "../../process";
import { guardAgainstOrphan } from "../containment";
import { DEFAULT_IDLE_MS, warmOptions } from "./options";
import { planServer, type ServerPlan } from "./plan";

type NativeServer = InstanceType<NativeBinding["PreforkServer"]>;
type NativeEvent = Parameters<ConstructorParameters<NativeBinding["PreforkServer"]>[8]>[0];

/** The refusal codes a server gives (`bridge_prefork::StartError::code`) that are the app's, and stay. */
const REFUSALS: ReadonlySet<string> = new Set(["threads", "event-loop", "import-failed", "bad-app"]);

/** How a warm server ended, as its running conversations are told. */
export interface ServerEnd {
  /** Whether this host asked for it (`closeWarmServers({ kill: true })`). */
  requested: boolean;
}

/** What a running server tells about itself (`prewarm`). */
export interface WarmServerInfo {
  /** The Python server's pid. */
  pid: number;
  /** Its supervisor's pid. */
  supervisorPid: number;
  /** `module:factory`. */
  app: string;
  /** The Python and agentlane versions it runs. */
  python: string;
  agentlane: string | null;
}

export class WarmServer {
  state: "starting" | "ready" | "failed" = "starting";
  /** Set once the server has gone (it forks no more). */
  ended: ServerEnd | undefined;
  /** Its supervisor has exited too: nothing of it is left. */
  private hasExited = false;
  failure: WarmStartError | undefined;
  info: WarmServerInfo | undefined;
  /** Conversations forked and not yet ended. */
  private active = 0;
  private readonly waiting = new Set<() => void>();
  /** The running conversations, told when the server goes. */
  private readonly goneWatchers = new Set<(end: ServerEnd) => void>();
  private readonly exitWaiters = new Set<() => void>();
  private idleTimer: ReturnType<typeof setTimeout> | undefined;
  /** Referenced while the server starts: a host awaiting it must not exit. */
  private keepAlive: ReturnType<typeof setInterval> | undefined = setInterval(() => {}, 1 << 30);
  private requested = false;
  private readonly releaseGuard: () => void;
  readonly native: NativeServer;

  constructor(
    readonly plan: ServerPlan,
    private idleMs: number,
    termGraceMs: number,
    private readonly forget: (server: WarmServer) => void,
  ) {
    try {
      this.native = new native.PreforkServer(
        plan.command,
        plan.prefix,
        plan.app,
        plan.cwd,
        plan.env,
        plan.supervisor,
        Math.max(0, Math.round(termGraceMs)),
        null,
        (event) => this.onEvent(event),
      );
    } catch (error) {
      this.stopKeepingAlive();
      throw error;
    }
    this.releaseGuard = guardAgainstOrphan({ killNow: () => this.native.kill() });
  }

  /** Calls `then` once the server is ready or has failed (at once if it has). */
  whenSettled(then: () => void): () => void {
    if (this.state !== "starting") {
      then();
      return () => {};
    }
    this.waiting.add(then);
    return () => this.waiting.delete(then);
  }

  /** Watches the server's end while a conversation runs on it. */
  onGone(watch: (end: ServerEnd) => void): () => void {
    this.goneWatchers.add(watch);
    return () => this.goneWatchers.delete(watch);
  }

  /** A conversation was forked; `ended` is to be called once when it is over. */
  conversationStarted(): () => void {
    this.active++;
    clearTimeout(this.idleTimer);
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.active--;
      if (this.active === 0) this.startIdleTimer();
    };
  }

  /** Keeps the longest idle time asked for by the specs that use this server. */
  wantIdle(idleMs: number): void {
    this.idleMs = Math.max(this.idleMs, idleMs);
  }

  /** No more conversations; the server exits once the running ones have ended. */
  shutdown(): void {
    this.requested = true;
    this.forget(this);
    clearTimeout(this.idleTimer);
    this.native.shutdown();
  }

  /** The server and all its conversations end now. */
  kill(): void {
    this.requested = true;
    this.forget(this);
    clearTimeout(this.idleTimer);
    this.native.kill();
  }

  /** Resolves once the server has exited. */
  exited(): Promise<void> {
    if (this.hasExited) return Promise.resolve();
    // Someone waits for it: the host must not exit first.
    const keepAlive = setInterval(() => {}, 1 << 30);
    return new Promise((resolve) =>
      this.exitWaiters.add(() => {
        clearInterval(keepAlive);
        resolve();
      }),
    );
  }

  private startIdleTimer(): void {
    if (this.state !== "ready" || this.ended || !Number.isFinite(this.idleMs)) return;
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.active === 0) this.shutdown();
    }, this.idleMs);
    this.idleTimer.unref();
  }

  private onEvent(event: NativeEvent): void {
    if (event.kind === "ready") {
      this.state = "ready";
      this.info = {
        pid: event.pid!,
        supervisorPid: this.native.supervisorPid ?? 0,
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
      this.releaseGuard();
      for (const resolve of [...this.exitWaiters]) resolve();
      this.exitWaiters.clear();
    }
  }

  private gone(): void {
    if (this.ended === undefined) this.ended = { requested: this.requested };
    // A refusing server exits: its refusal stays known.
    if (this.state !== "failed") this.forget(this);
    const end = { requested: this.requested };
    for (const watch of [...this.goneWatchers]) watch(end);
    this.goneWatchers.clear();
  }

  private settle(): void {
    this.stopKeepingAlive();
    for (const then of [...this.waiting]) then();
    this.waiting.clear();
  }

  private stopKeepingAlive(): void {
    if (this.keepAlive !== undefined) clearInterval(this.keepAlive);
    this.keepAlive = undefined;
  }
}

function describeFailure(code: string, message: string | null | undefined): string {
  const why = message ?? code;
  switch (code) {
    case "threads":
    case "event-loop":
    case "import-failed":
    case "bad-app":
      return `refused it (${code}): ${why}`;
    default:
      return `did not start (${code}): ${why}`;
  }
}

// ---- the servers by key ------------------------------------------------------

const servers = new Map<string, WarmServer>();

function forget(server: WarmServer): void {
  if (servers.get(server.plan.key) === server) servers.delete(server.plan.key);
}

/**
 * The server for `plan` (started if there is none). Throws what the addon
 * throws when the server cannot be spawned at all.
 */
export function serverFor(plan: ServerPlan, idleMs: number, termGraceMs: number): WarmServer {
  const known = servers.get(plan.key);
  if (known) {
    known.wantIdle(idleMs);
    return known;
  }
  const server = new WarmServer(plan, idleMs, termGraceMs, forget);
  servers.set(plan.key, server);
  return server;
}

/**
 * Starts the prefork server a warm backend spec would use, before its first
 * conversation, and resolves once it is ready (rejects with the
 * `WarmStartError` saying why it cannot be: a refusal, no supervisor, …).
 * A server started this way stays until its conversations have been idle
 * for `idleMs`, `closeWarmServers()`, or the host's exit.
 */
export function prewarmServer(options: BridgeProcessOptions): Promise<WarmServerInfo> {
  const plan = planServer(options);
  if (plan instanceof WarmStartError) return Promise.reject(plan);
  let server: WarmServer;
  try {
    server = serverFor(plan, warmOptions(options.warm)?.idleMs ?? DEFAULT_IDLE_MS, options.termGraceMs ?? 500);
  } catch (error) {
    return Promise.reject(error);
  }
  return new Promise((resolve, reject) => {
    server.whenSettled(() => {
      if (server.state === "ready" && server.info) resolve(server.info);
      else reject(server.failure ?? new WarmStartError(`The prefork server for ${plan.app} has exited.`, "server-failed"));
    });
  });
}

/**
 * Stops every prefork server of this host: none forks again (the next warm
 * conversation starts a new one), and each exits once its running
 * conversations have ended (`kill: true`: now, and they end with it).
 * Forgets the refusals it remembered. Resolves once all have exited.
 */
export function closeWarmServers(options: { kill?: boolean } = {}): Promise<void> {
  const all = [...servers.values()];
  servers.clear();
  for (const server of all) {
    if (options.kill) server.kill();
    else server.shutdown();
  }
  return Promise.all(all.map((server) => server.exited())).then(() => {});
}
