/**
 * Value types of the session layer (docs/protocol.md §9.5.3); its error classes
 * are in `lib/errors.ts`.
 */
import type { BridgeDecodeError, BridgeReadError, WarmUnavailableReason } from "../errors";
import type {
  ApprovalRequestPayload,
  BridgeEvent,
  ConfigErrorCode,
  JsonObject,
  JsonValue,
  ToolErrorPayload,
} from "../protocol";
import type { BackendProcess, BackendSpec } from "../process";
import type { AttachOptions } from "./attach";
import type { FlightRecord, FlightRecorderOptions } from "./flight-recorder";
import type { SessionUpdate } from "./stream";
import type { HostChannelDiagnostic } from "../tools/server";
import type { HostChannelSessionOptions } from "../tools/types";

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
  /** A line on the host channel (docs/host-channel.md §5) was not taken: nothing else is affected. */
  | HostChannelDiagnostic
  /** `flightRecord`: the session's last lines, when its flight recorder is on. */
  | { kind: "protocol"; error: BridgeDecodeError; line: string; flightRecord?: readonly FlightRecord[] }
  /** With `strayStdout: "tolerate"`: a stdout line that is not a bridge event was skipped. */
  | { kind: "stray-line"; head: string; error: BridgeDecodeError }
  | { kind: "stderr"; line: string }
  /** Reading the backend's stdout or stderr failed (stdout: the session closes). */
  | { kind: "read-failed"; error: BridgeReadError }
  | { kind: "send-failed"; message: string }
  /** A command was not written: the backend is not reading its stdin (its buffer is over `maxStdinBufferBytes`). */
  | { kind: "backpressure"; command: string; bufferedBytes: number }
  /** The backend closed its stdout but kept running: the session closes. */
  | { kind: "stdout-closed"; message: string }
  /** A run lasted longer than its timeout: the session cancelled it. */
  | { kind: "run-timeout"; timeoutMs: number }
  /** No event came for `idleMs` during a run (with `onStall: "cancel"`, the session cancelled it). */
  | { kind: "stalled"; idleMs: number }
  /** A cancel was not carried out within `cancelTimeoutMs`, or a reset or configure not answered within `commandTimeoutMs`: the session closes. */
  | { kind: "unresponsive"; message: string }
  | { kind: "command-rejected"; message: string }
  | { kind: "handler-error"; handler: string; error: unknown }
  /**
   * A warm start (docs/prefork.md): it was not possible and the backend
   * started cold (`fallback`, `reason` says why), the prefork server ended
   * while the conversation ran, which ends it too (`server-exited`), or
   * this start made a new prefork server while one for the same app runs
   * under another key (`new-server`: the message says what differs, e.g.
   * which environment variables).
   */
  | { kind: "warm"; event: "fallback" | "server-exited" | "new-server"; reason: WarmUnavailableReason | null; message: string }
  /**
   * Once per session, at its start: with `supervise: "auto"`, this
   * platform's package should ship the native supervisor and does not
   * (`code` `ENOENT`: missing, `EACCES`: not executable), so the backend
   * runs grouped (`process.mode`); `path` is where it should be.
   */
  | { kind: "supervisor-missing"; code: "ENOENT" | "EACCES"; path: string; message: string };

export type SessionClose =
  | { reason: "shutdown"; code: number | null; signal: string | null }
  /** `stderrTail`: the backend's last stderr lines, when it exited abnormally and wrote some. */
  | { reason: "exit"; code: number | null; signal: string | null; stderrTail?: string[] }
  | { reason: "protocol-error"; error: BridgeDecodeError; code: number | null; signal: string | null }
  /** Reading the backend's stdout failed: no more events can come. */
  | { reason: "read-failed"; error: BridgeReadError; code: number | null; signal: string | null }
  /**
   * Closed by the session itself, which then kills the backend: it closed
   * its stdout but kept running (`stdout-closed`), or did not carry out a
   * cancel within `cancelTimeoutMs` or answer a reset or configure within
   * `commandTimeoutMs` (`unresponsive`). `message` says which.
   */
  | { reason: "stdout-closed" | "unresponsive"; message: string; code: number | null; signal: string | null };

export type ConfigureErrorCode = ConfigErrorCode;

