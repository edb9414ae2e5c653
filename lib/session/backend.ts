/**
 * The session's start seam: where the backend a session talks to comes
 * from. Whatever its origin, the controller gets a child the command
 * channel writes to and signals (`BridgeChildLike`), whose output and exit
 * reach the session's callbacks (`BridgeProcessCallbacks`):
 *
 * - **spawned** (`createAgentSession`): from a backend spec, through
 *   `spawnBridgeProcess` (OS pipes read by native threads, contained by the
 *   supervisor or a process group), or forked from a prefork server when
 *   the spec asks for a warm start (`startBridgeProcess`, `spawn/warm/`);
 * - **attached** (`attachAgentSession`, `attach.ts`): a process-like object
 *   the application already has, its streams wired through
 *   `wireBridgeProcess`.
 */
import type { BridgeChildLike } from "../channel";
import { startPlanned } from "../spawn/start";
import type { StartPlan } from "../spawn/start-plan";
import { missingSupervisor } from "../spawn/supervisor";
import type { WarmHooks } from "../spawn/warm/child";
import type { BridgeProcessCallbacks } from "../wiring";
import type { SessionDiagnostic } from "./types";

/** Opens the backend with the session's callbacks; throws when nothing could be started. */
export type OpenBackend = (callbacks: BridgeProcessCallbacks) => BridgeChildLike;

/**
 * The backend of a start resolved once (`spawn/start-plan.ts`): cold, or
 * warm when the plan says so (the one choice of start mode; `warm`: the
 * start slot a fallback's cold start takes, and the ready timeout, besides
 * the diagnostics a warm start reports).
 */
export function startedBackend(
  plan: StartPlan,
  diagnostic: (diagnostic: SessionDiagnostic) => void,
  warm: Pick<WarmHooks, "coldSlot" | "readyTimeoutMs"> = {},
): OpenBackend {
  if ((plan.options.supervise ?? "auto") === "auto") {
    const missing = missingSupervisor();
    if (missing !== null) diagnostic({ kind: "supervisor-missing", ...missing });
  }
  if (plan.warm === undefined) return (callbacks) => startPlanned(plan, callbacks);
  const hooks: WarmHooks = {
    ...warm,
    onFallback: (error) => diagnostic({ kind: "warm", event: "fallback", reason: error.reason, message: `${error.message} Starting it cold.` }),
    onServerEnded: (message) => diagnostic({ kind: "warm", event: "server-exited", reason: null, message }),
    onNewServer: (message) => diagnostic({ kind: "warm", event: "new-server", reason: null, message }),
  };
  return (callbacks) => startPlanned(plan, callbacks, hooks);
}
