/**
 * Process wiring (docs/protocol.md §9.2): stdout and stderr of a backend,
 * framed and (for stdout) validated natively, delivered to callbacks in
 * stream order.
 *
 * `wireBridgeProcess` works inside each chunk's `data` handling, as the
 * reference does: one native call frames and judges the chunk, and its
 * lines' callbacks have run when the stream's `write` returns (an exception
 * thrown by `onEvent` propagates out of it, after the chunk's other lines
 * were delivered). `spawnBridgeProcess` reads OS pipes off the JavaScript
 * thread instead (`stream/line-reader.ts`); where it cannot (Windows), it
 * pushes Node's chunks to a native reader thread (`wirePushed`).
 */
import type { Socket } from "node:net";
import type { Readable } from "node:stream";
import { BridgeReadError, type BridgeDecodeError } from "./errors";
import type { BridgeEvent } from "./protocol";
import type { BackendProcess } from "./spawn/containment";
import { native } from "./native";
import { deliverEventBatch, deliverTextBatch } from "./stream/batch";
import { DEFAULT_MAX_LINE_BYTES } from "./stream/contract";
import type { FlowGate } from "./stream/flow";
import { createLineReader, type StreamFailure } from "./stream/line-reader";

export interface BridgeProcessCallbacks {
  /** Each valid stdout line, in order. */
  onEvent: (event: BridgeEvent) => void;
  /** Each invalid stdout line, with its error. */
  onDecodeError?: (error: BridgeDecodeError, line: string) => void;
  /** Each invalid stdout line, right after `onDecodeError`. */
  onInvalidLine?: (line: string) => void;
  /** Each stderr line. */
  onStderr?: (line: string) => void;
  /**
   * Reading stdout or stderr failed (an I/O error of a spawned backend's
   * pipe, or a chunk of a wired stream that is not bytes or a string):
   * nothing more comes from that stream.
   */
  onReadError?: (error: BridgeReadError) => void;
  /** Once, after the child closed and the line readers were disposed (spawn only). */
  onExit?: (code: number | null, signal: string | null) => void;
  /** The backend runs: its pid and process group (spawn only; supervised, once the supervisor reports it). */
  onStarted?: (process: BackendProcess) => void;
  /** Stdout ended while the backend kept running: no event can come any more (spawn only). */
  onStdoutClosed?: () => void;
  /** The OS could not spawn or manage the child (spawn only). */
  onSpawnError?: (error: Error) => void;
  /**
   * The host's end of the host channel (docs/host-channel.md), when the
   * start declared one (`BridgeProcessOptions.hostChannel`): a Unix stream
   * socket whose other end the backend has at fd 4, named in
   * `AGENTLANE_HOST_CHANNEL_FD`. Once per backend that runs, before
   * `onStarted` (a warm start that falls back cold gives the cold
   * backend's). The caller reads and writes it; it is destroyed when the
   * child closes, at the latest (spawn only, Unix).
   */
  onHostChannel?: (socket: Socket) => void;
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

/**
 * A chunk of a stream as bytes: a `Buffer`, any other byte view (a
 * `Uint8Array`, from this realm or another), or a string (a stream with an
 * encoding set) as UTF-8. `undefined` for anything else (an object-mode
 * stream's objects): the native framer takes bytes only, and throwing
 * from a `data` handler would end a host that has no handler for it.
 */
function chunkBytes(chunk: unknown): Buffer | undefined {
  if (typeof chunk === "string") return Buffer.from(chunk);
  if (!ArrayBuffer.isView(chunk)) return undefined;
  return Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
}

/** Why a chunk cannot be read. */
function notBytes(chunk: unknown): string {
  const what = chunk === null ? "null" : typeof chunk === "object" ? "an object" : `a ${typeof chunk}`;
  return `a chunk was ${what}, not bytes or a string (an object-mode stream?)`;
}

export interface BridgeWiring {
  /** Stops both line readers; idempotent. */
  dispose(): void;
}

/** What a wiring of Node streams reports and obeys besides the callbacks (`attachAgentSession`). */
export interface InlineHooks {
  /**
   * The stream has ended (or failed, or closed): its last lines were
   * delivered. `failure`: why it cannot be read (then it is reported
   * here instead of `onReadError`), `null` at its end.
   */
  ended?: (kind: "events" | "text", failure: StreamFailure) => void;
  /** While closed, stdout is paused (the consumer of `session.stream()` falls behind). */
  flow?: FlowGate;
}

/**
 * Frames and judges each chunk of `stream` in its `data` handling and
 * delivers the lines it completed before returning (see the module's notes);
 * the end of the stream delivers its unterminated fragment.
 */
function wireInline(
  stream: Readable,
  kind: "events" | "text",
  callbacks: BridgeProcessCallbacks,
  options: LineReaderOptions,
  hooks: InlineHooks = {},
): () => void {
  const decoder = new native.LineDecoder(kind, options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES);
  let ended = false;
  const deliver = (decoded: { kinds: string; parts: string[]; errors: (Error | null)[] | null } | null) => {
    if (decoded === null) return;
    if (kind === "events") deliverEventBatch(callbacks, decoded.kinds, decoded.parts, decoded.errors, () => ended, () => {});
    else deliverTextBatch(callbacks.onStderr, decoded.parts);
  };
  const flow = kind === "events" ? hooks.flow : undefined;
  let paused = false;
  const resume = () => {
    paused = false;
    if (!ended) stream.resume();
  };
  const onData = (chunk: unknown) => {
    if (ended) return;
    const bytes = chunkBytes(chunk);
    if (bytes === undefined) {
      // Never thrown out of the stream's `data` handling: the stream is unreadable.
      ended = true;
      const failure = notBytes(chunk);
      if (hooks.ended) hooks.ended(kind, failure);
      else callbacks.onReadError?.(new BridgeReadError(kind === "events" ? "stdout" : "stderr", failure));
      return;
    }
    try {
      deliver(decoder.push(bytes));
    } finally {
      if (flow?.isClosed && !paused) {
        // Held back until the consumer catches up (the gate opens).
        paused = true;
        stream.pause();
        flow.pass(resume);
      }
    }
  };
  const onEnd = () => {
    if (ended) return;
    try {
      deliver(decoder.end());
    } finally {
      ended = true;
      hooks.ended?.(kind, null);
    }
  };
  stream.on("data", onData);
  stream.once("end", onEnd);
  stream.once("error", onEnd);
  stream.once("close", onEnd);
  return () => {
    ended = true;
    stream.off("data", onData);
    stream.off("end", onEnd);
    stream.off("error", onEnd);
    stream.off("close", onEnd);
  };
}

/** Wires both streams of `readable` with `wire`; the result disposes both once. */
function wireBoth(
  readable: { stdout: Readable | null; stderr: Readable | null },
  wire: (stream: Readable, kind: "events" | "text") => () => void,
): BridgeWiring {
  const detach: (() => void)[] = [];
  if (readable.stdout) detach.push(wire(readable.stdout, "events"));
  if (readable.stderr) detach.push(wire(readable.stderr, "text"));
  let disposed = false;
  return {
    dispose() {
      if (disposed) return;
      disposed = true;
      for (const off of detach) off();
    },
  };
}

/**
 * Wires the stdout and stderr of anything stream-like (a child process, or
 * in-memory streams in tests) to the callbacks, inside each chunk's `data`
 * handling. `onExit` and `onSpawnError` are not used here (see
 * `spawnBridgeProcess`).
 */
export function wireBridgeProcess(
  readable: { stdout: Readable | null; stderr: Readable | null },
  callbacks: BridgeProcessCallbacks,
  options: LineReaderOptions = {},
): BridgeWiring {
  return wireBoth(readable, (stream, kind) => wireInline(stream, kind, callbacks, options));
}

/** `wireBridgeProcess` that also reports each stream's end and obeys a flow gate (`attachAgentSession`). */
export function wireAttached(
  readable: { stdout: Readable | null; stderr: Readable | null },
  callbacks: BridgeProcessCallbacks,
  options: LineReaderOptions,
  hooks: InlineHooks,
): BridgeWiring {
  return wireBoth(readable, (stream, kind) => wireInline(stream, kind, callbacks, options, hooks));
}

/** Like `wireBridgeProcess`, with the chunks judged on a native reader thread (spawnBridgeProcess on Windows). */
export function wirePushed(
  readable: { stdout: Readable | null; stderr: Readable | null },
  callbacks: BridgeProcessCallbacks,
  options: LineReaderOptions = {},
): BridgeWiring {
  return wireBoth(readable, (stream, kind) => wireStream(stream, kind, callbacks, options));
}
