/**
 * The session layer (docs/protocol.md §9.5): `createAgentSession` spawns a
 * backend and hosts a conversation on it. The controller (`controller.ts`)
 * conducts; `backend.ts` is where the backend comes from; `operations.ts`
 * is what the application calls.
 */
import { SessionStartError } from "../errors";
import type { JsonObject } from "../protocol";
import { resolveBackendSpec } from "../process";
import { spawnedBackend } from "./backend";
import { checkedBackend } from "./backend-spec";
import { SessionController } from "./controller";
import type { AgentSession, AgentSessionOptions } from "./types";

/**
 * Spawns the backend, waits for `ready` and resolves with the session handle
 * (§9.5.4 startup). Rejects with `SessionStartError` if startup fails.
 */
export function createAgentSession<TConfig = JsonObject, TConfigPatch = Partial<TConfig>>(
  options: AgentSessionOptions<TConfig, TConfigPatch>,
): Promise<AgentSession<TConfig, TConfigPatch>> {
  const controller = new SessionController<TConfig, TConfigPatch>(options);
  let spec;
  try {
    spec = { termGraceMs: controller.termGraceMs, ...resolveBackendSpec(checkedBackend(options.backend)), flow: controller.flow };
  } catch (error) {
    return Promise.reject(new SessionStartError(error instanceof Error ? error.message : String(error), "invalid-spec", { cause: error }));
  }
  return controller.start(spec.command, spawnedBackend(spec));
}
