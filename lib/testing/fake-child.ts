/**
 * An in-memory backend process for an application's own tests, to give to
 * `attachAgentSession`: the test writes the exact bytes the session reads
 * (split wherever it likes), reads what the session wrote, and decides when
 * the process exits, fails or refuses a write. Nothing is spawned.
 *
 * ```ts
 * const child = fakeBackendChild();
 * const starting = attachAgentSession(child, { approvals: () => true });
 * child.emitEvent({ type: "ready", version: "0.22.0", package: "agentlane-process-bridge", metadata: {} });
 * const session = await starting;
 * const run = session.run("hi");
 * await child.nextCommand(); // { type: "prompt", text: "hi", protocol_version: "1.0" }
 * ```
 */
import { EventEmitter } from "node:events";
import { PassThrough, Writable } from "node:stream";
import type { JsonObject } from "../protocol";

/** What the fake does when the session signals it (`kill`). */
export type FakeKillBehaviour = "exit" | "ignore";

export interface FakeBackendChildOptions {
  /** The pid it reports (default: none, as for a process the test never started). */
  pid?: number;
  /** What SIGTERM (and SIGINT, SIGHUP) do: exit with that signal (default) or nothing. SIGKILL always ends it. */
  onTerm?: FakeKillBehaviour;
  /** What the end of its stdin does: `"exit"` with code 0 (as the real backend), or `"stay"` (default). */
  onStdinEnd?: "exit" | "stay";
}

export class FakeBackendChild extends EventEmitter {
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly stdin: Writable;
  readonly pid: number | undefined;
  exitCode: number | null = null;
  signalCode: NodeJS.Signals | null = null;
  /** Every signal the session sent, in order. */
  readonly signals: (NodeJS.Signals | number)[] = [];
  /** Whether the session has ended the stdin. */
  stdinEnded = false;

  private readonly lines: string[] = [];
  private partial = "";
  private readCursor = 0;
  private readonly waiters: ((line: string) => void)[] = [];
  private writeFailure: Error | undefined;
  private readonly options: FakeBackendChildOptions;

  constructor(options: FakeBackendChildOptions = {}) {
    super();
    this.options = options;
    this.pid = options.pid;
    this.stdin = new Writable({
      decodeStrings: false,
      write: (chunk: Buffer | string, _encoding, done) => {
        const failure = this.writeFailure;
        if (failure !== undefined) {
          this.writeFailure = undefined;
          done(failure);
          return;
        }
        this.received(typeof chunk === "string" ? chunk : chunk.toString("utf8"));
        done();
      },
      final: (done) => {
        this.stdinEnded = true;
        this.emit("stdin-end");
        done();
        if (this.options.onStdinEnd === "exit") queueMicrotask(() => this.exit(0));
      },
    });
    // A write that failed is the session's to report, not an unhandled error.
    this.stdin.on("error", () => {});
  }

  // ---- what the session sees ---------------------------------------------

  /** Writes bytes to the backend's stdout, exactly as given (no newline added). */
  pushStdout(data: string | Uint8Array): void {
    this.stdout.write(data);
  }

  /** Writes bytes to its stderr. */
  pushStderr(data: string | Uint8Array): void {
    this.stderr.write(data);
  }

  /**
   * Writes one event line: `protocol_version` and `ts` are added unless the
   * event has them. A string is written as the line's text, verbatim.
   */
  emitEvent(event: JsonObject | string): void {
    const line = typeof event === "string" ? event : JSON.stringify({ protocol_version: "1.0", ts: Math.round(Date.now()) / 1000, ...event });
    this.pushStdout(`${line}\n`);
  }

  /** Ends stdout and stderr, then reports the exit (`exit`, then `close`), as a process that ended. */
  exit(code: number | null, signal: NodeJS.Signals | null = null): void {
    if (this.exitCode !== null || this.signalCode !== null) return;
    this.exitCode = code;
    this.signalCode = signal;
    this.stdout.end();
    this.stderr.end();
    this.emit("exit", code, signal);
    // As a ChildProcess: `close` once its streams have ended.
    let open = 2;
    const closed = () => {
      if (--open === 0) this.emit("close", code, signal);
    };
    for (const stream of [this.stdout, this.stderr]) {
      if (stream.readableEnded) closed();
      else stream.once("end", closed);
      stream.resume();
    }
  }

  /** Emits `error` (a failed spawn, or a failure to signal it). */
  emitError(error: Error): void {
    this.emit("error", error);
  }

  /** The next write to stdin fails with `error` (default: `EPIPE`). */
  failNextWrite(error: Error = Object.assign(new Error("write EPIPE"), { code: "EPIPE" })): void {
    this.writeFailure = error;
  }

  /** What `child.kill(signal)` does (see `onTerm`). */
  kill(signal: NodeJS.Signals | number = "SIGTERM"): boolean {
    if (this.exitCode !== null || this.signalCode !== null) return false;
    this.signals.push(signal);
    const name = typeof signal === "number" ? (signal === 9 ? "SIGKILL" : "SIGTERM") : signal;
    if (name === "SIGKILL" || (this.options.onTerm ?? "exit") === "exit") queueMicrotask(() => this.exit(null, name));
    return true;
  }

  // ---- what the session wrote --------------------------------------------

  /** Every line the session wrote to stdin so far, in order (without the newline). */
  written(): string[] {
    return [...this.lines];
  }

  /** Every command the session wrote so far, parsed. */
  commands(): JsonObject[] {
    return this.lines.map((line) => JSON.parse(line) as JsonObject);
  }

  /** The next command the test has not read yet, parsed (waits for it). */
  async nextCommand(): Promise<JsonObject> {
    return JSON.parse(await this.nextLine()) as JsonObject;
  }

  /** The next line the test has not read yet (waits for it). */
  nextLine(): Promise<string> {
    if (this.readCursor < this.lines.length) return Promise.resolve(this.lines[this.readCursor++]);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private received(text: string): void {
    this.partial += text;
    for (let end = this.partial.indexOf("\n"); end >= 0; end = this.partial.indexOf("\n")) {
      const line = this.partial.slice(0, end);
      this.partial = this.partial.slice(end + 1);
      this.lines.push(line);
      this.emit("command-line", line);
      const waiter = this.waiters.shift();
      if (waiter) {
        this.readCursor++;
        waiter(line);
      }
    }
  }
}

/** An in-memory backend process for `attachAgentSession` (see the module's notes). */
export function fakeBackendChild(options: FakeBackendChildOptions = {}): FakeBackendChild {
  return new FakeBackendChild(options);
}
