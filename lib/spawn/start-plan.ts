/**
 * A start resolved once (issue 32): the options of a backend's start
 * checked and defaulted in one place, into the one plan every layer of
 * the process layer takes (cold `spawnBridgeProcess`, warm `warm/`), so
 * that no default is written twice and the `warm` option is parsed once.
 */
import { checkProcessOptions } from "../options";
import type { BridgeProcessOptions } from "../process";
import { warmOptions, type WarmOptions } from "./warm/options";

/** After SIGTERM, how long a backend's processes get before SIGKILL, by default. */
export const DEFAULT_TERM_GRACE_MS = 500;
/** After a backend's exit, how long its output streams may stay open, by default. */
export const DEFAULT_EXIT_DRAIN_MS = 1000;

/** One start of a backend, every option checked and defaulted. */
export interface StartPlan {
  /** What the caller gave (the command, its environment, the readers' settings). */
  readonly options: BridgeProcessOptions;
  readonly termGraceMs: number;
  /** `termGraceMs` as the supervisor and the prefork server take it: whole, non-negative. */
  readonly termGraceWholeMs: number;
  readonly exitDrainMs: number;
  readonly killOnHostExit: boolean;
  /** The warm option with its defaults, or `undefined` for a cold start. */
  readonly warm: Required<WarmOptions> | undefined;
  /** The start declares a host channel (docs/host-channel.md). */
  readonly hostChannel: boolean;
}

/**
 * Checks the options (throws `InvalidOptionError` naming the option, as
 * the caller knows it: `optionPrefix` `"backend."` for a session's backend
 * spec) and applies every default, once.
 */
export function resolveStart(options: BridgeProcessOptions, optionPrefix = ""): StartPlan {
  checkProcessOptions(options, optionPrefix);
  const termGraceMs = options.termGraceMs ?? DEFAULT_TERM_GRACE_MS;
  return {
    options,
    termGraceMs,
    termGraceWholeMs: Math.max(0, Math.round(termGraceMs)),
    exitDrainMs: options.exitDrainMs ?? DEFAULT_EXIT_DRAIN_MS,
    killOnHostExit: options.killOnHostExit ?? true,
    warm: warmOptions(options.warm),
    hostChannel: options.hostChannel === true,
  };
}

/** The same start, cold (a warm start's fallback). */
export function coldPlan(plan: StartPlan): StartPlan {
  return { ...plan, options: { ...plan.options, warm: false }, warm: undefined };
}
