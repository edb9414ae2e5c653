/**
 * The session layer (PROTOCOL.md §9.5): `createAgentSession` owns a backend
 * child and turns the event stream into application callbacks and promises.
 *
 * Beyond the reference, where it is racy or leaves a hole (§12):
 * - a `run()` refused with `A run is already active.` (the backend frees its
 *   run slot only after writing the terminal event) is retried a few times,
 *   briefly, instead of failing: this session never has two runs, so that
 *   refusal can only be the race;
 * - `approve` commands that the backend handled without a visible answer
 *   (its resolved record is not written when a cancel, reset or run failure
 *   closes the stream at the same moment) are dropped from the command queue
 *   as soon as a later command is acknowledged, so they cannot capture a
 *   later command's error;
 * - pending approvals are settled (their signals aborted) on every terminal
 *   event, so nothing waits for a resolved record that will not come.
 */
import type { ChildProcess } from "node:child_process";
import { createBridgeChannel, type BridgeChannel } from "./channel";
import { BridgeDecodeError } from "./errors";
import { resolveBackendSpec, spawnBridgeProcess } from "./process";
import type {
  BridgeEvent,
  ConfigEvent,
  JsonObject,
  JsonValue,
  NativeApprovalRecord,
  NativeRunEvent,
  ToolCallPayload,
  ToolErrorPayload,
} from "./protocol";
import { TextSegmenter } from "./session-text";
import {
  ConfigureError,
  RunError,
  SessionClosedError,
  SessionStartError,
  SessionStateError,
  type AgentActivity,
  type AgentInfo,
  type AgentSession,
  type AgentSessionOptions,
  type ApprovalDecision,
  type PlanStepStatus,
  type ReadyInfo,
  type RunResult,
  type SessionClose,
  type SessionDiagnostic,
  type ToolActivity,
  type ToolCallInfo,
} from "./session-types";


/** How often, and how patiently, a prompt refused by the §12 race is resent. */
const RACE_RETRIES = 5;
const RACE_RETRY_MS = 15;

interface Deferred<T> {
  promise: Promise<T>;
  resolve(value: T): void;
  reject(error: unknown): void;
}

function deferred<T>(): Deferred<T> {
  let resolve!: (value: T) => void;
  let reject!: (error: unknown) => void;
  const promise = new Promise<T>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  return { promise, resolve, reject };
}

/** A sent command still waiting for its response (§8.11, §9.5.4). */
type Pending =
  | { kind: "prompt" }
  | { kind: "cancel"; op: Deferred<void> }
  | { kind: "reset"; op: Deferred<void> }
  | { kind: "configure"; op: Deferred<unknown> }
  | { kind: "approve"; id: string }
  | { kind: "shutdown" };

interface ActiveRun {
  text: string;
  result: Deferred<RunResult>;
  retries: number;
  /** Refused by the §12 race and waiting to be resent (nothing in flight). */
  retryTimer: ReturnType<typeof setTimeout> | undefined;
}

interface OpenApproval {
  record: NativeApprovalRecord;
  controller: AbortController;
  decidedByApp: boolean;
}

