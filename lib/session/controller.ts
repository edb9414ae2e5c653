/**
 * The session's conductor (docs/protocol.md §9.5): it processes each event
 * of the backend in the order §9.5.4 fixes (onEvent, acknowledgement,
 * semantics), settles what waits for it, and tears the session down once,
 * whatever the cause. Where the backend comes from is `backend.ts`'s
 * concern (spawned or attached), what the application calls is
 * `operations.ts`'s. The parts it conducts each have their own module:
 * `lifecycle` (where the session is), `commands` (correlation of answers to
 * commands), `runs` (the run and the §12 prompt race), `approvals`,
 * `config`, `activity` (native records to tool, agent, plan and approval
 * activity, over `records`), `text` (segmentation), `stream` (the streaming
 * API) and `notify` (guarded callbacks, diagnostics).
 */
import { createBridgeChannel, type BridgeChannel, type BridgeChildLike, type SendOutcome } from "../channel";
import {
  BridgeDecodeError,
  ConfigureError,
  RunError,
  SessionClosedError,
  SessionStartError,
  SessionStateError,
  type BridgeReadError,
  type SessionStartErrorCode,
} from "../errors";
import type { BackendProcess } from "../process";
import { DEFAULT_TERM_GRACE_MS } from "../spawn/start-plan";
import type { BridgeCommand, BridgeEvent, ConfigEvent, JsonObject } from "../protocol";
import type { BridgeProcessCallbacks } from "../wiring";
import { FlowGate } from "../stream/flow";
import { Approvals } from "./approvals";
import type { OpenBackend } from "./backend";
import { likelyCause, StderrTail, startCodeOf, startFailureOf } from "./diagnose";
import { FlightRecorder } from "./flight-recorder";
import { CommandQueue, type SentCommand } from "./commands";
import { decodeConfigDocument, settlementOf, unexpectedConfigEvent } from "./config";
import { deferred, type Deferred } from "./deferred";
import { Lifecycle } from "./lifecycle";
import { Notifier } from "./notify";
import { SessionOperations } from "./operations";
import { RunActivity } from "./activity";
import type { UpdateStream } from "./stream";
import { RACE_RETRIES, RACE_RETRY_MS, RESET_WHILE_ACTIVE, RUN_ALREADY_ACTIVE, Runs, type ActiveRun, type RunWatch } from "./runs";
import { TextSegmenter } from "./text";
import type { AgentSession, AgentSessionOptions, ApprovalResolution, ReadyInfo, SessionClose } from "./types";
import type { HostChannelServer } from "../tools/server";
import { hostChannelFor, missingAtReady } from "../tools/session";
import type { SnapshotText } from "../store/snapshot-text";

export class SessionController<TConfig, TConfigPatch> {
  private child!: BridgeChildLike;
  channel!: BridgeChannel;
  private readonly startup = deferred<AgentSession<TConfig, TConfigPatch>>();
  readonly lifecycle = new Lifecycle();
  readonly closedPromise = deferred<void>();
  readyInfo: ReadyInfo | undefined;
  configValue: TConfig | undefined;
  private readyTimer: ReturnType<typeof setTimeout> | undefined;
  readonly commands = new CommandQueue();
  readonly runs = new Runs();
  resetWaiters: Deferred<void>[] = [];
  /** The timers watching the active run (timeout, idle watchdog). */
  runWatch: RunWatch | undefined;
  /** The updates of the run `stream()` started, while it lasts. */
  updates: UpdateStream | undefined;
  /** Closed while a stream's consumer falls behind: the stdout reader waits. */
  readonly flow = new FlowGate();
  /** The backend's processes, once spawned. */
  processInfo: BackendProcess | undefined;
  /** The command spawned, for start diagnoses. */
  private command = "";
  private readonly stderrTail = new StderrTail();
  /** The flight recorder, when the application asked for one. */
  readonly recorder: FlightRecorder | undefined;
  /** Why startup will fail when the exit comes (a bad line before `ready`). */
  private startFailure: { message: string; code: SessionStartErrorCode; cause: unknown } | undefined;
  readonly notify: Notifier;
  private readonly text: TextSegmenter;
  private readonly approvals: Approvals;
  private readonly activity: RunActivity;
  private readonly operations: SessionOperations<TConfig, TConfigPatch>;
  /** The host channel (the application's tools and store), when the session offers either. */
  readonly hostChannel: HostChannelServer | undefined;
  /** The last snapshot the store committed (or the one resumed from); `null`: none. */
  lastSnapshot: SnapshotText | null = null;

