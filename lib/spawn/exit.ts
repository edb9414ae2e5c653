/**
 * When a backend's `onExit` comes (docs/protocol.md §9.2): once it has exited
 * and both output streams have been read to their end, or, when something
 * else holds the streams open (a tool's background process that inherited
 * them), once `exitDrainMs` after the exit what they held has been
 * delivered. Also notices stdout ending while the backend keeps running.
 *
 * One mechanism for every start mode: a spawned backend's native pipe
 * readers, Node's own streams (Windows), and an attached process-like
 * object's streams.
 */
import { BridgeReadError } from "../errors";
import type { StreamFailure } from "../stream/line-reader";
import type { BridgeProcessCallbacks } from "../wiring";

/** How long after stdout's end the backend has to exit before the end counts as closing it early. */
const STDOUT_END_GRACE_MS = 1000;

/** A reader of one output stream, or a wiring of several: stopped when the exit is reported. */
export interface OutputReader {
  dispose(): void;
  /** Read what is there now, then end (native pipes: see `LineReader.cutOff`). */
  cutOff?(): void;
}

/** The streams an exit waits for. */
export type TrackedStream = "stdout" | "stderr" | "control";

/** What tells whether the backend still runs. */
export interface ExitState {
  exitCode: number | null;
  signalCode: string | null;
}

export class ExitTracker {
  private readonly readers: OutputReader[] = [];
  /** The streams whose end is still awaited. */
  private readonly open = new Set<TrackedStream>(["stdout", "stderr"]);
  private exit: { code: number | null; signal: string | null } | undefined;
  private finished = false;
  private drainTimer: ReturnType<typeof setTimeout> | undefined;
  private stdoutEndTimer: ReturnType<typeof setTimeout> | undefined;
  private process: ExitState | undefined;

  constructor(
    private readonly exitDrainMs: number,
    private readonly callbacks: Pick<BridgeProcessCallbacks, "onReadError" | "onStdoutClosed" | "onExit">,
  ) {}

  /** A reader disposed when the exit is reported (and cut off after the drain time). */
  add(reader: OutputReader): void {
    this.readers.push(reader);
  }

  /** The process whose exit is awaited (for noticing stdout's early end). */
  watch(process: ExitState): void {
    this.process = process;
  }

  /** One more stream whose end the exit waits for (the supervisor's control socket: its last report). */
  await(which: TrackedStream): void {
    this.open.add(which);
  }

  /** The callback for the end of one stream (`failure`: why reading it failed, `null` at end of file). */
  streamEnded(which: TrackedStream): (failure: StreamFailure) => void {
    return (failure) => {
      if (!this.open.delete(which)) return;
      if (failure !== null && which !== "control") this.callbacks.onReadError?.(new BridgeReadError(which, failure));
      if (which === "stdout") this.watchStdoutEnd();
      this.finish();
    };
  }

  /**
   * Stdout ended: if the backend has not exited shortly after, it closed
   * its stdout while running, and no event can come any more.
   */
  private watchStdoutEnd(): void {
    const process = this.process;
    if (!process || this.exit || process.exitCode !== null || process.signalCode !== null) return;
    this.stdoutEndTimer = setTimeout(() => {
      if (!this.exit && process.exitCode === null && process.signalCode === null) this.callbacks.onStdoutClosed?.();
    }, STDOUT_END_GRACE_MS);
    this.stdoutEndTimer.unref();
  }

  /** The backend has exited; what its streams still hold may follow. */
  exited(code: number | null, signal: string | null): void {
    if (this.exit) return;
    this.exit = { code, signal };
    clearTimeout(this.stdoutEndTimer);
    this.finish();
    if (this.finished) return;
    // Something still holds the streams open: after exitDrainMs, take what
    // they hold and let go.
    this.drainTimer = setTimeout(() => {
      this.open.delete("control");
      this.finish();
      for (const reader of this.readers) {
        if (reader.cutOff) reader.cutOff();
        else this.endAll();
      }
    }, this.exitDrainMs);
  }

  /** The backend and its streams are done (a `close` that follows its streams' ends). */
  closed(code: number | null, signal: string | null): void {
    this.endAll();
    this.exited(code, signal);
  }

  private endAll(): void {
    this.open.clear();
    this.finish();
  }

  private finish(): void {
    if (this.finished || !this.exit || this.open.size > 0) return;
    this.finished = true;
    clearTimeout(this.drainTimer);
    for (const reader of this.readers) reader.dispose();
    this.callbacks.onExit?.(this.exit.code, this.exit.signal);
  }

  /** Starting failed: nothing is left behind, and no exit is reported. */
  dispose(): void {
    this.finished = true;
    clearTimeout(this.drainTimer);
    clearTimeout(this.stdoutEndTimer);
    for (const reader of this.readers) reader.dispose();
  }
}
