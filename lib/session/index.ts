/**
 * The session layer (docs/protocol.md §9.5): `createAgentSession` owns a backend
 * child and turns the event stream into application callbacks and promises.
 *
 * This module is the conductor: it spawns the backend, processes each event
 * in the order §9.5.4 fixes (onEvent, acknowledgement, semantics), and
 * settles operations. The parts it conducts each have their own module:
 * `lifecycle` (where the session is), `commands` (correlation of answers to
 * commands), `runs` (the run and the §12 prompt race), `approvals`,
 * `config`, `records` (native records to activity values), `text`
 * (segmentation) and `notify` (guarded callbacks, diagnostics).
 */
import type { ChildProcess } from "node:child_process";
import { createBridgeChannel, type BridgeChannel } from "../channel";
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
import { isNativeEvent } from "../codec";
import { resolveBackendSpec, spawnBridgeProcess } from "../process";
import type { BridgeCommand, BridgeEvent, ConfigEvent, JsonObject, NativeRunEvent } from "../protocol";
import { Approvals } from "./approvals";
import { CommandQueue, type SentCommand } from "./commands";
import { decodeConfigDocument, settlementOf, unexpectedConfigEvent } from "./config";
import { deferred, type Deferred } from "./deferred";
import { Lifecycle } from "./lifecycle";
import { Notifier } from "./notify";
import { agentInfo, approvalRecord, planUpdate, toolCallInfo } from "./records";
import { Runs, type ActiveRun } from "./runs";
import { TextSegmenter } from "./text";
import type {
  AgentActivity,
  AgentInfo,
  AgentSession,
  AgentSessionOptions,
  ReadyInfo,
  RunResult,
  SessionClose,
  ToolActivity,
  ToolCallInfo,
} from "./types";

/**
 * Spawns the backend, waits for `ready` and resolves with the session handle
 * (§9.5.4 startup). Rejects with `SessionStartError` if startup fails.
 */
export function createAgentSession<TConfig = JsonObject, TConfigPatch = Partial<TConfig>>(
  options: AgentSessionOptions<TConfig, TConfigPatch>,
): Promise<AgentSession<TConfig, TConfigPatch>> {
  return new SessionController<TConfig, TConfigPatch>(options).start();
}

class SessionController<TConfig, TConfigPatch> {
  private child!: ChildProcess;
  private channel!: BridgeChannel;
  private readonly startup = deferred<AgentSession<TConfig, TConfigPatch>>();
  private readonly lifecycle = new Lifecycle();
  private readonly closedPromise = deferred<void>();
  private readyInfo: ReadyInfo | undefined;
  private configValue: TConfig | undefined;
  private readyTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly commands = new CommandQueue();
  private readonly runs = new Runs();
  private resetWaiters: Deferred<void>[] = [];
  private readonly tools = new Map<string, ToolCallInfo>();
  private readonly agents = new Map<string, AgentInfo>();
  private readonly notify: Notifier;
  private readonly text: TextSegmenter;
  private readonly approvals: Approvals;

  constructor(private readonly options: AgentSessionOptions<TConfig, TConfigPatch>) {
    this.notify = new Notifier(options.onDiagnostic);
    this.text = new TextSegmenter(options.textDelivery ?? "coalesced", (stream, chunk) =>
      this.notify.guard(stream === "assistant" ? "onAssistantText" : "onReasoningText", () =>
        (stream === "assistant" ? options.onAssistantText : options.onReasoningText)?.(chunk),
      ),
    );
    this.approvals = new Approvals({
      policy: options.approvals,
      send: (command) => this.sendTracked({ kind: "approve", id: command.id }, command),
      closed: () => this.lifecycle.closed !== undefined,
      diagnostic: (diagnostic) => this.notify.diagnostic(diagnostic),
      resolved: (resolution) => this.notify.guard("onApprovalResolved", () => options.onApprovalResolved?.(resolution)),
    });
  }

  // ---- startup -------------------------------------------------------------

