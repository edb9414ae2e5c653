/**
 * Starting a backend from spawn options: cold (`spawnBridgeProcess`) or,
 * when the options ask for it, warm (`warm/`). The one choice of start mode,
 * shared by the session and by hosts of the process layer.
 */
import type { ChildProcess } from "node:child_process";
import { spawnPlanned, type BridgeProcessOptions, type WithHostChannel } from "../process";
import type { BridgeProcessCallbacks } from "../wiring";
import { startWarm, type WarmChild, type WarmHooks } from "./warm/index";
import { resolveStart, type StartPlan } from "./start-plan";

/** A started backend: a spawned `ChildProcess`, or a warm one that behaves as such. */
export type BridgeChild = WithHostChannel<ChildProcess> | WarmChild;

/**
 * Starts the backend as `spawnBridgeProcess` does (same callbacks, same
 * timing of `onExit`), warm when `options.warm` says so (docs/prefork.md).
 * Throws what `spawnBridgeProcess` throws, and, with `warm: { fallback:
 * "error" }`, the `WarmStartError` of a warm start that cannot be.
 */
export function startBridgeProcess(options: BridgeProcessOptions, callbacks: BridgeProcessCallbacks, hooks: WarmHooks = {}): BridgeChild {
  return startPlanned(resolveStart(options), callbacks, hooks);
}

/** `startBridgeProcess` of a start already resolved (`start-plan.ts`): the session resolves its start once and opens it here. */
export function startPlanned(plan: StartPlan, callbacks: BridgeProcessCallbacks, hooks: WarmHooks = {}): BridgeChild {
  if (plan.warm === undefined) return spawnPlanned(plan, callbacks);
  return startWarm(plan, callbacks, hooks);
}
