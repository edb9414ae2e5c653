/**
 * Process wiring (PROTOCOL.md §9.2): stdout and stderr of a backend, framed
 * and (for stdout) validated off the JavaScript thread by the native
 * reader, delivered to callbacks in stream order.
 */
import type { Readable } from "node:stream";
import { BridgeDecodeError } from "./errors";
import { native, type NativeStreamReader } from "./native";
import type { BridgeEvent } from "./protocol";

export interface BridgeProcessCallbacks {
  /** Each valid stdout line, in order. */
  onEvent: (event: BridgeEvent) => void;
  /** Each invalid stdout line, with its error. */
  onDecodeError?: (error: BridgeDecodeError, line: string) => void;
  /** Each invalid stdout line, right after `onDecodeError`. */
  onInvalidLine?: (line: string) => void;
  /** Each stderr line. */
  onStderr?: (line: string) => void;
  /** Once, after the child closed and the line readers were disposed (spawn only). */
  onExit?: (code: number | null, signal: string | null) => void;
  /** The OS could not spawn or manage the child (spawn only). */
  onSpawnError?: (error: Error) => void;
}

/** Settings of the native line readers. */
export interface LineReaderOptions {
  /**
   * A stdout line longer than this many bytes becomes one decode error and
   * reading resumes at the next line; a longer stderr line is cut to its
   * first kilobyte. Default 256 MiB.
   */
  maxLineBytes?: number;
}

export const DEFAULT_MAX_LINE_BYTES = 256 * 1024 * 1024;

/** Pushed bytes waiting for the reader above which a source stream is paused. */
const PAUSE_ABOVE_BYTES = 8 * 1024 * 1024;
/** How often a paused source checks whether the reader has caught up. */
const RESUME_CHECK_MS = 2;

const EVENTS = 0x45; // "E"
const EVENT = 0x42; // "B"
const INVALID = 0x49; // "I"
const LIFTED = 0x4c; // "L": a large event's skeleton; then "X" its index, "S" per lifted string, "C" per array chunk

/** Per value lifted out of a large event: its path, and for an array the number of its chunks. */
interface LiftedEntry {
  path: (string | number)[];
  chunks?: number;
}

/**
 * Puts the values the reader lifted out of a large event (see
 * `bridge_core::lift`) back where `JSON.parse` puts them in the whole line:
 * at each path, in place of the marker the skeleton holds there. A marker
 * that did not survive the parse (a later duplicate key won) leaves its
 * value out, as `JSON.parse` would.
 */
