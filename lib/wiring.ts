/**
 * Process wiring (docs/protocol.md §9.2): stdout and stderr of a backend, framed
 * and (for stdout) validated off the JavaScript thread by the native
 * reader, delivered to callbacks in stream order.
 */
import type { Readable } from "node:stream";
import type { BridgeDecodeError, BridgeReadError } from "./errors";
import type { BridgeEvent } from "./protocol";
import { DEFAULT_MAX_LINE_BYTES } from "./stream/contract";
import { createLineReader } from "./stream/line-reader";

export interface BridgeProcessCallbacks {
  /** Each valid stdout line, in order. */
  onEvent: (event: BridgeEvent) => void;
  /** Each invalid stdout line, with its error. */
  onDecodeError?: (error: BridgeDecodeError, line: string) => void;
  /** Each invalid stdout line, right after `onDecodeError`. */
  onInvalidLine?: (line: string) => void;
  /** Each stderr line. */
  onStderr?: (line: string) => void;
  /** Reading stdout or stderr failed (spawn only): nothing more comes from that stream. */
  onReadError?: (error: BridgeReadError) => void;
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

export { DEFAULT_MAX_LINE_BYTES };

/** Pushed bytes waiting for the reader above which a source stream is paused. */
const PAUSE_ABOVE_BYTES = 8 * 1024 * 1024;
/** How often a paused source checks whether the reader has caught up. */
const RESUME_CHECK_MS = 2;

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
