/**
 * Protocol constants and the types of every command, event and native record
 * (docs/protocol.md §3–§6, §9.1). The name lists come from the Rust core's schema
 * table, so there is one source of truth for what the decoder accepts.
 */
import { native } from "./native";

const tables = native.protocolTables();

/** The protocol version written on every command. */
export const PROTOCOL_VERSION = tables.protocolVersion as "1.0";
/** The event major version the host accepts. */
export const PROTOCOL_MAJOR = tables.protocolMajor as 1;

export type BridgeCommandType = "prompt" | "approve" | "cancel" | "configure" | "reset" | "shutdown";
export type BridgeEventType =
  | "ready"
  | "config"
  | "run_start"
  | "run_complete"
  | "run_cancelled"
  | "error"
  | "reset"
  | "cancel_requested"
  | "cancel_ignored"
  | "shutdown"
  | "run_event";

/** `prompt, approve, cancel, configure, reset, shutdown`. */
export const KNOWN_COMMAND_TYPES: readonly BridgeCommandType[] = Object.freeze(
  tables.commandTypes as BridgeCommandType[],
);
/** The 11 bridge event types, in reference order. */
export const KNOWN_EVENT_TYPES: readonly BridgeEventType[] = Object.freeze(tables.eventTypes as BridgeEventType[]);

export type NativeEventKind =
  | "model_stream"
  | "agent_start"
  | "agent_end"
  | "llm_start"
  | "llm_end"
  | "tool_start"
  | "tool_end"
  | "tool_approval"
  | "handoff_start"
  | "handoff_end"
  | "state_snapshot"
  | "plan_updated";

export type NativeModelEventKind =
  | "provider"
  | "text_delta"
  | "tool_call_arguments_delta"
  | "reasoning"
  | "completed"
  | "error";

/** The 12 native kinds the decoder checks, in reference order. */
export const KNOWN_NATIVE_EVENT_KINDS: readonly NativeEventKind[] = Object.freeze(
  tables.nativeKinds as NativeEventKind[],
);
/** The 6 model stream kinds whose 13 fields the decoder checks. */
export const KNOWN_MODEL_EVENT_KINDS: readonly NativeModelEventKind[] = Object.freeze(
  tables.modelKinds as NativeModelEventKind[],
);

// ---- JSON ---------------------------------------------------------------

export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

// ---- commands (§4) ---------------------------------------------------------

export interface PromptCommand {
  type: "prompt";
  text: string;
}
export interface ApproveCommand {
  type: "approve";
  /** The `request_id` of a pending approval record. */
  id: string;
  /** Only `true` grants. */
  allowed: boolean;
  reason?: string;
}
export interface ConfigureCommand {
  type: "configure";
  /** Opaque desired-state patch, owned by the application. */
  patch: JsonObject;
}
export interface CancelCommand {
  type: "cancel";
}
export interface ResetCommand {
  type: "reset";
}
export interface ShutdownCommand {
  type: "shutdown";
}
export type BridgeCommand =
  | PromptCommand
  | ApproveCommand
  | ConfigureCommand
  | CancelCommand
  | ResetCommand
  | ShutdownCommand;
export type VersionedBridgeCommand = BridgeCommand & { protocol_version: string };

// ---- bridge events (§5) ----------------------------------------------------

export interface BridgeEnvelope {
  protocol_version: string;
  /** Unix time in seconds, millisecond resolution. */
  ts: number;
}
export type ErrorScope = "command" | "run";
export type ConfigErrorCode = "invalid" | "unsupported" | "rejected" | "internal";
export interface ConfigErrorPayload {
  code: ConfigErrorCode;
  message: string;
}

export interface ReadyEvent extends BridgeEnvelope {
  type: "ready";
  version: string;
  package: string;
  metadata?: JsonObject;
  config?: JsonObject;
}
export interface ConfigEvent extends BridgeEnvelope {
  type: "config";
  ok: boolean;
  config: JsonObject | null;
  error: ConfigErrorPayload | null;
}
export interface RunStartEvent extends BridgeEnvelope {
  type: "run_start";
  prompt: string;
}
export interface RunCompleteEvent extends BridgeEnvelope {
  type: "run_complete";
  final_output: JsonValue;
  turn_count: number;
  response_count: number;
  shim_state: JsonObject;
}
export interface RunCancelledEvent extends BridgeEnvelope {
  type: "run_cancelled";
}
export interface ErrorEvent extends BridgeEnvelope {
  type: "error";
  message: string;
  scope: ErrorScope;
}
export interface ResetEvent extends BridgeEnvelope {
  type: "reset";
  config?: JsonObject;
}
export interface CancelRequestedEvent extends BridgeEnvelope {
  type: "cancel_requested";
}
export interface CancelIgnoredEvent extends BridgeEnvelope {
  type: "cancel_ignored";
  reason: string;
}
export interface ShutdownEvent extends BridgeEnvelope {
  type: "shutdown";
}
export interface RunEventEvent extends BridgeEnvelope {
  type: "run_event";
  event: NativeRunEvent;
}

