/**
 * The session's one run at a time (docs/protocol.md §8.2, §9.5.4), the callers
 * waiting for it to end (`cancel()`), and the §12 prompt race: the backend
 * frees its run slot only after writing the terminal event, so a prompt
 * sent at that instant can be refused with `A run is already active.`.
 * This session never has two runs, so it resends such a prompt a few times,
 * briefly, instead of failing.
 */
import { RunError } from "../errors";
import { deferred, type Deferred } from "./deferred";
import type { RunResult } from "./types";

/** How often, and how patiently, a prompt refused by the §12 race is resent. */
export const RACE_RETRIES = 5;
export const RACE_RETRY_MS = 15;
/** The backend's refusal of a prompt while its run slot is taken. */
export const RUN_ALREADY_ACTIVE = "A run is already active.";
/**
 * A prompt sent within this long of the previous run's terminal event can
 * meet the §12 race; a refusal of any other prompt is a refusal, as in the
 * reference.
 */
export const RACE_WINDOW_MS = 500;
/**
 * The backend's refusal of a reset whose own cancel has just ended the run
 * (the agent frees its run lock a moment after the run's terminal event).
 */
export const RESET_WHILE_ACTIVE = "Command failed: Cannot reset while a primary run is active.";

export interface ActiveRun {
  text: string;
  result: Deferred<RunResult>;
  retries: number;
  /** Its prompt was sent just after the previous run's terminal event: a refusal can be the §12 race. */
  raceable: boolean;
  /** Refused by the §12 race and waiting to be resent (nothing in flight). */
  retryTimer: ReturnType<typeof setTimeout> | undefined;
}

export class Runs {
  /** The run in progress, if any. */
  active: ActiveRun | undefined;
  /** When the last terminal event was processed (`performance.now()`). */
  lastTerminalAt: number | undefined;
  private cancelWaiters: Deferred<void>[] = [];

  begin(text: string): ActiveRun {
    const raceable = this.lastTerminalAt !== undefined && performance.now() - this.lastTerminalAt <= RACE_WINDOW_MS;
    const run: ActiveRun = { text, result: deferred<RunResult>(), retries: 0, raceable, retryTimer: undefined };
    this.active = run;
    return run;
  }

  /** Ends the active run (a terminal event), then every `cancel()` waiting. */
  finish(outcome: RunResult | RunError): void {
    this.lastTerminalAt = performance.now();
    const run = this.active;
    this.active = undefined;
    if (run) {
      if (outcome instanceof RunError) run.result.reject(outcome);
      else run.result.resolve(outcome);
    }
    this.resolveCancelWaiters();
  }

  /** Drops `run` if it is the active one (its prompt was never sent). */
  drop(run: ActiveRun): void {
    if (this.active === run) this.active = undefined;
  }

  /**
   * The backend refused the active run's prompt with `message`. Returns
   * `true` when that can be the §12 race and `resend` was scheduled;
   * otherwise the run is rejected with the refusal.
   */
  refused(message: string, resend: (run: ActiveRun) => void): boolean {
    const run = this.active;
    if (!run) return false;
    if (message === RUN_ALREADY_ACTIVE && run.raceable && run.retries < RACE_RETRIES) {
      run.retries += 1;
      run.retryTimer = setTimeout(() => {
        run.retryTimer = undefined;
        if (this.active === run) resend(run);
      }, RACE_RETRY_MS * run.retries);
      return true;
    }
    this.active = undefined;
    run.result.reject(new RunError(message, "command-refused"));
    return true;
  }

  /** Ends the active run, never started, as cancelled (a cancel or reset came after its prompt). */
  cancelUnstarted(): void {
    const run = this.active;
    if (!run) return;
    this.active = undefined;
    run.result.resolve({ status: "cancelled" });
  }

  /**
   * A run refused by the §12 race and not yet resent has not started:
   * `cancel()` or `reset()` now ends it as cancelled instead of resending.
   */
  abandonRetry(): boolean {
    const run = this.active;
    if (!run || run.retryTimer === undefined) return false;
    clearTimeout(run.retryTimer);
    run.retryTimer = undefined;
    this.active = undefined;
    run.result.resolve({ status: "cancelled" });
    return true;
  }

  /** A `cancel()` that waits for the active run to end. */
  waitForEnd(op: Deferred<void>): void {
    this.cancelWaiters.push(op);
  }

  /** Takes back a waiting `cancel()` (the backend refused the cancel command). */
  stopWaiting(op: Deferred<void>): void {
    const index = this.cancelWaiters.indexOf(op);
    if (index >= 0) this.cancelWaiters.splice(index, 1);
  }

  resolveCancelWaiters(): void {
    const waiters = this.cancelWaiters;
    this.cancelWaiters = [];
    for (const waiter of waiters) waiter.resolve();
  }

  /** Teardown: the active run rejects with `error`. */
  rejectRun(error: unknown): void {
    const run = this.active;
    this.active = undefined;
    if (run?.retryTimer !== undefined) clearTimeout(run.retryTimer);
    run?.result.reject(error);
  }

  /** Teardown: every waiting `cancel()` rejects with `error`. */
  rejectCancelWaiters(error: unknown): void {
    for (const waiter of this.cancelWaiters.splice(0)) waiter.reject(error);
  }
}

/**
 * The timers and the abort signal watching one run: the run timeout, and
 * the idle watchdog (no event for `idleMs` while the run lasts, reported
 * once per silence). `stop()` when the run has ended.
 */
export class RunWatch {
  private readonly timeout: ReturnType<typeof setTimeout> | undefined;
  private idle: ReturnType<typeof setTimeout> | undefined;
  private stopped = false;

  constructor(
    private readonly watch: {
      signal: AbortSignal | undefined;
      timeoutMs: number | undefined;
      idleMs: number | undefined;
      onAbort: () => void;
      onTimeout: () => void;
      onIdle: () => void;
    },
  ) {
    watch.signal?.addEventListener("abort", watch.onAbort, { once: true });
    if (watch.timeoutMs !== undefined) this.timeout = setTimeout(watch.onTimeout, watch.timeoutMs);
    this.sawEvent();
  }

  /** An event came: the silence starts again. */
  sawEvent(): void {
    if (this.stopped || this.watch.idleMs === undefined) return;
    clearTimeout(this.idle);
    this.idle = setTimeout(this.watch.onIdle, this.watch.idleMs);
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timeout);
    clearTimeout(this.idle);
    this.watch.signal?.removeEventListener("abort", this.watch.onAbort);
  }
}

/**
 * The promise of an operation that an abort signal can give up on: the
 * caller stops waiting (it rejects with the signal's reason) while the
 * command, already sent, is still matched with its answer.
 */
export function abortable<T>(op: Deferred<T>, signal: AbortSignal | undefined, forget: () => void): Promise<T> {
  if (!signal) return op.promise;
  const onAbort = () => {
    forget();
    op.reject(signal.reason);
  };
  signal.addEventListener("abort", onAbort, { once: true });
  const done = () => signal.removeEventListener("abort", onAbort);
  op.promise.then(done, done);
  return op.promise;
}
