/**
 * The warm start option of a backend spec (docs/prefork.md): whether a
 * conversation's backend is forked from a prefork server that has imported
 * the app once, instead of spawned anew.
 */

import { InvalidOptionError } from "../../errors";
import { checkMilliseconds } from "../../options";

/** `true` (the defaults below), `false`/absent (cold), or the details. */
export type WarmOption = boolean | WarmOptions;

export interface WarmOptions {
  /**
   * When a warm start is not possible (no supervisor, not Linux or macOS,
   * a command that is not `… -m agentlane_process_bridge --app X`, or the
   * server refused the app: threads at import, …): start cold and report
   * a `warm` diagnostic (`"cold"`, the default), or fail the start with
   * `SessionStartError` `warm-unavailable` (`"error"`).
   */
  fallback?: "cold" | "error";
  /**
   * How long a prefork server stays after its last conversation has ended
   * (default 60 000 ms; `Infinity`: until `closeWarmServers()` or the host's
   * exit). The timer never keeps the host alive.
   */
  idleMs?: number;
}

/** How long an idle prefork server stays, by default. */
export const DEFAULT_IDLE_MS = 60_000;

/**
 * The option with its defaults, or `undefined` for a cold start. Throws
 * `InvalidOptionError` for an unusable value.
 */
export function warmOptions(option: WarmOption | undefined): Required<WarmOptions> | undefined {
  if (option === undefined || option === false) return undefined;
  if (option !== true && (typeof option !== "object" || option === null)) {
    throw new InvalidOptionError(`warm must be true, false or { fallback, idleMs }, not ${String(option)}.`, "warm");
  }
  const given = option === true ? {} : option;
  const fallback = given.fallback ?? "cold";
  if (fallback !== "cold" && fallback !== "error") {
    throw new InvalidOptionError(`warm.fallback must be "cold" or "error", not ${JSON.stringify(fallback)}.`, "warm.fallback");
  }
  const idleMs = given.idleMs ?? DEFAULT_IDLE_MS;
  if (idleMs !== Number.POSITIVE_INFINITY) checkMilliseconds("warm.idleMs", idleMs);
  return { fallback, idleMs };
}