  start(): Promise<AgentSession<TConfig, TConfigPatch>> {
    let spec;
    try {
      spec = resolveBackendSpec(this.options.backend);
    } catch (error) {
      return Promise.reject(new SessionStartError(error instanceof Error ? error.message : String(error), "invalid-spec", { cause: error }));
    }
    this.child = spawnBridgeProcess(spec, {
      onEvent: (event) => this.onEvent(event),
      onDecodeError: (error, line) => this.protocolFailure(error, line),
      onStderr: (line) => this.notify.diagnostic({ kind: "stderr", line }),
      onReadError: (error) => this.onReadError(error),
      onSpawnError: (error) => this.onSpawnError(error),
      onExit: (code, signal) => this.onExit(code, signal),
    });
    this.channel = createBridgeChannel(this.child, {
      graceMs: this.options.shutdownGraceMs ?? 1500,
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
    return this.startup.promise;
  }

  private failStartup(message: string, code: SessionStartErrorCode, how: { kill: boolean; cause?: unknown }): void {
    if (!this.lifecycle.startPending) return;
    this.lifecycle.phase = { name: "start-failed" };
    clearTimeout(this.readyTimer);
    if (how.kill) this.kill();
    this.startup.reject(new SessionStartError(message, code, how.cause === undefined ? undefined : { cause: how.cause }));
  }

  private onSpawnError(error: Error): void {
    if (!this.readyInfo) this.failStartup(error.message, "spawn-failed", { kill: true, cause: error });
    else this.notify.diagnostic({ kind: "send-failed", message: error.message });
  }

  private onExit(code: number | null, signal: string | null): void {
    if (!this.readyInfo) {
      this.failStartup("Backend exited before ready event.", "exited-before-ready", { kill: false });
      this.teardown({ reason: "exit", code, signal });
      return;
    }
    this.teardown({ reason: this.lifecycle.exitReason(), code, signal });
  }

  private kill(): void {
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
    this.readyInfo = { version: event.version, package: event.package, metadata: event.metadata ?? {} };
    this.lifecycle.phase = { name: "open", backendShuttingDown: false };
    this.startup.resolve(this.handle());
    return true;
  }

  // ---- events (§9.5.4, per-event processing order) -------------------------

  private onEvent(event: BridgeEvent): void {
    if (!this.lifecycle.listening) return;
    if (!this.readyInfo) {
      if (event.type !== "ready") {
        this.notify.guard("onEvent", () => this.options.onEvent?.(event));
        return;
      }
      if (!this.onReady(event)) return;
    }
    this.notify.guard("onEvent", () => this.options.onEvent?.(event));
    if (this.lifecycle.closed) return;
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
        return this.onRecord(event.event);
      case "run_complete":
        if (typeof event.final_output === "string") this.text.complete(event.final_output);
        this.terminalSweep();
        this.runs.finish({ status: "completed", finalOutput: event.final_output, turnCount: event.turn_count, responseCount: event.response_count });
        return;
      case "run_cancelled":
        this.terminalSweep();
        this.runs.finish({ status: "cancelled" });
        return;
      case "error":
        if (event.scope === "run") {
          this.terminalSweep();
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
        this.terminalSweep();
        const waiters = this.resetWaiters;
        this.resetWaiters = [];
        for (const waiter of waiters) waiter.resolve();
        return;
      }
      case "shutdown":
        this.terminalSweep();
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
        if (!this.runs.refused(message, (run) => this.resend(run))) {
          this.notify.diagnostic({ kind: "command-rejected", message });
        }
        return;
      case "cancel":
        this.runs.stopWaiting(entry.op);
        entry.op.reject(new RunError(message, "command-refused"));
        return;
      case "reset":
        this.removeResetWaiter(entry.op);
        entry.op.reject(new RunError(message, "command-refused"));
        return;
      case "configure":
        entry.op.reject(new ConfigureError("unsupported", message));
        return;
    }
  }

  private removeResetWaiter(op: Deferred<void>): void {
    const index = this.resetWaiters.indexOf(op);
    if (index >= 0) this.resetWaiters.splice(index, 1);
  }

  // ---- native records --------------------------------------------------------

  private onRecord(record: NativeRunEvent): void {
    if (isNativeEvent(record, "model_stream")) return this.onModelEvent(record.payload.event);
    if (isNativeEvent(record, "tool_start")) {
      this.text.close();
      const call = toolCallInfo(record.payload);
      this.tools.set(call.callId, call);
      return this.emitTool({ phase: "start", call });
    }
    if (isNativeEvent(record, "tool_end")) {
      this.text.close();
      const payload = record.payload;
      const id = payload.tool_call.id;
      const call = this.tools.get(id) ?? toolCallInfo(payload);
      this.tools.delete(id);
      return this.emitTool({ phase: "end", call, ok: payload.ok, result: payload.result, error: payload.error });
    }
    this.text.flush();
    if (isNativeEvent(record, "agent_start")) {
      const info = agentInfo(record.payload);
      this.agents.set(info.taskId, info);
      return this.emitAgent({ phase: "start", info });
    }
    if (isNativeEvent(record, "agent_end")) {
      const payload = record.payload;
      const info = this.agents.get(payload.task_id) ?? agentInfo(payload);
      this.agents.delete(payload.task_id);
      return this.emitAgent({ phase: "end", info, finalOutput: payload.result === null ? undefined : payload.result.final_output });
    }
    if (isNativeEvent(record, "plan_updated")) {
      const update = planUpdate(record.payload);
      return this.notify.guard("onPlan", () => this.options.onPlan?.(update));
    }
    const approval = approvalRecord(record);
    if (approval?.status === "pending") this.approvals.request(approval);
    else if (approval) this.approvals.resolve(approval);
  }

  private onModelEvent(event: { kind: string; [key: string]: unknown }): void {
    if (event.kind === "text_delta" && typeof event.text === "string") {
      this.text.append("assistant", event.text);
    } else if (event.kind === "reasoning") {
      const value = event.text !== null ? event.text : event.reasoning;
      if (typeof value === "string") this.text.append("reasoning", value);
    } else {
      this.text.flush();
    }
  }

  private emitTool(activity: ToolActivity): void {
    this.notify.guard("onToolActivity", () => this.options.onToolActivity?.(activity));
  }

  private emitAgent(activity: AgentActivity): void {
    this.notify.guard("onAgentActivity", () => this.options.onAgentActivity?.(activity));
  }

  /** Terminal events: close text, cancel open tools and agents, close approvals. */
  private terminalSweep(): void {
    this.text.close();
    for (const call of this.tools.values()) this.emitTool({ phase: "cancelled", call });
    this.tools.clear();
    for (const info of this.agents.values()) this.emitAgent({ phase: "cancelled", info });
    this.agents.clear();
    this.approvals.closeAll();
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
    this.notify.guard("onConfigChanged", () => this.options.onConfigChanged?.(decoded.value));
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
    this.notify.diagnostic({ kind: "protocol", error, line });
    if (!this.readyInfo) {
      // Startup fails when the exit is seen.
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

  /** Runs once, whatever the cause (§9.5.4 teardown). */
  private teardown(close: SessionClose): void {
    if (this.lifecycle.closed) return;
    // Closed before ready by something other than the exit (a send failure):
    // startup fails as the exit would make it.
    this.failStartup("Backend exited before ready event.", "exited-before-ready", { kill: false });
    const wasOpen = this.readyInfo !== undefined;
    this.lifecycle.phase = { name: "closed", close, wasOpen };
    clearTimeout(this.readyTimer);
    this.terminalSweep();
    this.text.dispose();
    const error = new SessionClosedError(close);
    this.runs.rejectRun(error);
    for (const entry of this.commands.drain()) {
      if (entry.kind === "configure" || entry.kind === "cancel" || entry.kind === "reset") entry.op.reject(error);
    }
    this.runs.rejectCancelWaiters(error);
    for (const waiter of this.resetWaiters.splice(0)) waiter.reject(error);
    this.closedPromise.resolve();
    if (wasOpen) this.notify.guard("onClose", () => this.options.onClose?.(close));
  }

  /**
   * Writes a command and records it as waiting for its answer; forgets it
   * when it could not be written. An encoder refusal is thrown.
   */
  private sendTracked(entry: SentCommand, command: BridgeCommand): boolean {
    this.commands.push(entry);
    let sent = false;
    try {
      sent = this.channel.send(command);
    } finally {
      if (!sent) this.commands.forget(entry);
    }
    return sent;
  }

  // ---- the handle ------------------------------------------------------------

  get ready(): ReadyInfo {
    return this.readyInfo!;
  }

  get config(): TConfig | undefined {
    return this.configValue;
  }

  run(text: string): Promise<RunResult> {
    const closed = this.lifecycle.closed;
    if (closed) return Promise.reject(new SessionClosedError(closed));
    if (this.runs.active) return Promise.reject(new SessionStateError("A run is already active.", "run-active"));
    if (typeof text !== "string" || text.trim() === "") return Promise.reject(new SessionStateError("Prompt must not be empty.", "invalid-prompt"));
    const run = this.runs.begin(text);
    this.sendPrompt(run);
    return run.result.promise;
  }

  private sendPrompt(run: ActiveRun): void {
    try {
      this.sendTracked({ kind: "prompt" }, { type: "prompt", text: run.text });
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

  cancel(): Promise<void> {
    const closed = this.lifecycle.closed;
    if (closed) return Promise.reject(new SessionClosedError(closed));
    if (this.runs.abandonRetry() || !this.runs.active) return Promise.resolve();
    const op = deferred<void>();
    this.runs.waitForEnd(op);
    this.sendTracked({ kind: "cancel", op }, { type: "cancel" });
    return op.promise;
  }

  reset(): Promise<void> {
    const closed = this.lifecycle.closed;
    if (closed) return Promise.reject(new SessionClosedError(closed));
    this.runs.abandonRetry();
    const op = deferred<void>();
    this.resetWaiters.push(op);
    this.sendTracked({ kind: "reset", op }, { type: "reset" });
    return op.promise;
  }

  configure(patch: TConfigPatch): Promise<TConfig> {
    const closed = this.lifecycle.closed;
    if (closed) return Promise.reject(new SessionClosedError(closed));
    const copy = { ...(patch as Record<string, unknown>) };
    for (const [key, value] of Object.entries(copy)) {
      if (value === undefined) {
        return Promise.reject(new ConfigureError("invalid", `Configure patch value must not be undefined: ${key}.`));
      }
    }
    const op = deferred<unknown>();
    try {
      this.sendTracked({ kind: "configure", op }, { type: "configure", patch: copy as JsonObject });
    } catch (error) {
      // The encoder refused the patch (not a plain object, unpaired surrogate, too long).
      return Promise.reject(new ConfigureError("invalid", error instanceof Error ? error.message : String(error), { cause: error }));
    }
    return op.promise as Promise<TConfig>;
  }

  close(): Promise<void> {
    const phase = this.lifecycle.phase;
    if (phase.name === "closed") return Promise.resolve();
    if (phase.name !== "closing") {
      this.lifecycle.phase = { name: "closing" };
      this.commands.push({ kind: "shutdown" });
      this.channel.shutdown();
    }
    return this.closedPromise.promise;
  }

  /** The application's view: only the members of `AgentSession`. */
  private handle(): AgentSession<TConfig, TConfigPatch> {
    const session = this;
    return Object.freeze({
      get ready() {
        return session.ready;
      },
      get config() {
        return session.config;
      },
      run: (text: string) => session.run(text),
      cancel: () => session.cancel(),
      reset: () => session.reset(),
      configure: (patch: TConfigPatch) => session.configure(patch),
      close: () => session.close(),
    });
  }
}
