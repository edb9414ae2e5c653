/**
 * A native reader for one output stream of a backend, with the pacing of
 * its batches: at most two are handed over before JavaScript acknowledges
 * them from `setImmediate`, so a burst of output never holds up timers and
 * I/O for more than a couple of milliseconds.
 */
import { native, type NativeStreamReader } from "../native";
import type { BridgeProcessCallbacks, LineReaderOptions } from "../wiring";
import { deliverEventBatch, deliverTextBatch } from "./batch";
import { DEFAULT_MAX_LINE_BYTES } from "./contract";
import type { FlowGate } from "./flow";

/** A native reader for one stream, with its end reported once. */
export interface LineReader {
  reader: NativeStreamReader;
  /**
   * Whether output is still on its way: the native reader is reading or
   * judging lines, or a batch is being delivered (a large event can take
   * several turns). Not while the reader waits for input.
   */
  busy(): boolean;
  /**
   * Pipe mode: read what the pipe holds now, then end the stream (without an
   * unterminated fragment). For when the writer has exited and something
   * else still holds the pipe open.
   */
  cutOff(): void;
  dispose(): void;
}

/** Why a stream ended: `null` at end of file, the OS error's text when reading failed. */
export type StreamFailure = string | null;

/**
 * Creates the native reader for stdout (`"events"`) or stderr (`"text"`).
 * `onDone` is called once when the stream has ended and its last lines were
 * delivered (not after `dispose()`).
 */
export function createLineReader(
  kind: "events" | "text",
  callbacks: BridgeProcessCallbacks,
  options: LineReaderOptions,
  onDone: (failure: StreamFailure) => void,
  flow?: FlowGate,
): LineReader {
  let disposed = false;
  // The reader hands over at most two batches before this acknowledgement,
  // sent from setImmediate: a burst never holds up timers and I/O for long.
  // A closed flow gate holds it back (the consumer does not keep up).
  const acknowledge = () => {
    if (!disposed) reader.ack();
  };
  const ack = flow ? () => flow.pass(acknowledge) : acknowledge;
  // A batch whose large event is restored over several turns delays the
  // batches after it, which wait here: stream order is kept.
  let delivering = false;
  const waiting: (() => void)[] = [];
  const onBatch = (
    kinds: string,
    parts: string[],
    errors: (Error | null)[] | null,
    done: boolean,
    failure: StreamFailure,
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
    cutOff: () => reader.cutOff(),
    dispose() {
      if (disposed) return;
      disposed = true;
      reader.dispose();
    },
  };
}
