/**
 * Checking the numbers an application gives (timeouts, graces, sizes)
 * before anything starts, with the option's name in the message: `NaN`,
 * a negative time or a fraction of a byte would otherwise start and fail
 * later for a reason that names nothing (`readyTimeoutMs: NaN` timed out
 * at once), and a timer over 2³¹−1 ms fires at once in Node.
 */

/** The longest time Node's timers can wait (about 24.8 days). */
export const MAX_TIMER_MS = 2_147_483_647;

import { InvalidOptionError } from "./errors";

function describe(value: unknown): string {
  if (typeof value === "number") return String(value);
  if (typeof value === "string") return JSON.stringify(value);
  return value === null ? "null" : typeof value;
}

/** A time in milliseconds: absent, or a finite number from 0 to {@link MAX_TIMER_MS}. */
export function checkMilliseconds(option: string, value: unknown): void {
  if (value === undefined) return;
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0 || value > MAX_TIMER_MS) {
    throw new InvalidOptionError(`${option} must be a number of milliseconds from 0 to ${MAX_TIMER_MS}, not ${describe(value)}.`, option);
  }
}

/**
 * A count (of bytes, lines): absent (unless `required`: a setter's value,
 * where "absent" would mean no limit at all), or a whole number of at
 * least `min` (or, with `unbounded`, `Infinity`: no bound).
 */
export function checkCount(
  option: string,
  value: unknown,
  { min = 1, unbounded = false, required = false }: { min?: number; unbounded?: boolean; required?: boolean } = {},
): void {
  if ((value === undefined && !required) || (unbounded && value === Number.POSITIVE_INFINITY)) return;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) {
    throw new InvalidOptionError(`${option} must be a whole number of at least ${min}${unbounded ? " (or Infinity)" : ""}, not ${describe(value)}.`, option);
  }
}

/** Every numeric option `spawnBridgeProcess` takes. */
export function checkProcessOptions(options: { maxLineBytes?: unknown; exitDrainMs?: unknown; termGraceMs?: unknown }, prefix = ""): void {
  checkCount(`${prefix}maxLineBytes`, options.maxLineBytes);
  checkMilliseconds(`${prefix}exitDrainMs`, options.exitDrainMs);
  checkMilliseconds(`${prefix}termGraceMs`, options.termGraceMs);
}
