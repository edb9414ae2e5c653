/**
 * Warm starts (docs/prefork.md): a conversation's backend forked from a
 * prefork server that imported the app once. `startWarm` is the process
 * layer's entry (through `startBridgeProcess`); `prewarm`,
 * `shareWarmServer` and `closeWarmServers` are public.
 */
import type { ChildProcess } from "node:child_process";
import { WarmStartError } from "../../errors";
import { checkMilliseconds } from "../../options";
import { resolveBackendSpec, spawnPlanned, type BackendSpec, type BridgeProcessOptions } from "../../process";
import { coldPlan, type StartPlan } from "../start-plan";
import type { BridgeProcessCallbacks } from "../../wiring";
import { WarmChild, type WarmHooks } from "./child";
import { planServer } from "./plan";
import { closeWarmServers, DEFAULT_PREWARM_TIMEOUT_MS, prewarmServer, serverFor, type FoundServer } from "./registry";
import type { WarmServerInfo } from "./server";
import { shareWarmServer, type SharedWarmServer } from "./shared";

export { closeWarmServers, shareWarmServer, WarmChild, type SharedWarmServer, type WarmHooks, type WarmServerInfo };

/**
 * Starts the backend warm: forked by the prefork server of its key (which
 * is started if there is none). When that is not possible, starts it cold
 * (`fallback: "cold"`, `hooks.onFallback` says why, in a start slot when
 * `hooks.coldSlot` gives one) or throws the `WarmStartError` (`"error"`);
 * what is known only later (a refusal once the server has imported the
 * app, a server that stops serving) comes the same way, later
 * (`onSpawnError`, then `onExit`).
 */
export function startWarm(plan: StartPlan, callbacks: BridgeProcessCallbacks, hooks: WarmHooks): ChildProcess | WarmChild {
  const { options } = plan;
  const warm = plan.warm!;
  const cold = () => spawnPlanned(coldPlan(plan), callbacks);
  const child = new WarmChild(plan, callbacks, hooks, warm.fallback, cold);
  const unavailable = (error: WarmStartError) => {
    if (warm.fallback === "error") throw error;
    child.fallBack(error);
    return child;
  };
  const serverPlan = planServer(options);
  if (serverPlan instanceof WarmStartError) return unavailable(serverPlan);
  let found: FoundServer;
  try {
    found = serverFor(serverPlan, warm.idleMs, plan.termGraceMs);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return unavailable(new WarmStartError(`The prefork server for ${serverPlan.app} could not be started: ${message}`, "server-failed"));
  }
  const { server, difference } = found;
  if (difference !== undefined) {
    hooks.onNewServer?.(
      `A new prefork server for ${serverPlan.app} starts for this conversation (a new import of the app): one already runs for it, with a different key: ${difference}. ` +
        "A server serves the specs with the same interpreter, app, cwd and environment (all of process.env when the spec has no env): give env explicitly to share one.",
    );
  }
  if (server.state === "failed" && server.failure) return unavailable(server.failure);
  child.startOn(server);
  return child;
}

/**
 * Starts the prefork server a warm backend would use (`{ app, projectDir }`
 * or `{ command, args, cwd }`, as `createAgentSession` takes it), so that
 * the first conversation needs no import; resolves with the server once it
 * is ready, rejects with a `WarmStartError` saying why it cannot be (after
 * `timeoutMs`, default 30 000: `timeout`).
 */
export function prewarm(backend: BackendSpec, options: { timeoutMs?: number } = {}): Promise<WarmServerInfo> {
  let spec: BridgeProcessOptions;
  const timeoutMs = options.timeoutMs ?? DEFAULT_PREWARM_TIMEOUT_MS;
  try {
    spec = resolveBackendSpec(backend);
    if (timeoutMs !== Number.POSITIVE_INFINITY) checkMilliseconds("timeoutMs", timeoutMs);
  } catch (error) {
    return Promise.reject(error);
  }
  return prewarmServer(spec, timeoutMs);
}