export interface AgentSessionOptions<TConfig = JsonObject, TConfigPatch = Partial<TConfig>> extends HostChannelSessionOptions {
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
  /**
   * Default 30000. Counts from the backend's start: a cold start's from
   * its spawn, once it has a start slot (the wait for one is not counted);
   * a warm start's from the call, the server's import included when its
   * server is not ready yet; an attached session's from the attach.
   */
  readyTimeoutMs?: number;
  /**
   * Calls the start off: until `ready`, aborting it rejects the start with
   * `SessionStartError` `aborted` (`cause`: the signal's reason), whether
   * it waits for a start slot (it leaves the queue) or has started (what
   * started is killed, as a ready timeout kills it; an attached process
   * through its `kill`). Once the session is ready, it has no effect.
   */
  signal?: AbortSignal;
  /** Passed to the channel as `graceMs`; default 1500. */
  shutdownGraceMs?: number;
  /** After SIGTERM (at the end of the shutdown grace), how long the backend's processes get before SIGKILL; default 500. */
  termGraceMs?: number;
  /** A command is refused with `SessionStateError` (`stdin-full`) while more than this many bytes wait to be written to the backend's stdin; default 16 MiB. */
  maxStdinBufferBytes?: number;
  /** Every run that has not ended after this long is cancelled (a `run-timeout` diagnostic); default none. `run(text, { timeoutMs })` overrides it. */
  runTimeoutMs?: number;
  /** During a run, no event for this long is a `stalled` diagnostic (once per silence); default none. */
  idleTimeoutMs?: number;
  /** What a stall does besides the diagnostic: `"report"` (default) or `"cancel"` the run. */
  onStall?: "report" | "cancel";
  /** A cancel the backend does not carry out within this long closes the session (an `unresponsive` diagnostic); default 10000. */
  cancelTimeoutMs?: number;
  /**
   * A reset or configure the backend does not answer within this long
   * closes the session (an `unresponsive` diagnostic; what waits rejects
   * with `SessionClosedError`); default 10000. A reset sent during a run
   * is answered once the backend has ended the run.
   */
  commandTimeoutMs?: number;
  /**
   * Keep the last protocol lines, commands and stderr lines (bounded), and
   * attach them to `SessionClosedError.flightRecord` and protocol
   * diagnostics. Off by default: they can hold secrets.
   */
  flightRecorder?: boolean | FlightRecorderOptions;
  /**
   * `"fail"` (default, as the reference): an undecodable stdout line closes
   * the session. `"tolerate"`: a line that is not a bridge event at all
   * (text, or JSON without a `protocol_version`: what a tool's subprocess
   * printing to fd 1 writes) becomes a `stray-line` diagnostic and the
   * session goes on; a line that claims to be an event and is wrong is
   * still fatal.
   */
  strayStdout?: "fail" | "tolerate";
  /** Default `"coalesced"`. */
  textDelivery?: "coalesced" | "immediate";
  /** @internal type anchor for the patch type. */
  readonly __patch?: TConfigPatch;
}

/** Options of `attachAgentSession`: the session's (without `backend`) and the attached process's. */
export type AttachSessionOptions<TConfig = JsonObject, TConfigPatch = Partial<TConfig>> = Omit<AgentSessionOptions<TConfig, TConfigPatch>, "backend"> &
  AttachOptions & {
    /**
     * The host's end of the host channel (a `net.Socket`, e.g. `child.stdio[4]` of a child spawned with
     * `stdio: ["pipe", "pipe", "pipe", "ignore", "pipe"]` and `AGENTLANE_HOST_CHANNEL_FD=4`): needed for `tools` and `store`.
     */
    hostChannel?: import("../tools/server").HostChannelEnd;
  };

/** Options of `run()`. */
export interface RunOptions {
  /** Aborting it cancels the run (`cancel` is sent); the run then settles as a cancelled run does. */
  signal?: AbortSignal;
  /** This run is cancelled if it has not ended after this long (overrides `runTimeoutMs`). */
  timeoutMs?: number;
  /** The idle watchdog for this run (overrides `idleTimeoutMs`). */
  idleTimeoutMs?: number;
}

/** Options of `cancel()`, `reset()` and `configure()`. */
export interface OperationOptions {
  /** Aborting it stops the waiting: the promise rejects with the signal's reason (the command, once sent, still runs in the backend). */
  signal?: AbortSignal;
}

export interface AgentSession<TConfig = JsonObject, TConfigPatch = Partial<TConfig>> {
  readonly ready: ReadyInfo;
  /** Latest decoded config document, or `undefined` if the backend announced none. */
  readonly config: TConfig | undefined;
  /** The backend's processes: pid, process group, supervisor (see `spawnBridgeProcess`). */
  readonly process: BackendProcess | undefined;
  /** Bytes waiting to be written to the backend's stdin (it is not reading when this grows). */
  readonly bufferedInputBytes: number;
  /** The flight recorder's lines so far (`flightRecorder` option), or `undefined` when it is off. */
  readonly flightRecord: readonly FlightRecord[] | undefined;
  run(text: string, options?: RunOptions): Promise<RunResult>;
  /**
   * The same run as an async iterable of its updates (text, reasoning,
   * tools, agents, plans, approvals, and last the result). Not pulling is
   * the backpressure: the backend is made to wait. Leaving the loop early
   * cancels the run; a failed run ends the loop with its error.
   */
  stream(text: string, options?: RunOptions): AsyncIterableIterator<SessionUpdate>;
  /** `await using session = await createAgentSession(…)` closes it at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void>;
  cancel(options?: OperationOptions): Promise<void>;
  reset(options?: OperationOptions): Promise<void>;
  configure(patch: TConfigPatch, options?: OperationOptions): Promise<TConfig>;
  /** Idempotent; never rejects. */
  close(): Promise<void>;
  /**
   * The conversation's last committed state (the snapshot the store saved after the last successful run,
   * or the one it loaded at the start), for `createAgentSession({ resume })`; `null` without a store or
   * before anything was committed. A copy: changing it changes nothing.
   */
  snapshot(): import("../store/types").Snapshot | null;
}
