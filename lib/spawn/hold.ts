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

/**
 * The callbacks, with every call held back (in order) until `release()`;
 * after it, straight through.
 */
export function holdUntilStarted(callbacks: BridgeProcessCallbacks): { callbacks: BridgeProcessCallbacks; release: () => void } {
  let held: (() => void)[] | undefined = [];
  const wrap = <K extends keyof BridgeProcessCallbacks>(name: K): BridgeProcessCallbacks[K] => {
    const callback = callbacks[name] as ((...args: unknown[]) => void) | undefined;
    if (callback === undefined) return undefined as BridgeProcessCallbacks[K];
    return ((...args: unknown[]) => {
      if (held) held.push(() => callback(...args));
      else callback(...args);
    }) as BridgeProcessCallbacks[K];
  };
  return {
    callbacks: {
      onEvent: wrap("onEvent")!,
      onDecodeError: wrap("onDecodeError"),
      onInvalidLine: wrap("onInvalidLine"),
      onStderr: wrap("onStderr"),
      onReadError: wrap("onReadError"),
      onStdoutClosed: wrap("onStdoutClosed"),
      onExit: wrap("onExit"),
      onStarted: callbacks.onStarted,
      onSpawnError: callbacks.onSpawnError,
    },
    release: () => {
      const waiting = held;
      held = undefined;
      for (const call of waiting ?? []) call();
    },
  };
}
