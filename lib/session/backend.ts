/**
 * The session's start seam: where the backend a session talks to comes
 * from. Whatever its origin, the controller gets a child the command
 * channel writes to and signals (`BridgeChildLike`), whose output and exit
 * reach the session's callbacks (`BridgeProcessCallbacks`):
 *
 * - **spawned** (`createAgentSession`): from a backend spec, through
 *   `spawnBridgeProcess` (OS pipes read by native threads, contained by the
 *   supervisor or a process group);
 * - **attached** (`attachAgentSession`, `attach.ts`): a process-like object
 *   the application already has, its streams wired through
 *   `wireBridgeProcess`.
 */
import type { BridgeChildLike } from "../channel";
import { spawnBridgeProcess, type BridgeProcessOptions } from "../process";
import type { BridgeProcessCallbacks } from "../wiring";

/** Opens the backend with the session's callbacks; throws when nothing could be started. */
export type OpenBackend = (callbacks: BridgeProcessCallbacks) => BridgeChildLike;

/** A backend spawned from resolved spawn options. */
export function spawnedBackend(spec: BridgeProcessOptions): OpenBackend {
  return (callbacks) => spawnBridgeProcess(spec, callbacks);
}