  constructor(readonly options: AgentSessionOptions<TConfig, TConfigPatch>) {
    const recording = options.flightRecorder;
    this.recorder = recording ? new FlightRecorder(recording === true ? {} : recording) : undefined;
    this.notify = new Notifier(options.onDiagnostic);
    this.text = new TextSegmenter(options.textDelivery ?? "coalesced", (stream, chunk) => {
      if (stream === "assistant") this.notify.guard("onAssistantText", options.onAssistantText, chunk, options);
      else this.notify.guard("onReasoningText", options.onReasoningText, chunk, options);
      this.updates?.push({ type: stream === "assistant" ? "text" : "reasoning", chunk });
    });
    const resolved = (resolution: ApprovalResolution) => {
      this.notify.guard("onApprovalResolved", options.onApprovalResolved, resolution, options);
      this.updates?.push({ type: "approval", resolution });
    };
    this.approvals = new Approvals({
      policy: options.approvals,
      send: (command) => this.sendTracked({ kind: "approve", id: command.id }, command) === "sent",
      closed: () => this.lifecycle.closed !== undefined,
      diagnostic: (diagnostic) => this.notify.diagnostic(diagnostic),
      resolved,
    });
    // Throws SessionStartError `invalid-tools` for tools that cannot be served.
    this.hostChannel = hostChannelFor(options, {
      approvals: options.approvals,
      resolved,
      diagnostic: (diagnostic) => this.notify.diagnostic(diagnostic),
      committed: (snapshot) => (this.lastSnapshot = snapshot),
    }, (options as { hostChannel?: unknown }).hostChannel !== undefined);
    this.operations = new SessionOperations(this);
    this.activity = new RunActivity({ options, notify: this.notify, text: this.text, approvals: this.approvals, updates: () => this.updates });
  }

  // ---- startup -------------------------------------------------------------

  /**
   * Opens the backend (spawned or attached: `backend.ts`) with this
   * session's callbacks, and waits for `ready`. `command` names what is
   * started, for the diagnosis of a failed start.
   */
  start(command: string, open: OpenBackend): Promise<AgentSession<TConfig, TConfigPatch>> {
    this.command = command;
    try {
      this.child = open(this.backendCallbacks());
    } catch (error) {
      // Nothing was started (invalid options, or no file descriptors left).
      const message = error instanceof Error ? error.message : String(error);
      const spawnError = error as NodeJS.ErrnoException;
      const code = startCodeOf(error);
      const cause = likelyCause({ code, command, spawnError, exitCode: null, stderrTail: [] });
      return Promise.reject(new SessionStartError(message, code, { cause: error, likelyCause: cause }));
    }
    this.channel = createBridgeChannel(this.child, {
      graceMs: this.options.shutdownGraceMs ?? 1500,
      termGraceMs: this.termGraceMs,
      maxBufferedBytes: this.options.maxStdinBufferBytes,
      onSendError: (message) => {
        this.notify.diagnostic({ kind: "send-failed", message });
        this.teardown({ reason: "exit", code: null, signal: null });
        this.kill();
      },
    });
    this.readyTimer = setTimeout(
      () => this.failStartup("Timed out waiting for bridge ready event.", "ready-timeout", { kill: true }),
      this.options.readyTimeoutMs ?? 30_000,
    );
    this.abortableStart(this.options.signal);
    return this.startup.promise;
  }

  /**
   * The application can call the start off (its `signal`) until `ready`:
   * the start fails as a ready timeout makes it fail, killing what was
   * started (a spawned backend, a warm start waiting for its server or
   * forked, an attached process through its `kill`).
   */
  private abortableStart(signal: AbortSignal | undefined): void {
    if (signal === undefined) return;
    const abort = () => this.failStartup("The start was aborted before the backend was ready.", "aborted", { kill: true, cause: signal.reason });
    if (signal.aborted) return abort();
    signal.addEventListener("abort", abort, { once: true });
    const done = () => signal.removeEventListener("abort", abort);
    this.startup.promise.then(done, done);
  }

