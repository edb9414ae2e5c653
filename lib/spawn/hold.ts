/**
 * A supervised backend's output held back until its supervisor has said
 * that it runs. The backend's stdout is read on a native thread and the
 * supervisor's `started <pid>` on the event loop, from another socket: a
 * backend that writes `ready` at once could be heard first, and a session
 * resolved before it knew its process (`session.process` undefined, about
 * 1 start in 100 with such a backend). Held, `onStarted` always comes
 * first: one rule for every supervised start, cold or warm.
 */
import type { BridgeProcessCallbacks } from "../wiring";

/** The callbacks that carry the backend's output and end: held until the report. */
const HELD = ["onEvent", "onDecodeError", "onInvalidLine", "onStderr", "onReadError", "onStdoutClosed", "onExit"] as const;

/**
 * The callbacks, with every call of the backend's output and end held back
 * (in order) until `release()`; `onStarted` and `onSpawnError` go straight
 * through. On release the returned object's members become the
 * application's own callbacks again (the readers look them up at each
 * call), so a started backend's output pays nothing for having been held.
 */
export function holdUntilStarted(callbacks: BridgeProcessCallbacks): { callbacks: BridgeProcessCallbacks; release: () => void } {
  let held: (() => void)[] | undefined = [];
  const holding: BridgeProcessCallbacks = { ...callbacks };
  const members = holding as unknown as Record<string, unknown>;
  for (const name of HELD) {
    const callback = callbacks[name] as ((a?: unknown, b?: unknown) => void) | undefined;
    if (callback === undefined) continue;
    members[name] = (a?: unknown, b?: unknown) => {
      if (held) held.push(() => callback(a, b));
      else callback(a, b);
    };
  }
  return {
    callbacks: holding,
    release: () => {
      const waiting = held;
      if (waiting === undefined) return;
      held = undefined;
      for (const name of HELD) members[name] = callbacks[name];
      for (const call of waiting) call();
    },
  };
}