const PLAN_STATUS = new Map<string, PlanStepStatus>([
  ["completed", "completed"],
  ["blocked", "blocked"],
  ["in_progress", "active"],
  ["active", "active"],
]);

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
  private readyInfo: ReadyInfo | undefined;
  private configValue: TConfig | undefined;
  private readyTimer: ReturnType<typeof setTimeout> | undefined;
  private startFailed = false;
  /** A line failed to decode before `ready`: startup fails when the exit is seen. */
  private brokenBeforeReady = false;
  private closed: SessionClose | undefined;
  private readonly closedPromise = deferred<void>();
  private closeRequested = false;
  private backendAnnouncedShutdown = false;
  private readonly sent: Pending[] = [];
  private run_: ActiveRun | undefined;
  private cancelWaiters: Deferred<void>[] = [];
  private resetWaiters: Deferred<void>[] = [];
  private readonly approvals = new Map<string, OpenApproval>();
  private readonly tools = new Map<string, ToolCallInfo>();
  private readonly agents = new Map<string, AgentInfo>();
  private readonly text: TextSegmenter;

  constructor(private readonly options: AgentSessionOptions<TConfig, TConfigPatch>) {
    this.text = new TextSegmenter(options.textDelivery ?? "coalesced", (stream, chunk) =>
      this.guard(stream === "assistant" ? "onAssistantText" : "onReasoningText", () =>
        (stream === "assistant" ? options.onAssistantText : options.onReasoningText)?.(chunk),
      ),
    );
  }

  // ---- startup -------------------------------------------------------------

  start(): Promise<AgentSession<TConfig, TConfigPatch>> {
    let spec;
    try {
      spec = resolveBackendSpec(this.options.backend);
    } catch (error) {
      return Promise.reject(new SessionStartError(error instanceof Error ? error.message : String(error)));
    }
    this.child = spawnBridgeProcess(spec, {
      onEvent: (event) => this.onEvent(event),
      onDecodeError: (error, line) => this.protocolFailure(error, line),
      onStderr: (line) => this.diagnostic({ kind: "stderr", line }),
      onSpawnError: (error) => this.onSpawnError(error),
      onExit: (code, signal) => this.onExit(code, signal),
    });
    this.channel = createBridgeChannel(this.child, {
      graceMs: this.options.shutdownGraceMs ?? 1500,
      onSendError: (message) => {
        this.diagnostic({ kind: "send-failed", message });
        this.teardown({ reason: "exit", code: null, signal: null });
        this.kill();
      },
    });
    this.readyTimer = setTimeout(() => this.failStartup("Timed out waiting for bridge ready event.", true), this.options.readyTimeoutMs ?? 30_000);
    return this.startup.promise;
  }

  private failStartup(message: string, kill: boolean): void {
    if (this.readyInfo || this.startFailed) return;
    this.startFailed = true;
    clearTimeout(this.readyTimer);
    if (kill) this.kill();
    this.startup.reject(new SessionStartError(message));
  }

  private onSpawnError(error: Error): void {
    if (!this.readyInfo) this.failStartup(error.message, true);
    else this.diagnostic({ kind: "send-failed", message: error.message });
  }

  private onExit(code: number | null, signal: string | null): void {
    if (!this.readyInfo) {
      this.failStartup("Backend exited before ready event.", false);
      this.teardown({ reason: "exit", code, signal });
      return;
    }
    const reason = this.closeRequested || this.backendAnnouncedShutdown ? "shutdown" : "exit";
    this.teardown({ reason, code, signal });
  }

  private kill(): void {
    try {
      this.child.kill("SIGKILL");
    } catch {
      // Already gone.
    }
  }

  // ---- events (§9.5.4, per-event processing order) -------------------------

  private onEvent(event: BridgeEvent): void {
    if (this.closed || this.startFailed || this.brokenBeforeReady) return;
    if (!this.readyInfo) {
      if (event.type !== "ready") {
        this.guard("onEvent", () => this.options.onEvent?.(event));
        return;
      }
      clearTimeout(this.readyTimer);
      if (event.config !== undefined) {
        const decoded = this.decodeConfig(event.config);
        if (!decoded.ok) {
          this.failStartup(decoded.error.message, true);
          this.teardown({ reason: "protocol-error", error: decoded.error, code: null, signal: null });
          return;
        }
        this.configValue = decoded.value;
      }
      this.readyInfo = { version: event.version, package: event.package, metadata: event.metadata ?? {} };
      this.startup.resolve(this.handle());
    }
    this.guard("onEvent", () => this.options.onEvent?.(event));
    if (this.closed) return;
    if (event.type === "config") {
      this.settleConfigure(event);
      return;
    }
    if (event.type === "reset" && event.config !== undefined) {
      if (!this.announceConfig(event.config)) return;
    }
    this.acknowledge(event);
    this.process(event);
  }

  /** Step 5: removes the command an event answers (§8.11). */
  private acknowledge(event: BridgeEvent): void {
    switch (event.type) {
      case "run_start":
        this.take("prompt");
        return;
      case "cancel_requested":
      case "cancel_ignored":
        this.take("cancel");
        return;
      case "reset":
        this.take("reset");
        return;
      case "shutdown":
        this.take("shutdown");
        return;
      case "run_event": {
        const record = approvalRecord(event.event);
        if (record?.status === "resolved") {
          const index = this.sent.findIndex((p) => p.kind === "approve" && p.id === record.request_id);
          if (index >= 0) this.sent.splice(index, 1);
        }
        return;
      }
    }
  }

  /**
   * Removes the oldest entry of a kind. `approve` entries older than it were
   * handled by the backend without an answer (an error would have come
   * first), so they go too.
   */
  private take(kind: Pending["kind"]): Pending | undefined {
    const index = this.sent.findIndex((p) => p.kind === kind);
    if (index < 0) return undefined;
    const [entry] = this.sent.splice(index, 1);
    for (let i = index - 1; i >= 0; i--) {
      if (this.sent[i].kind === "approve") this.sent.splice(i, 1);
    }
    return entry;
  }

  /** Step 6: semantic processing. */
  private process(event: BridgeEvent): void {
    switch (event.type) {
      case "run_event":
        return this.onRecord(event.event);
      case "run_complete": {
        if (typeof event.final_output === "string") this.text.complete(event.final_output);
        this.terminalSweep();
        this.finishRun({ status: "completed", finalOutput: event.final_output, turnCount: event.turn_count, responseCount: event.response_count });
        return this.resolveCancelWaiters();
      }
      case "run_cancelled":
        this.terminalSweep();
        this.finishRun({ status: "cancelled" });
        return this.resolveCancelWaiters();
      case "error":
        if (event.scope === "run") {
          this.terminalSweep();
          this.finishRun(new RunError(event.message));
          this.resolveCancelWaiters();
        } else {
          this.onCommandError(event.message);
        }
        return;
      case "cancel_requested":
      case "cancel_ignored":
        this.text.flush();
        if (!this.run_) this.resolveCancelWaiters();
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
        this.backendAnnouncedShutdown = true;
        return;
    }
  }

  private finishRun(outcome: RunResult | RunError): void {
    const run = this.run_;
    if (!run) return;
    this.run_ = undefined;
    if (outcome instanceof RunError) run.result.reject(outcome);
    else run.result.resolve(outcome);
  }

  private resolveCancelWaiters(): void {
    const waiters = this.cancelWaiters;
    this.cancelWaiters = [];
    for (const waiter of waiters) waiter.resolve();
  }

  /** A command-scoped error belongs to the oldest command still waiting (§8.11). */
  private onCommandError(message: string): void {
    const entry = this.sent.shift();
    switch (entry?.kind) {
      case undefined:
      case "approve":
      case "shutdown":
        return this.diagnostic({ kind: "command-rejected", message });
      case "prompt": {
        const run = this.run_;
        if (!run) return this.diagnostic({ kind: "command-rejected", message });
        if (message === "A run is already active." && run.retries < RACE_RETRIES) {
          // §12: the previous run's slot is freed just after its terminal
          // event. This session has no other run, so try again shortly.
          run.retries += 1;
          run.retryTimer = setTimeout(() => {
            run.retryTimer = undefined;
            if (this.run_ === run && !this.closed) this.sendPrompt(run);
          }, RACE_RETRY_MS * run.retries);
          return;
        }
        this.run_ = undefined;
        run.result.reject(new RunError(message));
        return;
      }
      case "cancel":
      case "reset":
        this.removeWaiter(entry.kind === "cancel" ? this.cancelWaiters : this.resetWaiters, entry.op);
        entry.op.reject(new RunError(message));
        return;
      case "configure":
        entry.op.reject(new ConfigureError("unsupported", message));
        return;
    }
  }

  private removeWaiter(waiters: Deferred<void>[], op: Deferred<void>): void {
    const index = waiters.indexOf(op);
    if (index >= 0) waiters.splice(index, 1);
  }

  // ---- native records --------------------------------------------------------

  private onRecord(record: NativeRunEvent): void {
    const payload = record.payload as Record<string, unknown>;
    switch (record.type) {
      case "model_stream":
        return this.onModelEvent(payload.event as Record<string, unknown>);
      case "tool_start": {
        this.text.close();
        const call = toolCallInfo(payload);
        this.tools.set(call.callId, call);
        return this.emitTool({ phase: "start", call });
      }
      case "tool_end": {
        this.text.close();
        const id = (payload.tool_call as ToolCallPayload).id;
        const call = this.tools.get(id) ?? toolCallInfo(payload);
        this.tools.delete(id);
        return this.emitTool({ phase: "end", call, ok: payload.ok as boolean, result: payload.result as JsonValue, error: payload.error as ToolErrorPayload | null });
      }
      case "agent_start": {
        this.text.flush();
        const info = agentInfo(payload);
        this.agents.set(info.taskId, info);
        return this.emitAgent({ phase: "start", info });
      }
      case "agent_end": {
        this.text.flush();
        const taskId = payload.task_id as string;
        const info = this.agents.get(taskId) ?? agentInfo(payload);
        this.agents.delete(taskId);
        const result = payload.result as { final_output: JsonValue } | null;
        return this.emitAgent({ phase: "end", info, finalOutput: result === null ? undefined : result.final_output });
      }
      case "plan_updated": {
        this.text.flush();
        const plan = payload.plan as { step: string; status: string }[];
        const update = {
          agent: payload.task_name as string,
          taskId: payload.task_id as string,
          explanation: payload.explanation as string | null,
          steps: plan.map((s) => ({ text: s.step, status: PLAN_STATUS.get(s.status) ?? "pending", rawStatus: s.status })),
        };
        return this.guard("onPlan", () => this.options.onPlan?.(update));
      }
      case "tool_approval": {
        this.text.flush();
        const approval = approvalRecord(record)!;
        if (approval.status === "pending") this.startApproval(approval);
        else this.finishApproval(approval);
        return;
      }
      default:
        this.text.flush();
    }
  }

  private onModelEvent(event: Record<string, unknown>): void {
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
    this.guard("onToolActivity", () => this.options.onToolActivity?.(activity));
  }

  private emitAgent(activity: AgentActivity): void {
    this.guard("onAgentActivity", () => this.options.onAgentActivity?.(activity));
  }

  // ---- approvals -------------------------------------------------------------

  private startApproval(record: NativeApprovalRecord): void {
    const controller = new AbortController();
    const approval: OpenApproval = { record, controller, decidedByApp: false };
    this.approvals.set(record.request_id, approval);
    const policy = this.options.approvals ?? (() => ({ allowed: false, reason: "No approval policy configured." }));
    // Asynchronously: never inside the event dispatch.
    void Promise.resolve()
      .then(() => policy({ request: record.request, reason: record.approval_required_decision.reason, signal: controller.signal }))
      .then(
        (decision) => this.decide(approval, decision),
        (error) => {
          this.diagnostic({ kind: "handler-error", handler: "approvals", error });
          this.decide(approval, { allowed: false, reason: "Approval policy failed." });
        },
      );
  }

  private decide(approval: OpenApproval, decision: ApprovalDecision): void {
    const id = approval.record.request_id;
    if (this.closed || this.approvals.get(id) !== approval || approval.controller.signal.aborted) return;
    const normalized = typeof decision === "boolean" ? { allowed: decision, reason: undefined } : decision;
    const valid =
      normalized !== null &&
      typeof normalized === "object" &&
      typeof normalized.allowed === "boolean" &&
      (normalized.reason === undefined || typeof normalized.reason === "string");
    if (!valid) {
      this.diagnostic({ kind: "handler-error", handler: "approvals", error: new TypeError(`Not an approval decision: ${String(decision)}`) });
      return this.decide(approval, { allowed: false, reason: "Approval policy failed." });
    }
    const { allowed, reason } = normalized;
    const entry: Pending = { kind: "approve", id };
    this.sent.push(entry);
    let sent: boolean;
    try {
      sent = this.channel.send(reason === undefined ? { type: "approve", id, allowed } : { type: "approve", id, allowed, reason });
    } catch (error) {
      // The encoder refused the decision (e.g. a reason with an unpaired
      // surrogate): report it and deny instead, so the tool call goes on.
      this.forget(entry);
      this.diagnostic({ kind: "handler-error", handler: "approvals", error });
      if (reason !== "Approval policy failed.") this.decide(approval, { allowed: false, reason: "Approval policy failed." });
      return;
    }
    if (sent) approval.decidedByApp = true;
    else this.forget(entry);
  }

  private finishApproval(record: NativeApprovalRecord): void {
    const approval = this.approvals.get(record.request_id);
    this.approvals.delete(record.request_id);
    approval?.controller.abort();
    const resolution = {
      request: record.request,
      allowed: record.final_decision?.outcome === "allow",
      reason: record.final_decision?.reason ?? null,
      decidedByApp: approval?.decidedByApp ?? false,
    };
    this.guard("onApprovalResolved", () => this.options.onApprovalResolved?.(resolution));
  }

  /** Terminal events: close text, cancel open tools and agents, abort approvals. */
  private terminalSweep(): void {
    this.text.close();
    for (const call of this.tools.values()) this.emitTool({ phase: "cancelled", call });
    this.tools.clear();
    for (const info of this.agents.values()) this.emitAgent({ phase: "cancelled", info });
    this.agents.clear();
    for (const approval of this.approvals.values()) approval.controller.abort();
    this.approvals.clear();
  }

  // ---- config ----------------------------------------------------------------

  private decodeConfig(raw: JsonObject): { ok: true; value: TConfig } | { ok: false; error: BridgeDecodeError } {
    try {
      return { ok: true, value: this.options.decodeConfig ? this.options.decodeConfig(raw) : (raw as TConfig) };
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      return { ok: false, error: new BridgeDecodeError(`Invalid runtime config document: ${message}`, ["config"]) };
    }
  }

  /** Caches an announced document and tells the app; false if it failed to decode (session closed). */
  private announceConfig(raw: JsonObject): boolean {
    const decoded = this.decodeConfig(raw);
    if (!decoded.ok) {
      this.protocolFailure(decoded.error, "");
      return false;
    }
    this.configValue = decoded.value;
    this.guard("onConfigChanged", () => this.options.onConfigChanged?.(decoded.value));
    return true;
  }

  private settleConfigure(event: ConfigEvent): void {
    const entry = this.take("configure") as Extract<Pending, { kind: "configure" }> | undefined;
    if (!entry) {
      this.protocolFailure(new BridgeDecodeError("Unexpected config event without pending configure.", ["type"]), "");
      return;
    }
    if (event.ok) {
      if (event.config === null) {
        this.protocolFailure(new BridgeDecodeError("Successful config event did not include config.", ["config"]), "");
        return entry.op.reject(new SessionClosedError(this.closed!));
      }
      if (!this.announceConfig(event.config)) return entry.op.reject(new SessionClosedError(this.closed!));
      entry.op.resolve(this.configValue);
      return;
    }
    if (event.error === null) {
      this.protocolFailure(new BridgeDecodeError("Failed config event did not include error.", ["error"]), "");
      return entry.op.reject(new SessionClosedError(this.closed!));
    }
    if (event.config !== null && !this.announceConfig(event.config)) return entry.op.reject(new SessionClosedError(this.closed!));
    entry.op.reject(new ConfigureError(event.error.code, event.error.message));
  }

  // ---- failures, diagnostics, teardown -----------------------------------------

  /** A decode error or a session protocol failure: close and SIGKILL (§7.4). */
  private protocolFailure(error: BridgeDecodeError, line: string): void {
    if (this.closed || this.startFailed || this.brokenBeforeReady) return;
    this.diagnostic({ kind: "protocol", error, line });
    if (!this.readyInfo) {
      // Startup fails when the exit is seen.
      this.brokenBeforeReady = true;
      this.kill();
      return;
    }
    this.teardown({ reason: "protocol-error", error, code: null, signal: null });
    this.kill();
  }

  private diagnostic(diagnostic: SessionDiagnostic): void {
    const sink = this.options.onDiagnostic ?? defaultDiagnostic;
    try {
      sink(diagnostic);
    } catch (error) {
      console.error("[session] onDiagnostic threw:", error);
    }
  }

  /** Calls an application callback; an exception becomes a diagnostic. */
  private guard(handler: string, call: () => void): void {
    try {
      call();
    } catch (error) {
      this.diagnostic({ kind: "handler-error", handler, error });
    }
  }

  /** Runs once, whatever the cause (§9.5.4 teardown). */
  private teardown(close: SessionClose): void {
    if (this.closed) return;
    this.closed = close;
    clearTimeout(this.readyTimer);
    this.terminalSweep();
    this.text.dispose();
    const error = new SessionClosedError(close);
    const run = this.run_;
    this.run_ = undefined;
    if (run?.retryTimer !== undefined) clearTimeout(run.retryTimer);
    run?.result.reject(error);
    for (const entry of this.sent.splice(0)) {
      if (entry.kind === "configure" || entry.kind === "cancel" || entry.kind === "reset") entry.op.reject(error);
    }
    for (const waiter of [...this.cancelWaiters.splice(0), ...this.resetWaiters.splice(0)]) waiter.reject(error);
    this.closedPromise.resolve();
    if (this.readyInfo) this.guard("onClose", () => this.options.onClose?.(close));
  }

  private forget(entry: Pending): void {
    const index = this.sent.indexOf(entry);
    if (index >= 0) this.sent.splice(index, 1);
  }

  // ---- the handle ------------------------------------------------------------

  get ready(): ReadyInfo {
    return this.readyInfo!;
  }

  get config(): TConfig | undefined {
    return this.configValue;
  }

  run(text: string): Promise<RunResult> {
    if (this.closed) return Promise.reject(new SessionClosedError(this.closed));
    if (this.run_) return Promise.reject(new SessionStateError("A run is already active."));
    if (typeof text !== "string" || text.trim() === "") return Promise.reject(new SessionStateError("Prompt must not be empty."));
    const run: ActiveRun = { text, result: deferred<RunResult>(), retries: 0, retryTimer: undefined };
    this.run_ = run;
    this.sendPrompt(run);
    return run.result.promise;
  }

  private sendPrompt(run: ActiveRun): void {
    const entry: Pending = { kind: "prompt" };
    this.sent.push(entry);
    try {
      if (!this.channel.send({ type: "prompt", text: run.text })) this.forget(entry);
    } catch (error) {
      // The encoder refused the prompt (an unpaired surrogate, or longer
      // than the backend's line limit): nothing was sent.
      this.forget(entry);
      if (this.run_ === run) this.run_ = undefined;
      run.result.reject(new SessionStateError(error instanceof Error ? error.message : String(error)));
    }
  }

  /**
   * A run refused by the §12 race and not yet resent has not started:
   * `cancel()` or `reset()` now ends it as cancelled instead of resending.
   */
  private abandonRetry(): boolean {
    const run = this.run_;
    if (!run || run.retryTimer === undefined) return false;
    clearTimeout(run.retryTimer);
    run.retryTimer = undefined;
    this.run_ = undefined;
    run.result.resolve({ status: "cancelled" });
    return true;
  }

  cancel(): Promise<void> {
    if (this.closed) return Promise.reject(new SessionClosedError(this.closed));
    if (this.abandonRetry() || !this.run_) return Promise.resolve();
    const op = deferred<void>();
    this.cancelWaiters.push(op);
    const entry: Pending = { kind: "cancel", op };
    this.sent.push(entry);
    if (!this.channel.send({ type: "cancel" })) this.forget(entry);
    return op.promise;
  }

  reset(): Promise<void> {
    if (this.closed) return Promise.reject(new SessionClosedError(this.closed));
    this.abandonRetry();
    const op = deferred<void>();
    this.resetWaiters.push(op);
    const entry: Pending = { kind: "reset", op };
    this.sent.push(entry);
    if (!this.channel.send({ type: "reset" })) this.forget(entry);
    return op.promise;
  }

  configure(patch: TConfigPatch): Promise<TConfig> {
    if (this.closed) return Promise.reject(new SessionClosedError(this.closed));
    const copy = { ...(patch as Record<string, unknown>) };
    for (const [key, value] of Object.entries(copy)) {
      if (value === undefined) {
        return Promise.reject(new ConfigureError("invalid", `Configure patch value must not be undefined: ${key}.`));
      }
    }
    const op = deferred<unknown>();
    const entry: Pending = { kind: "configure", op };
    this.sent.push(entry);
    try {
      if (!this.channel.send({ type: "configure", patch: copy as JsonObject })) this.forget(entry);
    } catch (error) {
      // The encoder refused the patch (not a plain object, unpaired surrogate, too long).
      this.forget(entry);
      return Promise.reject(new ConfigureError("invalid", error instanceof Error ? error.message : String(error)));
    }
    return op.promise as Promise<TConfig>;
  }

  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (!this.closeRequested) {
      this.closeRequested = true;
      const entry: Pending = { kind: "shutdown" };
      this.sent.push(entry);
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

function defaultDiagnostic(diagnostic: SessionDiagnostic): void {
  const detail =
    diagnostic.kind === "protocol"
      ? `${diagnostic.error.message}${diagnostic.line ? ` (line: ${diagnostic.line.slice(0, 200)})` : ""}`
      : diagnostic.kind === "handler-error"
        ? `${diagnostic.handler} threw: ${diagnostic.error instanceof Error ? diagnostic.error.message : String(diagnostic.error)}`
        : diagnostic.kind === "stderr"
          ? diagnostic.line
          : diagnostic.message;
  console.error(`[session] ${diagnostic.kind}: ${detail}`);
}

function approvalRecord(record: NativeRunEvent): NativeApprovalRecord | undefined {
  if (record.type !== "tool_approval") return undefined;
  const event = (record.payload as { event?: { record?: NativeApprovalRecord } }).event;
  return event?.record;
}

function toolCallInfo(payload: Record<string, unknown>): ToolCallInfo {
  const call = payload.tool_call as ToolCallPayload;
  let args: unknown;
  try {
    args = JSON.parse(call.function.arguments);
  } catch {
    args = call.function.arguments;
  }
  return {
    callId: call.id,
    tool: call.function.name,
    agent: payload.task_name as string,
    taskId: payload.task_id as string,
    arguments: args,
    isPlan: call.function.name === "write_plan",
    isDelegation: payload.is_delegation as boolean,
  };
}

function agentInfo(payload: Record<string, unknown>): AgentInfo {
  return {
    agent: payload.task_name as string,
    taskId: payload.task_id as string,
    parentTaskId: payload.parent_task_id as string | null,
    isRoot: payload.is_root as boolean,
  };
}
