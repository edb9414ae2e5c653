/**
 * How many spawned backends start at once. A cold backend spends its start
 * importing Python, agentlane and the app: about 1–2 s of one core. Started
 * all together, N backends share the cores and each one's start takes
 * about N ÷ cores times as long: 32 on 2 cores took 41 s until the last was
 * ready, and with the default ready timeout of 30 s all 32 failed. So
 * starts wait for a slot: at most `maxConcurrentStarts` (default: the
 * number of cores, at least 2) spawned backends are between their spawn and
 * their `ready` at any time, and each one's `readyTimeoutMs` counts from
 * its own spawn (a session's `signal` bounds the wait for a slot). The
 * host's cores go to finishing starts, and every start takes about as
 * long as one alone.
 *
 * Process-wide (per JavaScript thread): it shares the machine. Attached
 * sessions take no slot (the application started the process).
 */
import { availableParallelism } from "node:os";
import { checkCount } from "../options";

let limit = Math.max(2, availableParallelism());
let starting = 0;
const waiting: (() => void)[] = [];

/** Hands free slots to the starts waiting for one, in order. */
function pump(): void {
  while (starting < limit && waiting.length > 0) {
    starting += 1;
    waiting.shift()!();
  }
}

/**
 * Sets how many spawned backends may start at once (`Infinity`: no
 * limit). Returns the previous value.
 */
export function setMaxConcurrentStarts(value: number): number {
  // No argument is refused too: it would make every later start wait for ever.
  checkCount("maxConcurrentStarts", value, { unbounded: true, required: true });
  const previous = limit;
  limit = value;
  pump();
  return previous;
}

/** The current limit, and how many starts run and wait now. */
export function startSlots(): { max: number; starting: number; waiting: number } {
  return { max: limit, starting, waiting: waiting.length };
}

function releaser(): () => void {
  let released = false;
  return () => {
    if (released) return;
    released = true;
    starting -= 1;
    pump();
  };
}

/**
 * Runs `start` with a slot: at once (synchronously) when one is free, else
 * once one is. `start` gets the function that gives the slot back. A start
 * that waits can be called off: when `abort.signal` aborts, it leaves the
 * queue and rejects with `abort.error()`, and `start` never runs.
 */
export function withStartSlot<T>(start: (release: () => void) => Promise<T>, abort?: { signal: AbortSignal; error: () => unknown }): Promise<T> {
  if (starting < limit && waiting.length === 0) {
    starting += 1;
    return start(releaser());
  }
  return new Promise<T>((resolve, reject) => {
    const take = () => {
      abort?.signal.removeEventListener("abort", leave);
      start(releaser()).then(resolve, reject);
    };
    const leave = () => {
      const index = waiting.indexOf(take);
      if (index >= 0) waiting.splice(index, 1);
      reject(abort!.error());
    };
    waiting.push(take);
    abort?.signal.addEventListener("abort", leave, { once: true });
  });
}

/**
 * A slot for a start that turns cold only later (a warm start's fallback,
 * `spawn/warm/child.ts`): `take(start)` waits for a slot and runs `start`
 * with it; `release()` gives it back (when the start has settled), or
 * stops the wait. `take` returns `release`.
 */
export function laterStartSlot(): { take(start: () => void): () => void; release(): void } {
  let queued: (() => void) | undefined;
  let giveBack: (() => void) | undefined;
  let released = false;
  const release = () => {
    released = true;
    if (queued !== undefined) waiting.splice(waiting.indexOf(queued), 1);
    queued = undefined;
    giveBack?.();
    giveBack = undefined;
  };
  const take = (start: () => void) => {
    if (released || queued !== undefined || giveBack !== undefined) return release;
    const run = () => {
      queued = undefined;
      giveBack = releaser();
      start();
    };
    if (starting < limit && waiting.length === 0) {
      starting += 1;
      run();
    } else {
      queued = run;
      waiting.push(run);
    }
    return release;
  };
  return { take, release };
}
