/**
 * What an application calls on a session (docs/protocol.md §9.5.2, §9.5.4
 * operation settlement): `run`, `stream`, `cancel`, `reset`, `configure`,
 * `close`, and the frozen handle that exposes only them. Each checks what
 * it can locally, sends its command through the controller, and waits for
 * the settlement the controller's event processing gives it.
 */
import { ConfigureError, SessionClosedError, SessionStateError } from "../errors";
import { checkMilliseconds } from "../options";
import { describeValue } from "./backend-spec";
import { jsonPatch } from "./config";
import { deferred, type Deferred } from "./deferred";
import type { SessionController } from "./controller";
import { abortable, RunWatch, type ActiveRun } from "./runs";
import { UpdateStream, type SessionUpdate } from "./stream";
import type { AgentSession, OperationOptions, RunOptions, RunResult } from "./types";
import type { Snapshot } from "../store/types";

export class SessionOperations<TConfig, TConfigPatch> {
  constructor(private readonly core: SessionController<TConfig, TConfigPatch>) {}

  run(text: string, options: RunOptions = {}): Promise<RunResult> {
    const closed = this.core.lifecycle.closed;
    if (closed) return Promise.reject(new SessionClosedError(closed));
    if (this.core.runs.active) return Promise.reject(new SessionStateError("A run is already active.", "run-active"));
    if (typeof text !== "string") {
      return Promise.reject(new SessionStateError(`The prompt must be a string, not ${describeValue(text)}.`, "invalid-prompt"));
    }
    if (text.trim() === "") return Promise.reject(new SessionStateError("Prompt must not be empty.", "invalid-prompt"));
    try {
      checkMilliseconds("timeoutMs", options.timeoutMs);
      checkMilliseconds("idleTimeoutMs", options.idleTimeoutMs);
    } catch (error) {
      return Promise.reject(new SessionStateError((error as Error).message, "invalid-option", { cause: error }));
    }
    // An already aborted run never starts: it ends as cancelled.
    if (options.signal?.aborted) return Promise.resolve({ status: "cancelled" });
    const run = this.core.runs.begin(text);
    this.watch(run, options);
    this.core.sendPrompt(run);
    return run.result.promise;
  }

  /**
   * A run as an async iterable of its updates; see `stream.ts`. The
   * application's callbacks are called as for `run()`.
   */
  stream(text: string, options: RunOptions = {}): AsyncIterableIterator<SessionUpdate> {
    const updates = new UpdateStream(this.core.flow, () =>
      this.cancel().catch(() => {
        // The session closed: the run has ended with it.
      }),
    );
    const before = this.core.runs.active;
    const result = this.run(text, options);
    const started = this.core.runs.active !== undefined && this.core.runs.active !== before;
    if (started) this.core.updates = updates;
    const done = () => {
      if (this.core.updates === updates) this.core.updates = undefined;
    };
    result.then(
      (value) => {
        done();
        updates.end(value);
      },
      (error: unknown) => {
        done();
        updates.fail(error);
      },
    );
    return updates;
  }

  /** The signal, the run timeout and the idle watchdog of a run. */
  private watch(run: ActiveRun, options: RunOptions): void {
    const timeoutMs = options.timeoutMs ?? this.core.options.runTimeoutMs;
    const idleMs = options.idleTimeoutMs ?? this.core.options.idleTimeoutMs;
    const watch = new RunWatch({
      signal: options.signal,
      timeoutMs,
      idleMs,
      onAbort: () => this.stopRun(run),
      onTimeout: () => {
        this.core.notify.diagnostic({ kind: "run-timeout", timeoutMs: timeoutMs! });
        this.stopRun(run);
      },
      onIdle: () => {
        this.core.notify.diagnostic({ kind: "stalled", idleMs: idleMs! });
        if ((this.core.options.onStall ?? "report") === "cancel") this.stopRun(run);
      },
    });
    this.core.runWatch = watch;
    const stop = () => {
      watch.stop();
      if (this.core.runWatch === watch) this.core.runWatch = undefined;
    };
    run.result.promise.then(stop, stop);
  }

  /** Ends a run the application no longer waits for: a cancel, as `cancel()` sends it. */
  private stopRun(run: ActiveRun): void {
    if (this.core.runs.active !== run || this.core.lifecycle.closed) return;
    void this.cancel().catch(() => {
      // Settled through the run (or the session's close).
    });
  }

  cancel(options: OperationOptions = {}): Promise<void> {
    const closed = this.core.lifecycle.closed;
    if (closed) return Promise.reject(new SessionClosedError(closed));
    if (this.core.runs.abandonRetry() || !this.core.runs.active) return Promise.resolve();
    if (options.signal?.aborted) return Promise.reject(options.signal.reason);
    const op = deferred<void>();
    this.core.runs.waitForEnd(op);
    if (this.core.sendTracked({ kind: "cancel", op }, { type: "cancel" }) === "full") {
      this.core.runs.stopWaiting(op);
      return Promise.reject(this.core.stdinFull("cancel"));
    }
    this.closeIfUnanswered(op.promise);
    return abortable(op, options.signal, () => this.core.runs.stopWaiting(op));
  }

