/**
 * The flight recorder (opt-in): the last protocol lines, commands and
 * stderr lines of a session, bounded in count and bytes, attached to the
 * errors and diagnostics that end or break it, so that a stall or a stray
 * line can be diagnosed after the fact. Off by default: records can hold
 * secrets (prompts, tool results), and storing them is the host's decision
 * (docs/protocol.md §8).
 */

/** One recorded line, oldest first. */
export interface FlightRecord {
  /** Milliseconds since the session started. */
  atMs: number;
  /** `stdout` a line from the backend, `stdin` a command to it, `stderr` a diagnostic line. */
  stream: "stdout" | "stdin" | "stderr";
  /** The line (cut to `maxLineBytes` UTF-16 units, with `…`). */
  line: string;
  /** Present when the line was cut. */
  cut?: true;
}

export interface FlightRecorderOptions {
  /** How many lines are kept at most (default 200). */
  lines?: number;
  /** How many UTF-16 units of lines are kept at most (default 256 Ki). */
  bytes?: number;
  /** Each line is cut to this many UTF-16 units (default 4 Ki). */
  maxLineBytes?: number;
}

export class FlightRecorder {
  private readonly records: FlightRecord[] = [];
  private size = 0;
  private readonly started = Date.now();
  private readonly maxLines: number;
  private readonly maxBytes: number;
  private readonly maxLine: number;

  constructor(options: FlightRecorderOptions) {
    this.maxLines = options.lines ?? 200;
    this.maxBytes = options.bytes ?? 256 * 1024;
    this.maxLine = options.maxLineBytes ?? 4 * 1024;
  }

  record(stream: FlightRecord["stream"], line: string): void {
    const atMs = Date.now() - this.started;
    const cut = line.length > this.maxLine;
    const kept = cut ? `${line.slice(0, this.maxLine)}…` : line;
    this.records.push(cut ? { atMs, stream, line: kept, cut } : { atMs, stream, line: kept });
    this.size += kept.length;
    while (this.records.length > this.maxLines || (this.size > this.maxBytes && this.records.length > 1)) {
      this.size -= this.records.shift()!.line.length;
    }
  }

  /** A copy of what is kept, oldest first. */
  snapshot(): readonly FlightRecord[] {
    return Object.freeze(this.records.map((record) => Object.freeze({ ...record })));
  }
}