  /** Where the backend's output and exit go (§9.2 callbacks), spawned or attached. */
  private backendCallbacks(): BridgeProcessCallbacks {
    return {
      onEvent: (event) => {
        this.recorder?.record("stdout", JSON.stringify(event));
        this.onEvent(event);
      },
      onDecodeError: (error, line) => {
        this.recorder?.record("stdout", line);
        this.protocolFailure(error, line);
      },
      onStderr: (line) => {
        this.recorder?.record("stderr", line);
        this.stderrTail.push(line);
        this.notify.diagnostic({ kind: "stderr", line });
      },
      onReadError: (error) => this.onReadError(error),
      onStarted: (info) => (this.processInfo = info),
      onHostChannel: (socket) => this.hostChannel?.serve(socket),
      onStdoutClosed: () => this.onStdoutClosed(),
      onSpawnError: (error) => this.onSpawnError(error),
      onExit: (code, signal) => this.onExit(code, signal),
    };
  }

  /** After SIGTERM, how long the backend's processes get before SIGKILL. */
  get termGraceMs(): number {
    return this.options.termGraceMs ?? DEFAULT_TERM_GRACE_MS;
  }

  private failStartup(
    message: string,
    code: SessionStartErrorCode,
    how: { kill: boolean; cause?: unknown; exitCode?: number | null; signal?: string | null },
  ): void {
    if (!this.lifecycle.startPending) return;
    this.lifecycle.phase = { name: "start-failed" };
    clearTimeout(this.readyTimer);
    if (how.kill) this.kill();
    const stderrTail = this.stderrTail.lines();
    const exitCode = how.exitCode ?? null;
    const spawnError = code === "spawn-failed" ? (how.cause as NodeJS.ErrnoException) : undefined;
    const cause = likelyCause({ code, command: this.command, spawnError, exitCode, stderrTail });
    this.startup.reject(
      new SessionStartError(message, code, { cause: how.cause, exitCode, signal: how.signal ?? null, stderrTail, likelyCause: cause }),
    );
  }

  private onSpawnError(error: Error): void {
    if (!this.readyInfo) this.failStartup(error.message, startCodeOf(error), { kill: true, cause: error });
    else this.notify.diagnostic({ kind: "send-failed", message: error.message });
  }

  private onExit(code: number | null, signal: string | null): void {
    if (!this.readyInfo) {
      const failure = this.startFailure ?? { message: "Backend exited before ready event.", code: "exited-before-ready" as const, cause: undefined };
      this.failStartup(failure.message, failure.code, { kill: false, cause: failure.cause, exitCode: code, signal });
      this.teardown({ reason: "exit", code, signal });
      return;
    }
    const reason = this.lifecycle.exitReason();
    const abnormal = reason === "exit" && (code !== 0 || signal !== null);
    const stderrTail = abnormal ? this.stderrTail.lines() : [];
    this.teardown(stderrTail.length > 0 ? { reason, code, signal, stderrTail } : { reason, code, signal });
  }

