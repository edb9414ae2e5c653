/**
 * The JavaScript side of the stream batch contract (`bridge_core::batch`):
 * a batch's parts become events, decode failures and stderr lines again, in
 * stream order.
 *
 * A run of valid events comes as the text of one JSON array, parsed once; a
 * large event may come with large values lifted out (`bridge_core::lift`):
 * its skeleton, an index of the lifted values' paths, then the values
 * (strings ready-made, arrays in chunks parsed one per event-loop turn).
 */
import { withExactEcho } from "../codec";
import { BridgeDecodeError } from "../errors";
import type { BridgeEvent } from "../protocol";
import type { BridgeProcessCallbacks } from "../wiring";
import { LIFT_MARKER, PART } from "./contract";

/** Per value lifted out of a large event: its path, and for an array the number of its chunks. */
interface LiftedEntry {
  path: (string | number)[];
  chunks?: number;
}

/**
 * Puts the values the reader lifted out of a large event back where
 * `JSON.parse` puts them in the whole line: at each path, in place of the
 * marker the skeleton holds there. A marker that did not survive the parse
 * (a later duplicate key won) leaves its value out, as `JSON.parse` would.
 */
function restoreLifted(root: unknown, entries: LiftedEntry[], values: unknown[]): void {
  for (let k = 0; k < entries.length; k++) {
    const path = entries[k].path;
    let parent = root;
    for (let step = 0; step < path.length - 1 && isContainer(parent); step++) parent = parent[path[step]];
    const last = path[path.length - 1];
    if (isContainer(parent) && parent[last] === `${LIFT_MARKER}${k}`) parent[last] = values[k];
  }
}

function isContainer(value: unknown): value is Record<string | number, unknown> {
  return typeof value === "object" && value !== null;
}

/**
 * Restores a large event whose lifted values include arrays: their chunks
 * are parsed one per turn of the event loop, so that the loop never stalls
 * for more than one chunk, then joined. `done` gets what went wrong, if
 * anything; nothing is done once `disposed()`.
 */
function restoreInTurns(
  root: unknown,
  entries: LiftedEntry[],
  parts: string[],
  first: number,
  disposed: () => boolean,
  done: (error?: unknown) => void,
): void {
  const values: unknown[] = [];
  let part = first;
  // The array being joined, and how many of its chunks it holds.
  let array: unknown[] = [];
  let joined = 0;
  const step = () => {
    if (disposed()) return done();
    try {
      while (values.length < entries.length) {
        const chunks = entries[values.length].chunks;
        if (chunks === undefined) {
          values.push(parts[part++]);
          continue;
        }
        // Appending chunk by chunk keeps any one turn's work to one chunk.
        for (const element of JSON.parse(parts[part++]) as unknown[]) array.push(element);
        if (++joined === chunks) {
          values.push(array);
          array = [];
          joined = 0;
        }
        setImmediate(step);
        return;
      }
      restoreLifted(root, entries, values);
    } catch (error) {
      return done(error);
    }
    done();
  };
  setImmediate(step);
}

/**
 * Delivers a batch of stdout parts: events to `onEvent`, failures to
 * `onDecodeError` then `onInvalidLine`, in stream order. Calls `finish`
 * once every part is delivered: at once, or, when a large event has lifted
 * arrays, after their chunks were parsed over several turns (the parts
 * after it wait). Stops early, still calling `finish`, once `disposed()`. A
 * callback that throws does not cost the rest of the batch: the first
 * exception is rethrown after `finish`.
 */
export function deliverEventBatch(
  callbacks: BridgeProcessCallbacks,
  kinds: string,
  parts: string[],
  errors: (Error | null)[] | null,
  disposed: () => boolean,
  finish: () => void,
): void {
  let thrown: { error: unknown } | undefined;
  const emit = (event: BridgeEvent) => {
    try {
      callbacks.onEvent(event);
    } catch (error) {
      thrown ??= { error };
    }
  };
  let i = 0;
  const deliverFrom = (): void => {
    for (; i < parts.length && !disposed(); i++) {
      const kind = kinds.charCodeAt(i);
      try {
        if (kind === PART.invalid) {
          reportInvalid(callbacks, withExactEcho(errors![i], parts[i]) as BridgeDecodeError, parts[i]);
          continue;
        }
        let parsed: unknown;
        try {
          parsed = JSON.parse(parts[i]);
        } catch (cause) {
          reportInvalid(callbacks, unexpected(cause), parts[i]);
          continue;
        }
        if (kind === PART.events) {
          for (const event of parsed as BridgeEvent[]) emit(event);
        } else if (kind === PART.event) {
          emit(parsed as BridgeEvent);
        } else if (kind === PART.lifted) {
          const skeleton = parts[i];
          const entries = JSON.parse(parts[i + 1]) as LiftedEntry[];
          const first = i + 2;
          const next = first + entries.reduce((count, entry) => count + (entry.chunks ?? 1), 0);
          if (entries.some((entry) => entry.chunks !== undefined)) {
            i = next;
            restoreInTurns(parsed, entries, parts, first, disposed, (error) => {
              if (error !== undefined) reportInvalid(callbacks, unexpected(error), skeleton);
              else if (!disposed()) emit(parsed as BridgeEvent);
              deliverFrom();
            });
            return;
          }
          i = next - 1; // the loop steps to the next part
          restoreLifted(parsed, entries, parts.slice(first, next));
          emit(parsed as BridgeEvent);
        }
      } catch (error) {
        thrown ??= { error };
      }
    }
    finish();
    if (thrown) throw thrown.error;
  };
  deliverFrom();
}

function reportInvalid(callbacks: BridgeProcessCallbacks, error: BridgeDecodeError, line: string): void {
  callbacks.onDecodeError?.(error, line);
  callbacks.onInvalidLine?.(line);
}

/** §7.4: a non-decode exception while decoding. */
function unexpected(cause: unknown): BridgeDecodeError {
  const text = cause instanceof Error ? cause.message : String(cause);
  return new BridgeDecodeError(`Unexpected bridge decode failure: ${text}`, [], { code: "decode-failed", cause });
}

/** Delivers stderr lines, one part each. */
export function deliverTextBatch(onStderr: ((line: string) => void) | undefined, parts: string[]): void {
  if (!onStderr) return;
  let thrown: { error: unknown } | undefined;
  for (const line of parts) {
    try {
      onStderr(line);
    } catch (error) {
      thrown ??= { error };
    }
  }
  if (thrown) throw thrown.error;
}