export type BridgeEvent =
  | ReadyEvent
  | ConfigEvent
  | RunStartEvent
  | RunCompleteEvent
  | RunCancelledEvent
  | ErrorEvent
  | ResetEvent
  | CancelRequestedEvent
  | CancelIgnoredEvent
  | ShutdownEvent
  | RunEventEvent;
export type KnownBridgeEvent = BridgeEvent;
export type DecodedBridgeEvent = BridgeEvent;

// ---- native records (§6) ---------------------------------------------------

/** One AgentLane run event. Extra keys are kept at every level. */
export interface NativeRunEvent {
  type: string;
  payload: { [key: string]: unknown };
  [key: string]: unknown;
}

/** Native objects are open: extra keys are kept, whatever they hold. */
interface Open {
  [key: string]: unknown;
}

export interface Lineage {
  task_name: string;
  task_id: string;
  parent_task_id: string | null;
  is_root: boolean;
}
export interface ToolCallPayload extends Open {
  id: string;
  type: "function";
  function: { name: string; arguments: string } & Open;
}
export interface TokenUsage extends Open {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}
export interface ModelResponsePayload extends Open {
  id: string;
  choices: JsonObject[];
  created: number;
  model: string;
  object: "chat.completion";
  usage?: TokenUsage | null;
}
export interface RunResultPayload extends Open {
  final_output: JsonValue;
  responses: ModelResponsePayload[];
  turn_count: number;
  run_state: JsonObject | null;
}
export interface ToolErrorPayload extends Open {
  message: string;
  kind: string | null;
}
export interface ApprovalRequestPayload extends Open {
  tool_name: string;
  operation: string;
  cwd: string;
  path: string | null;
  command: string | null;
  skill_name: string | null;
  reason: string | null;
  run_id: string | null;
  agent_name: string | null;
  tool_call_id: string | null;
  metadata: JsonObject;
}
export interface ApprovalDecisionPayload extends Open {
  outcome: "allow" | "deny" | "require_approval";
  reason: string | null;
}
export interface NativeApprovalRecord extends Open {
  request_id: string;
  request: ApprovalRequestPayload;
  approval_required_decision: ApprovalDecisionPayload;
  status: "pending" | "resolved";
  final_decision: ApprovalDecisionPayload | null;
}
export interface PlanStepPayload extends Open {
  step: string;
  status: string;
}
export interface SnapshotPayload extends Open {
  turn_count: number;
  history_length: number;
  response_count: number;
  shim_state: JsonObject;
}
/** A model stream event of a known kind: all 13 keys present. */
export interface NativeModelEvent extends Open {
  kind: NativeModelEventKind;
  raw: JsonValue;
  provider_event_type: string | null;
  item_index: number | null;
  item_type: string | null;
  text: string | null;
  tool_call_id: string | null;
  tool_call_index: number | null;
  arguments_delta: string | null;
  reasoning: JsonValue;
  reasoning_signature: string | null;
  response: ModelResponsePayload | null;
  error: JsonObject | null;
}
/** A model stream event of any kind, as decoded. */
export interface AnyModelEvent extends Open {
  kind: string;
}

/** The payload of each known native kind. */
export interface NativePayloadMap {
  model_stream: { kind: "model_stream"; event: AnyModelEvent } & Open;
  agent_start: { kind: "agent_start" } & Lineage & Open;
  agent_end: { kind: "agent_end"; result: RunResultPayload | null } & Lineage & Open;
  llm_start: { kind: "llm_start"; messages: JsonObject[] } & Lineage & Open;
  llm_end: { kind: "llm_end"; response: ModelResponsePayload } & Lineage & Open;
  tool_start: { kind: "tool_start"; tool_call: ToolCallPayload; is_delegation: boolean } & Lineage & Open;
  tool_end: {
    kind: "tool_end";
    tool_call: ToolCallPayload;
    is_delegation: boolean;
    result: JsonValue;
    ok: boolean;
    error: ToolErrorPayload | null;
  } & Lineage &
    Open;
  tool_approval: { kind: "tool_approval"; event: { record: NativeApprovalRecord } & Open } & Open;
  handoff_start: { kind: "handoff_start"; tool_call: ToolCallPayload; target_name: string } & Lineage & Open;
  handoff_end: {
    kind: "handoff_end";
    tool_call: ToolCallPayload;
    target_name: string;
    result: RunResultPayload;
  } & Lineage &
    Open;
  state_snapshot: { kind: "state_snapshot"; boundary: string; snapshot: SnapshotPayload } & Open;
  plan_updated: {
    kind: "plan_updated";
    tool_call: ToolCallPayload;
    plan: PlanStepPayload[];
    explanation: string | null;
  } & Lineage &
    Open;
}
export type NativePayload<K extends NativeEventKind> = NativePayloadMap[K];
