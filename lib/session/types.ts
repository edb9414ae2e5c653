/**
 * Value types of the session layer (docs/protocol.md §9.5.3); its error classes
 * are in `lib/errors.ts`.
 */
import type { BridgeDecodeError, BridgeReadError } from "../errors";
import type {
  ApprovalRequestPayload,
  BridgeEvent,
  ConfigErrorCode,
  JsonObject,
  JsonValue,
  ToolErrorPayload,
} from "../protocol";
import type { BackendSpec } from "../process";

/** A piece of assistant or reasoning text (§9.5.4, text segmentation). */
export interface TextChunk {
  /** Text added since the previous chunk of this segment (may be `""` on the last). */
  delta: string;
  /** The whole segment so far. */
  text: string;
  /** Per-session counter from 1, shared by assistant and reasoning segments. */
  segment: number;
  /** True on the last chunk of a segment, exactly once per segment. */
  done: boolean;
}

export interface ToolCallInfo {
  /** The wire `tool_call.id`, as given. */
  callId: string;
  /** `tool_call.function.name`. */
  tool: string;
  /** `task_name` of the agent that called it. */
  agent: string;
  taskId: string;
  /** `function.arguments` parsed as JSON, or the raw string if that fails. */
  arguments: unknown;
  /** The tool is `write_plan`. */
  isPlan: boolean;
  isDelegation: boolean;
}

export type ToolActivity =
  | { phase: "start"; call: ToolCallInfo }
  | { phase: "end"; call: ToolCallInfo; ok: boolean; result: JsonValue; error: ToolErrorPayload | null }
  | { phase: "cancelled"; call: ToolCallInfo };

export interface AgentInfo {
  agent: string;
  taskId: string;
  parentTaskId: string | null;
  isRoot: boolean;
}

export type AgentActivity =
  | { phase: "start"; info: AgentInfo }
  /** `finalOutput`: the `agent_end` result's `final_output`; `undefined` when the result is null. */
  | { phase: "end"; info: AgentInfo; finalOutput: JsonValue | undefined }
  | { phase: "cancelled"; info: AgentInfo };

export type PlanStepStatus = "pending" | "active" | "completed" | "blocked";

export interface PlanUpdate {
  agent: string;
  taskId: string;
  explanation: string | null;
  steps: { text: string; status: PlanStepStatus; rawStatus: string }[];
}

/** What an approval policy is asked. */
export interface ApprovalRequest {
  /** The record's ApprovalRequest object, as received. */
  request: ApprovalRequestPayload;
  /** The record's `approval_required_decision.reason`. */
  reason: string | null;
  /** Aborted when the approval no longer needs a decision (resolved, run ended, session closed). */
  signal: AbortSignal;
}

export type ApprovalDecision = boolean | { allowed: boolean; reason?: string };
export type ApprovalPolicy = (request: ApprovalRequest) => ApprovalDecision | Promise<ApprovalDecision>;

export interface ApprovalResolution {
  request: ApprovalRequestPayload;
  /** `final_decision.outcome === "allow"`. */
  allowed: boolean;
  /** `final_decision.reason`, or null. */
  reason: string | null;
  /** This session sent the decision for this id successfully. */
  decidedByApp: boolean;
}

export type RunResult =
  | { status: "completed"; finalOutput: JsonValue; turnCount: number; responseCount: number }
  | { status: "cancelled" };

export interface ReadyInfo {
  version: string;
  package: string;
  metadata: JsonObject;
}

export type SessionDiagnostic =
  | { kind: "protocol"; error: BridgeDecodeError; line: string }
  | { kind: "stderr"; line: string }
  /** Reading the backend's stdout or stderr failed (stdout: the session closes). */
  | { kind: "read-failed"; error: BridgeReadError }
  | { kind: "send-failed"; message: string }
  | { kind: "command-rejected"; message: string }
  | { kind: "handler-error"; handler: string; error: unknown };

export type SessionClose =
  | { reason: "shutdown"; code: number | null; signal: string | null }
  | { reason: "exit"; code: number | null; signal: string | null }
  | { reason: "protocol-error"; error: BridgeDecodeError; code: number | null; signal: string | null }
  /** Reading the backend's stdout failed: no more events can come. */
  | { reason: "read-failed"; error: BridgeReadError; code: number | null; signal: string | null };

export type ConfigureErrorCode = ConfigErrorCode;

export interface AgentSessionOptions<TConfig = JsonObject, TConfigPatch = Partial<TConfig>> {
  /** What to spawn (§9.4). */
  backend: BackendSpec;
  /** Decides pending approvals. Default: deny with `No approval policy configured.` */
  approvals?: ApprovalPolicy;
  onAssistantText?: (chunk: TextChunk) => void;
  onReasoningText?: (chunk: TextChunk) => void;
  onToolActivity?: (activity: ToolActivity) => void;
  onAgentActivity?: (activity: AgentActivity) => void;
  onPlan?: (plan: PlanUpdate) => void;
  onApprovalResolved?: (resolution: ApprovalResolution) => void;
  /** Config re-announcements after startup. */
  onConfigChanged?: (config: TConfig) => void;
  /** Every decoded event, in order, before semantic processing. */
  onEvent?: (event: BridgeEvent) => void;
  /** Exactly once when a started session ends. */
  onClose?: (close: SessionClose) => void;
  /** Default: print to the console error stream with prefix `[session]`. */
  onDiagnostic?: (diagnostic: SessionDiagnostic) => void;
  /** App-side validation of config documents; throwing is a protocol failure. */
  decodeConfig?: (raw: JsonObject) => TConfig;
  /** Default 30000. */
  readyTimeoutMs?: number;
  /** Passed to the channel as `graceMs`; default 1500. */
  shutdownGraceMs?: number;
  /** Default `"coalesced"`. */
  textDelivery?: "coalesced" | "immediate";
  /** @internal type anchor for the patch type. */
  readonly __patch?: TConfigPatch;
}

export interface AgentSession<TConfig = JsonObject, TConfigPatch = Partial<TConfig>> {
  readonly ready: ReadyInfo;
  /** Latest decoded config document, or `undefined` if the backend announced none. */
  readonly config: TConfig | undefined;
  run(text: string): Promise<RunResult>;
  cancel(): Promise<void>;
  reset(): Promise<void>;
  configure(patch: TConfigPatch): Promise<TConfig>;
  /** Idempotent; never rejects. */
  close(): Promise<void>;
}
