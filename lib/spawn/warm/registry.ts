/**
 * The prefork servers of this host, one per key (`plan.ts`): started on
 * the first warm start of a key (or by `prewarm`), or connected to when
 * another host shares one (`shared.ts`); closed after their idle time, by
 * `closeWarmServers()`, or with the host (docs/prefork.md).
 */
import { WarmStartError } from "../../errors";
import type { BridgeProcessOptions } from "../../process";
import { resolveStart } from "../start-plan";
import { DEFAULT_IDLE_MS } from "./options";
import { keyDifference, planServer, type ServerPlan } from "./plan";
import { WarmServer, type WarmServerInfo } from "./server";
import { sharedServerFor } from "./shared-env";

/** The default of `prewarm`'s `timeoutMs`: a session's default ready timeout. */
export const DEFAULT_PREWARM_TIMEOUT_MS = 30_000;

const servers = new Map<string, WarmServer>();
/** Closed (not refused) and not yet exited: `closeWarmServers({ kill: true })` still reaches them. */
const closing = new Set<WarmServer>();

function forget(server: WarmServer): void {
  if (servers.get(server.plan.key) === server) servers.delete(server.plan.key);
  if (server.state === "failed") return;
  closing.add(server);
  server.whenExited(() => closing.delete(server));
}

/** A server for a start, and, for a new one, why the running ones of its app could not serve it. */
export interface FoundServer {
  server: WarmServer;
  /** What differs from the key of a server that runs the same app (a new import is paid for it). */
  difference?: string;
}

/**
 * The server for `plan`: the known one, a shared one (connected to), or a
 * new one. Throws what the addon throws when a server cannot be spawned.
 */
export function serverFor(plan: ServerPlan, idleMs: number, termGraceMs: number): FoundServer {
  const known = servers.get(plan.key);
  if (known) {
    known.wantIdle(idleMs);
    return { server: known };
  }
  const shared = sharedServerFor(plan);
  if (shared !== undefined) {
    try {
      const server = WarmServer.connect(plan, shared.socket, shared.importOutput, idleMs, forget);
      servers.set(plan.key, server);
      return { server };
    } catch {
      // Not there any more (its host has closed it): this host starts its own.
    }
  }
  // Closed servers are not said: a new one would start for their key too.
  const difference = [...servers.values()].map((running) => keyDifference(running.plan, plan)).find((d) => d);
  const server = WarmServer.start(plan, idleMs, termGraceMs, forget);
  servers.set(plan.key, server);
  return { server, difference };
}

/**
 * Starts a shared server (`shareWarmServer`: listening on `socket`, never
 * idle) as the server of its key; one this host ran for the key is closed
 * (its conversations go on).
 */
export function startShared(plan: ServerPlan, termGraceMs: number, socket: string): WarmServer {
  const server = WarmServer.start(plan, Number.POSITIVE_INFINITY, termGraceMs, forget, socket);
  const replaced = servers.get(plan.key);
  servers.set(plan.key, server);
  replaced?.close("close");
  return server;
}

/**
 * Waits until `server` is ready (resolves with what it tells) or cannot be
 * (rejects with why), for at most `timeoutMs`: then it rejects with
 * `timeout`, and stops waiting (the server is not kept for it: its idle
 * time runs).
 */
export function settled(server: WarmServer, timeoutMs: number): Promise<WarmServerInfo> {
  return new Promise((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const stop = server.whenSettled(() => {
      clearTimeout(timer);
      if (server.state === "ready" && server.info && server.closed === undefined && !server.ended) resolve(server.info);
      else reject(server.state === "failed" && server.failure ? server.failure : server.closedError());
    });
    if (server.state !== "starting" || !Number.isFinite(timeoutMs)) return;
    timer = setTimeout(() => {
      stop();
      const tail = server.native.logTail();
      const last = tail.length > 0 ? ` Its log ends: ${tail[tail.length - 1]}` : "";
      reject(new WarmStartError(`The prefork server for ${server.plan.app} was not ready within ${timeoutMs} ms: its import hangs, or takes longer.${last}`, "timeout", tail));
    }, timeoutMs);
  });
}

/**
 * Starts the prefork server a warm backend spec would use, before its first
 * conversation, and resolves once it is ready (rejects with the
 * `WarmStartError` saying why it cannot be: a refusal, no supervisor, not
 * ready within `timeoutMs`, …). Like any server, it goes after `idleMs`
 * without a conversation, `closeWarmServers()`, or the host's exit.
 */
export function prewarmServer(options: BridgeProcessOptions, timeoutMs: number): Promise<WarmServerInfo> {
  const plan = planServer(options);
  if (plan instanceof WarmStartError) return Promise.reject(plan);
  let found: FoundServer;
  try {
    const start = resolveStart(options);
    found = serverFor(plan, start.warm?.idleMs ?? DEFAULT_IDLE_MS, start.termGraceMs);
  } catch (error) {
    return Promise.reject(error);
  }
  return settled(found.server, timeoutMs);
}

/**
 * Stops every prefork server of this host (those it started, shared ones
 * included, and its connections to other hosts' shared servers): none forks
 * again (the next warm conversation starts a new one), and each exits once
 * its running conversations have ended (`kill: true`: now, and they end with
 * it). Starts still waiting for one fall back cold, or fail, with
 * `server-closed`. Forgets the refusals it remembered. Resolves once all
 * have exited.
 */
export function closeWarmServers(options: { kill?: boolean } = {}): Promise<void> {
  const all = new Set([...servers.values(), ...closing]);
  servers.clear();
  for (const server of all) server.close(options.kill ? "kill" : "close");
  return Promise.all([...all].map((server) => server.exited())).then(() => {});
}