function restoreLifted(root: unknown, entries: LiftedEntry[], values: unknown[]): void {
  for (let k = 0; k < entries.length; k++) {
    const path = entries[k].path;
    let parent = root;
    for (let step = 0; step < path.length - 1 && isContainer(parent); step++) parent = parent[path[step]];
    const last = path[path.length - 1];
    if (isContainer(parent) && parent[last] === `\u0000lifted:${k}`) parent[last] = values[k];
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
 * `onDecodeError` then `onInvalidLine`, in stream order. A run of valid
 * events comes as the text of one JSON array, parsed once; a large event
 * may come with large values lifted out. Calls `finish` once every part is
 * delivered: at once, or, when a large event has lifted arrays, after their
 * chunks were parsed over several turns (the parts after it wait). Stops
 * early, still calling `finish`, once `disposed()`. A callback that throws
 * does not cost the rest of the batch: the first exception is rethrown
 * after `finish`.
 */
function deliverEventBatch(
  callbacks: BridgeProcessCallbacks,
  kinds: string,
  parts: string[],
  errors: (BridgeDecodeError | null)[] | null,
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
        if (kind === INVALID) {
          reportInvalid(callbacks, errors![i]!, parts[i]);
          continue;
        }
        let parsed: unknown;
        try {
          parsed = JSON.parse(parts[i]);
        } catch (cause) {
          reportInvalid(callbacks, unexpected(cause), parts[i]);
          continue;
        }
        if (kind === EVENTS) {
          for (const event of parsed as BridgeEvent[]) emit(event);
        } else if (kind === EVENT) {
          emit(parsed as BridgeEvent);
        } else if (kind === LIFTED) {
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
  return new BridgeDecodeError(`Unexpected bridge decode failure: ${text}`);
}

/** Delivers stderr lines, one part each. */
function deliverTextBatch(onStderr: ((line: string) => void) | undefined, parts: string[]): void {
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

/** A native reader for one stream, with its end reported once. */
export interface LineReader {
  reader: NativeStreamReader;
  /**
   * Whether output is still on its way: the native reader is reading or
   * judging lines, or a batch is being delivered (a large event can take
   * several turns). Not while the reader waits for input.
   */
  busy(): boolean;
  dispose(): void;
}

/**
 * Creates the native reader for stdout (`"events"`) or stderr (`"text"`).
 * `onDone` is called once when the stream has ended and its last lines were
 * delivered (not after `dispose()`).
 */
export function createLineReader(
  kind: "events" | "text",
  callbacks: BridgeProcessCallbacks,
  options: LineReaderOptions,
  onDone: (failure: string | null) => void,
  afterBatch?: () => void,
): LineReader {
  let disposed = false;
  // The reader hands over at most two batches before this acknowledgement,
  // sent from setImmediate: a burst never holds up timers and I/O for long.
  const ack = () => {
    if (!disposed) reader.ack();
  };
  // A batch whose large event is restored over several turns delays the
  // batches after it, which wait here: stream order is kept.
  let delivering = false;
  const waiting: (() => void)[] = [];
  const onBatch = (
    kinds: string,
    parts: string[],
    errors: (BridgeDecodeError | null)[] | null,
    done: boolean,
    failure: string | null,
  ): void => {
    if (disposed) return;
    if (delivering) {
      waiting.push(() => onBatch(kinds, parts, errors, done, failure));
      return;
    }
    delivering = true;
    const finish = () => {
      delivering = false;
      if (!done) setImmediate(ack);
      afterBatch?.();
      if (done && !disposed) onDone(failure);
      waiting.shift()?.();
    };
    if (kind === "events") {
      deliverEventBatch(callbacks, kinds, parts, errors, () => disposed, finish);
      return;
    }
    try {
      deliverTextBatch(callbacks.onStderr, parts);
    } finally {
      finish();
    }
  };
  const reader = new native.StreamReader(kind, options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES, onBatch);
  return {
    reader,
    busy: () => delivering || reader.isWorking(),
    dispose() {
      if (disposed) return;
      disposed = true;
      reader.dispose();
    },
  };
}

/**
 * Feeds a Node stream into a native reader (push mode), pausing the stream
 * while the reader is more than a few megabytes behind. The pause ends when
 * the reader has taken the bytes, checked on a short timer: not when a batch
 * arrives, because a long line gives no batch until its end, which may be in
 * the paused stream.
 */
function wireStream(
  stream: Readable,
  kind: "events" | "text",
  callbacks: BridgeProcessCallbacks,
  options: LineReaderOptions,
): () => void {
  let resumeTimer: ReturnType<typeof setTimeout> | undefined;
  const lineReader = createLineReader(kind, callbacks, options, () => {});
  const resumeWhenCaughtUp = () => {
    if (lineReader.reader.queuedBytes() < PAUSE_ABOVE_BYTES / 2) {
      resumeTimer = undefined;
      stream.resume();
    } else {
      resumeTimer = setTimeout(resumeWhenCaughtUp, RESUME_CHECK_MS);
    }
  };
  const onData = (chunk: Buffer | string) => {
    const queued = lineReader.reader.push(typeof chunk === "string" ? Buffer.from(chunk) : chunk);
    if (queued > PAUSE_ABOVE_BYTES && resumeTimer === undefined) {
      stream.pause();
      resumeTimer = setTimeout(resumeWhenCaughtUp, RESUME_CHECK_MS);
    }
  };
  const onEnd = () => lineReader.reader.end();
  stream.on("data", onData);
  stream.once("end", onEnd);
  stream.once("error", onEnd);
  stream.once("close", onEnd);
  return () => {
    clearTimeout(resumeTimer);
    stream.off("data", onData);
    stream.off("end", onEnd);
    stream.off("error", onEnd);
    stream.off("close", onEnd);
    lineReader.dispose();
  };
}

export interface BridgeWiring {
  /** Stops both line readers; idempotent. */
  dispose(): void;
}

/**
 * Wires the stdout and stderr of anything stream-like (a child process, or
 * in-memory streams in tests) to the callbacks. `onExit` and `onSpawnError`
 * are not used here (see `spawnBridgeProcess`).
 */
export function wireBridgeProcess(
  readable: { stdout: Readable | null; stderr: Readable | null },
  callbacks: BridgeProcessCallbacks,
  options: LineReaderOptions = {},
): BridgeWiring {
  const detach: (() => void)[] = [];
  if (readable.stdout) detach.push(wireStream(readable.stdout, "events", callbacks, options));
  if (readable.stderr) detach.push(wireStream(readable.stderr, "text", callbacks, options));
  let disposed = false;
  return {
    dispose() {
      if (disposed) return;
      disposed = true;
      for (const off of detach) off();
    },
  };
}