  /**
   * A cancel the backend does not carry out (no terminal event) within
   * `cancelTimeoutMs` means it is stuck: the session closes, so that
   * nothing waits for ever.
   */
  private closeIfUnanswered(cancelled: Promise<void>): void {
    const ms = this.core.options.cancelTimeoutMs ?? 10_000;
    const timer = setTimeout(() => {
      if (this.core.runs.active) this.core.closeUnresponsive(`The backend did not end the run within ${ms} ms of a cancel; closing the session.`);
    }, ms);
    const clear = () => clearTimeout(timer);
    cancelled.then(clear, clear);
  }

  reset(options: OperationOptions = {}): Promise<void> {
    const closed = this.core.lifecycle.closed;
    if (closed) return Promise.reject(new SessionClosedError(closed));
    if (options.signal?.aborted) return Promise.reject(options.signal.reason);
    this.core.runs.abandonRetry();
    const op = deferred<void>();
    this.core.resetWaiters.push(op);
    if (this.core.sendReset(op, 0) === "full") {
      this.core.removeResetWaiter(op);
      return Promise.reject(this.core.stdinFull("reset"));
    }
    return abortable(op, options.signal, () => this.core.removeResetWaiter(op));
  }

  configure(patch: TConfigPatch, options: OperationOptions = {}): Promise<TConfig> {
    const closed = this.core.lifecycle.closed;
    if (closed) return Promise.reject(new SessionClosedError(closed));
    if (options.signal?.aborted) return Promise.reject(options.signal.reason);
    const op = deferred<unknown>();
    try {
      // A checked copy: what is validated is what is sent (getters and
      // proxy traps run once, here).
      const copy = jsonPatch(patch);
      if (this.core.sendTracked({ kind: "configure", op }, { type: "configure", patch: copy }) === "full") {
        return Promise.reject(this.core.stdinFull("configure command"));
      }
    } catch (error) {
      if (error instanceof ConfigureError) return Promise.reject(error);
      // The patch threw while read, or the encoder refused it (unpaired surrogate, too long).
      return Promise.reject(new ConfigureError("invalid", error instanceof Error ? error.message : String(error), { cause: error }));
    }
    return abortable(op, options.signal, () => {}) as Promise<TConfig>;
  }

  close(): Promise<void> {
    const phase = this.core.lifecycle.phase;
    if (phase.name === "closed") return Promise.resolve();
    if (phase.name !== "closing") {
      this.core.lifecycle.phase = { name: "closing" };
      this.core.commands.push({ kind: "shutdown" });
      this.core.recorder?.record("stdin", JSON.stringify({ type: "shutdown" }));
      this.core.channel.shutdown();
    }
    return this.core.closedPromise.promise;
  }

  /** The application's view: only the members of `AgentSession`. */
  handle(): AgentSession<TConfig, TConfigPatch> {
    const session = this;
    const core = this.core;
    const handle = {
      get ready() {
        return core.readyInfo!;
      },
      get config() {
        return core.configValue;
      },
      get process() {
        return core.processInfo;
      },
      get bufferedInputBytes() {
        return core.channel.bufferedBytes();
      },
      get flightRecord() {
        return core.recorder?.snapshot();
      },
      run: (text: string, options?: RunOptions) => session.run(text, options),
      stream: (text: string, options?: RunOptions) => session.stream(text, options),
      cancel: (options?: OperationOptions) => session.cancel(options),
      reset: (options?: OperationOptions) => session.reset(options),
      configure: (patch: TConfigPatch, options?: OperationOptions) => session.configure(patch, options),
      close: () => session.close(),
      // Parsed from the committed text on each call: a fresh copy, and nothing parsed per run.
      snapshot: () => (core.lastSnapshot === null ? null : (JSON.parse(core.lastSnapshot.text) as Snapshot)),
    };
    const dispose = () => session.close();
    for (const key of ASYNC_DISPOSE_KEYS) Object.defineProperty(handle, key, { value: dispose, enumerable: true });
    return Object.freeze(handle) as AgentSession<TConfig, TConfigPatch>;
  }
}

/**
 * Every key `await using` may look a session's disposer up by, whatever
 * realm the session is made or used in (`await using session = await
 * createAgentSession(…)`, the README's testing pattern). Node 20 and 22
 * give only their main realm a `Symbol.asyncDispose`
 * (`Symbol.for("nodejs.asyncDispose")`); in a `vm` context, where vitest's
 * `vmThreads` pool and Jest run tests, it is undefined, and what
 * transpilers emit for `await using` (oxc, esbuild, Babel, SWC) falls back
 * to `Symbol.for("Symbol.asyncDispose")`. Node 24 has one symbol in every
 * realm. Symbols from `Symbol.for` are the same in every realm.
 */
const ASYNC_DISPOSE_KEYS: readonly symbol[] = [
  ...new Set([Symbol.asyncDispose as symbol | undefined, Symbol.for("nodejs.asyncDispose"), Symbol.for("Symbol.asyncDispose")]),
].filter((key): key is symbol => typeof key === "symbol");