  kill(): void {
    try {
      this.child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
  }

  /** The first `ready`: startup succeeds, unless its config fails to decode. */
  private onReady(event: Extract<BridgeEvent, { type: "ready" }>): boolean {
    clearTimeout(this.readyTimer);
    if (event.config !== undefined) {
      const decoded = decodeConfigDocument(event.config, this.options.decodeConfig);
      if (!decoded.ok) {
        this.failStartup(decoded.error.message, "bad-ready", { kill: true, cause: decoded.error });
        this.teardown({ reason: "protocol-error", error: decoded.error, code: null, signal: null });
        return false;
      }
      this.configValue = decoded.value;
    }
    const missing = missingAtReady(this.hostChannel, this.options.store !== undefined);
    if (missing !== undefined) {
      this.failStartup(missing.message, missing.code, { kill: true });
      return false;
    }
    this.readyInfo = { version: event.version, package: event.package, metadata: event.metadata ?? {} };
    this.lifecycle.phase = { name: "open", backendShuttingDown: false };
    this.startup.resolve(this.operations.handle());
    return true;
  }

  // ---- events (§9.5.4, per-event processing order) -------------------------

  private onEvent(event: BridgeEvent): void {
    if (!this.lifecycle.listening) return;
    if (!this.readyInfo) {
      if (event.type !== "ready") {
        this.notify.guard("onEvent", this.options.onEvent, event, this.options);
        return;
      }
      if (!this.onReady(event)) return;
    }
    this.notify.guard("onEvent", this.options.onEvent, event, this.options);
    if (this.lifecycle.closed) return;
    this.runWatch?.sawEvent();
    if (event.type === "config") {
      this.settleConfigure(event);
      return;
    }
    if (event.type === "reset" && event.config !== undefined) {
      if (!this.announceConfig(event.config)) return;
    }
    this.commands.acknowledge(event);
    this.process(event);
  }

  /** Step 6: semantic processing. */
  private process(event: BridgeEvent): void {
    switch (event.type) {
      case "run_event":
        return this.activity.onRecord(event.event);
      case "run_complete":
        // No text for a run that does not exist (a stray terminal event).
        if (typeof event.final_output === "string" && this.runs.active) this.text.complete(event.final_output);
        this.activity.sweep();
        this.runs.finish({ status: "completed", finalOutput: event.final_output, turnCount: event.turn_count, responseCount: event.response_count });
        return;
      case "run_cancelled":
        this.activity.sweep();
        this.runs.finish({ status: "cancelled" });
        return;
      case "error":
        if (event.scope === "run") {
          this.activity.sweep();
          this.runs.finish(new RunError(event.message, "run-failed"));
        } else {
          this.onCommandError(event.message);
        }
        return;
      case "cancel_requested":
      case "cancel_ignored":
        this.text.flush();
        if (!this.runs.active) this.runs.resolveCancelWaiters();
        return;
      case "reset": {
        this.activity.sweep();
        const waiters = this.resetWaiters;
        this.resetWaiters = [];
        for (const waiter of waiters) waiter.resolve();
        return;
      }
      case "shutdown":
        this.activity.sweep();
        if (this.lifecycle.phase.name === "open") this.lifecycle.phase = { name: "open", backendShuttingDown: true };
        return;
    }
  }

  /** A command-scoped error belongs to the oldest command still waiting (§8.11). */
  private onCommandError(message: string): void {
    const entry = this.commands.blame();
    switch (entry?.kind) {
      case undefined:
      case "approve":
      case "shutdown":
        return this.notify.diagnostic({ kind: "command-rejected", message });
      case "prompt":
        if (message === RUN_ALREADY_ACTIVE && this.runs.active?.raceable && (this.commands.has("cancel") || this.commands.has("reset"))) {
          // The race refused it, and a cancel or reset was sent after it:
          // resending would reorder them. The run never started.
          this.runs.cancelUnstarted();
          return;
        }
        if (!this.runs.refused(message, (run) => this.resend(run))) {
          this.notify.diagnostic({ kind: "command-rejected", message });
        }
        return;
      case "cancel":
        this.runs.stopWaiting(entry.op);
        entry.op.reject(new RunError(message, "command-refused"));
        return;
      case "reset":
        if (this.resetRace(entry, message)) return;
        this.removeResetWaiter(entry.op);
        entry.op.reject(new RunError(message, "command-refused"));
        return;
      case "configure":
        entry.op.reject(new ConfigureError("unsupported", message));
        return;
    }
  }

  /**
   * The reset race: a reset whose own cancel has just ended the run can be
   * refused because the agent frees its run lock a moment later. When
   * nothing else was sent since, the reset is sent again shortly (up to
   * five times) instead of failing with the conversation not reset.
   */
  private resetRace(entry: Extract<SentCommand, { kind: "reset" }>, message: string): boolean {
    const endedSince = this.runs.lastTerminalAt !== undefined && this.runs.lastTerminalAt >= entry.sentAt;
    if (message !== RESET_WHILE_ACTIVE || !endedSince || entry.retries >= RACE_RETRIES || this.commands.size > 0) return false;
    if (!this.resetWaiters.includes(entry.op)) return false;
    const retries = entry.retries + 1;
    const timer = setTimeout(() => {
      if (this.lifecycle.closed || !this.resetWaiters.includes(entry.op)) return;
      this.sendReset(entry.op, retries);
    }, RACE_RETRY_MS * retries);
    timer.unref?.();
    return true;
  }

  removeResetWaiter(op: Deferred<void>): void {
    const index = this.resetWaiters.indexOf(op);
    if (index >= 0) this.resetWaiters.splice(index, 1);
  }

  // ---- config ----------------------------------------------------------------

  /** Caches an announced document and tells the app; false if it failed to decode (session closed). */
  private announceConfig(raw: JsonObject): boolean {
    const decoded = decodeConfigDocument(raw, this.options.decodeConfig);
    if (!decoded.ok) {
      this.protocolFailure(decoded.error, "");
      return false;
    }
    this.configValue = decoded.value;
    this.notify.guard("onConfigChanged", this.options.onConfigChanged, decoded.value, this.options);
    return true;
  }

  private settleConfigure(event: ConfigEvent): void {
    const entry = this.commands.take("configure");
    if (!entry) {
      this.protocolFailure(unexpectedConfigEvent(), "");
      return;
    }
    const settlement = settlementOf(event);
    switch (settlement.outcome) {
      case "contradictory":
        this.protocolFailure(settlement.error, "");
        return entry.op.reject(new SessionClosedError(this.lifecycle.closed!));
      case "applied":
        if (!this.announceConfig(settlement.document)) return entry.op.reject(new SessionClosedError(this.lifecycle.closed!));
        return entry.op.resolve(this.configValue);
      case "refused":
        if (settlement.document !== null && !this.announceConfig(settlement.document)) {
          return entry.op.reject(new SessionClosedError(this.lifecycle.closed!));
        }
        return entry.op.reject(new ConfigureError(settlement.error.code, settlement.error.message));
    }
  }

  // ---- failures, teardown ------------------------------------------------------

  /** A decode error or a session protocol failure: close and SIGKILL (§7.4). */
  private protocolFailure(error: BridgeDecodeError, line: string): void {
    if (!this.lifecycle.listening) return;
    if (this.options.strayStdout === "tolerate" && STRAY.has(error.code)) {
      this.notify.diagnostic({ kind: "stray-line", head: line.slice(0, STRAY_HEAD_CHARS), error });
      return;
    }
    const flightRecord = this.recorder?.snapshot();
    this.notify.diagnostic(flightRecord ? { kind: "protocol", error, line, flightRecord } : { kind: "protocol", error, line });
    if (!this.readyInfo) {
      // Startup fails when the exit is seen.
      this.startFailure = startFailureOf(error, line);
      this.lifecycle.phase = { name: "start-failing" };
      this.kill();
      return;
    }
    this.teardown({ reason: "protocol-error", error, code: null, signal: null });
    this.kill();
  }

  /** Reading an output stream failed: stdout is fatal (no more events can come). */
  private onReadError(error: BridgeReadError): void {
    if (!this.lifecycle.listening) return;
    this.notify.diagnostic({ kind: "read-failed", error });
    if (error.stream !== "stdout") return;
    if (!this.readyInfo) {
      this.lifecycle.phase = { name: "start-failing" };
      this.kill();
      return;
    }
    this.teardown({ reason: "read-failed", error, code: null, signal: null });
    this.kill();
  }

  /**
   * Stdout ended while the backend kept running: no event can come any
   * more, so a run would wait for ever. Fatal, as the reference's stream end
   * would be (unless the backend is shutting down anyway).
   */
  private onStdoutClosed(): void {
    if (!this.lifecycle.listening || this.lifecycle.exitReason() === "shutdown") return;
    const message = "The backend closed its stdout but kept running; no event can come any more.";
    this.notify.diagnostic({ kind: "stdout-closed", message });
    if (!this.readyInfo) {
      this.lifecycle.phase = { name: "start-failing" };
      this.kill();
      return;
    }
    this.teardown({ reason: "stdout-closed", message, code: null, signal: null });
    this.kill();
  }

  /** Runs once, whatever the cause (§9.5.4 teardown). */
  teardown(close: SessionClose): void {
    if (this.lifecycle.closed) return;
    // Closed before ready by something other than the exit (a send failure):
    // startup fails as the exit would make it.
    this.failStartup("Backend exited before ready event.", "exited-before-ready", { kill: false });
    const wasOpen = this.readyInfo !== undefined;
    this.lifecycle.phase = { name: "closed", close, wasOpen };
    clearTimeout(this.readyTimer);
    this.hostChannel?.close();
    this.activity.sweep();
    this.text.dispose();
    const error = new SessionClosedError(close, this.recorder?.snapshot());
    this.runs.rejectRun(error);
    for (const entry of this.commands.drain()) {
      if (entry.kind === "configure" || entry.kind === "cancel" || entry.kind === "reset") entry.op.reject(error);
    }
    this.runs.rejectCancelWaiters(error);
    for (const waiter of this.resetWaiters.splice(0)) waiter.reject(error);
    this.closedPromise.resolve();
    if (wasOpen) this.notify.guard("onClose", this.options.onClose, close, this.options);
  }

  /**
   * Writes a command and records it as waiting for its answer; forgets it
   * when it was not written (stdin closed, or its buffer full: the backend
   * is not reading). An encoder refusal is thrown.
   */
  sendTracked(entry: SentCommand, command: BridgeCommand): SendOutcome {
    this.commands.push(entry);
    let outcome: SendOutcome = "closed";
    try {
      outcome = this.channel.trySend(command);
    } finally {
      if (outcome !== "sent") this.commands.forget(entry);
    }
    if (outcome === "sent") {
      this.recorder?.record("stdin", JSON.stringify(command));
      if (entry.kind === "reset" || entry.kind === "configure") this.answerInTime(entry);
    }
    if (outcome === "full") {
      this.notify.diagnostic({ kind: "backpressure", command: command.type, bufferedBytes: this.channel.bufferedBytes() });
    }
    return outcome;
  }

  /**
   * A reset or configure the backend does not answer within
   * `commandTimeoutMs` means it is stuck (it handles commands one at a
   * time, so every later command would wait too): the session closes
   * (`unresponsive`), as for a cancel not carried out, so that nothing
   * waits for ever.
   */
  private answerInTime(entry: SentCommand): void {
    const ms = this.options.commandTimeoutMs ?? 10_000;
    this.commands.watch(entry, ms, () => this.closeUnresponsive(`The backend did not answer a ${entry.kind} command within ${ms} ms; closing the session.`));
  }

  /** The backend is stuck: the session closes (`unresponsive`) and kills it. */
  closeUnresponsive(message: string): void {
    if (this.lifecycle.closed) return;
    this.notify.diagnostic({ kind: "unresponsive", message });
    this.teardown({ reason: "unresponsive", message, code: null, signal: null });
    this.kill();
  }

  /** The refusal of a command the stdin buffer had no room for. */
  stdinFull(what: string): SessionStateError {
    return new SessionStateError(
      `The backend is not reading its stdin (${this.channel.bufferedBytes()} bytes wait to be written): the ${what} was not sent.`,
      "stdin-full",
    );
  }

  // ---- sending, for the operations and the event processing alike ----------

  sendPrompt(run: ActiveRun): void {
    try {
      if (this.sendTracked({ kind: "prompt" }, { type: "prompt", text: run.text }) === "full") {
        this.runs.drop(run);
        run.result.reject(this.stdinFull("prompt"));
      }
    } catch (error) {
      // The encoder refused the prompt (an unpaired surrogate, or longer
      // than the backend's line limit): nothing was sent.
      this.runs.drop(run);
      run.result.reject(new SessionStateError(error instanceof Error ? error.message : String(error), "invalid-prompt", { cause: error }));
    }
  }

  /** Resends a prompt the §12 race refused, unless the session has closed meanwhile. */
  private resend(run: ActiveRun): void {
    if (!this.lifecycle.closed) this.sendPrompt(run);
  }

  sendReset(op: Deferred<void>, retries: number): SendOutcome {
    return this.sendTracked({ kind: "reset", op, sentAt: performance.now(), retries }, { type: "reset" });
  }
}

/**
 * Lines `strayStdout: "tolerate"` lets pass: those that are not bridge
 * events at all (text a tool printed, JSON without a `protocol_version`).
 * A line that claims to be an event and is wrong stays fatal.
 */
const STRAY: ReadonlySet<string> = new Set(["invalid-json", "not-an-object", "version-not-a-string"]);
/** How much of a stray line its diagnostic shows. */
const STRAY_HEAD_CHARS = 200;