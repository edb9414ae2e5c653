/**
 * Warm starts (docs/prefork.md): a conversation's backend forked from a
 * prefork server that imported the app once. `startWarm` is the process
 * layer's entry (through `startBridgeProcess`); `prewarm` and
 * `closeWarmServers` are public.
 */
import type { ChildProcess } from "node:child_process";
import { WarmStartError } from "../../errors";
import { checkProcessOptions } from "../../options";
import { resolveBackendSpec, spawnBridgeProcess, type BackendSpec, type BridgeProcessOptions } from "../../process";
import type { BridgeProcessCallbacks } from "../../wiring";
import { WarmChild, type WarmHooks } from "./child";
import type { WarmOptions } from "./options";
import { planServer } from "./plan";
import { closeWarmServers, prewarmServer, serverFor, type WarmServerInfo } from "./servers";

export { closeWarmServers, WarmChild, type WarmHooks, type WarmServerInfo };

/**
 * Starts the backend warm: forked by the prefork server of its key (which
 * is started if there is none). When that is not possible, starts it cold
 * (`fallback: "cold"`, `hooks.onFallback` says why) or throws the
 * `WarmStartError` (`"error"`); a refusal known only once the server has
 * imported the app comes the same way, later (`onSpawnError`, then
 * `onExit`).
 */
export function startWarm(
  options: BridgeProcessOptions,
  warm: Required<WarmOptions>,
  callbacks: BridgeProcessCallbacks,
  hooks: WarmHooks,
): ChildProcess | WarmChild {
  checkProcessOptions(options);
  const cold = () => spawnBridgeProcess({ ...options, warm: false }, callbacks);
  const unavailable = (error: WarmStartError) => {
    if (warm.fallback === "error") throw error;
    hooks.onFallback?.(error);
    return cold();
  };
  const plan = planServer(options);
  if (plan instanceof WarmStartError) return unavailable(plan);
  let server;
  try {
    server = serverFor(plan, warm.idleMs, options.termGraceMs ?? 500);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return unavailable(new WarmStartError(`The prefork server for ${plan.app} could not be started: ${message}`, "server-failed"));
  }
  if (server.state === "failed" && server.failure) return unavailable(server.failure);
  const child = new WarmChild(options, callbacks, hooks, warm.fallback, cold);
  child.startOn(server);
  return child;
}

/**
 * Starts the prefork server a warm backend would use (`{ app, projectDir }`
 * or `{ command, args, cwd }`, as `createAgentSession` takes it), so that
 * the first conversation needs no import; resolves with the server once it
 * is ready, rejects with a `WarmStartError` saying why it cannot be.
 */
export function prewarm(backend: BackendSpec): Promise<WarmServerInfo> {
  let options: BridgeProcessOptions;
  try {
    options = resolveBackendSpec(backend);
  } catch (error) {
    return Promise.reject(error);
  }
  return prewarmServer(options);
}
