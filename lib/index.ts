/**
 * @agentlanejs/process-bridge-native: the public API (docs/protocol.md §9).
 */
export {
  AgentSessionError,
  BridgeCommandError,
  BridgeDecodeError,
  BridgeReadError,
  ConfigureError,
  InvalidConversationIdError,
  InvalidOptionError,
  RunError,
  RuntimePermissionError,
  SessionClosedError,
  SessionStartError,
  SessionStateError,
  SnapshotError,
  StoreConflictError,
  StoreError,
  StoreFailedError,
  WarmStartError,
  type BridgeCommandErrorCode,
  type BridgeDecodeErrorCode,
  type RunErrorCode,
  type SessionStartErrorCode,
  type SessionStateErrorCode,
  type SnapshotErrorCode,
  type StoreOperation,
  type WarmUnavailableReason,
} from "./errors";
export * from "./store/index";
export {
  decodeBridgeEventLine,
  encodeBridgeCommand,
  isKnownEventType,
  isKnownModelEvent,
  isNativeEvent,
  isSupportedProtocolVersion,
  tryDecodeBridgeEventLine,
} from "./codec";
export * from "./protocol";
export {
  DEFAULT_MAX_LINE_BYTES,
  wireBridgeProcess,
  type BridgeProcessCallbacks,
  type BridgeWiring,
  type LineReaderOptions,
} from "./wiring";
export {
  resolveBackendSpec,
  spawnBridgeProcess,
  type BackendProcess,
  type BackendSpec,
  type BridgeProcessOptions,
  type ContainmentMode,
  type PythonBackendSpec,
} from "./process";
export { startBridgeProcess, type BridgeChild } from "./spawn/start";
export { closeWarmServers, prewarm, shareWarmServer, type SharedWarmServer, type WarmChild, type WarmHooks, type WarmServerInfo } from "./spawn/warm/index";
export type { StartMode } from "./spawn/containment";
export type { WarmOption, WarmOptions } from "./spawn/warm/options";
export {
  createBridgeChannel,
  type BridgeChannel,
  type BridgeChannelOptions,
  type BridgeChildLike,
  type BridgeScheduler,
} from "./channel";
export { attachAgentSession, createAgentSession } from "./session/index";
export { setMaxConcurrentStarts, startSlots } from "./session/start-slots";
export type { AgentProcessLike, AttachOptions } from "./session/attach";
export type { HostChannelSessionOptions, HostTool, HostToolContext, HostTools, ZodLikeSchema } from "./tools/types";
export { HostToolAbortError, type HostChannelDiagnostic, type HostChannelEnd } from "./tools/server";
export { checkBackend, type CheckOptions, type CheckReport } from "./check";
export type { HostToolCheck } from "./check-host-tool";
export type { FlightRecord, FlightRecorderOptions } from "./session/flight-recorder";
export type { SessionUpdate } from "./session/stream";
export {
  type AgentActivity,
  type AgentInfo,
  type AgentSession,
  type AgentSessionOptions,
  type AttachSessionOptions,
  type ApprovalDecision,
  type ApprovalPolicy,
  type ApprovalRequest,
  type ApprovalResolution,
  type ConfigureErrorCode,
  type OperationOptions,
  type RunOptions,
  type PlanStepStatus,
  type PlanUpdate,
  type ReadyInfo,
  type RunResult,
  type SessionClose,
  type SessionDiagnostic,
  type TextChunk,
  type ToolActivity,
  type ToolCallInfo,
} from "./session/types";
