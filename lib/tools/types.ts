/**
 * The application's own tools and store as a session takes them (issue 31,
 * docs/host-channel.md): what `createAgentSession({ tools, store })` and
 * `attachAgentSession` accept, and what a tool's handler is given.
 */
import type { JsonValue } from "../protocol";
import type { ConversationStore, Snapshot, SnapshotAgentId } from "../store/types";
import type { SnapshotText } from "../store/snapshot-text";

/** What a tool's handler is given beside its arguments. */
export interface HostToolContext {
  /** Aborted when the run is cancelled, the session closes, or the tool's timeout passes. */
  signal: AbortSignal;
  /** agentlane's id of this tool call (the `tool_start` record's), or `null`. */
  toolCallId: string | null;
  /** The run's id as agentlane names it, or `null`. */
  runId: string | null;
}

/**
 * A zod 4 schema, as far as the session needs to know it: converted with
 * zod's own `z.toJSONSchema` (its input side). zod is never imported by
 * this package; the schema object carries what is needed.
 */
export interface ZodLikeSchema {
  _zod: unknown;
}

/** One tool of the application's own. */
export interface HostTool<TArgs = any> {
  /** What the model reads to choose the tool. */
  description: string;
  /** A JSON Schema of the arguments (an object schema), or a zod 4 schema. */
  inputSchema: Record<string, unknown> | ZodLikeSchema;
  /**
   * Runs the tool on arguments that satisfy `inputSchema` (the host checked
   * them). Its result must be JSON (a string is what the model reads);
   * throwing gives the model a tool failure with the error's message, and
   * the run goes on.
   */
  handler(args: TArgs, context: HostToolContext): unknown;
  /** After this long the call fails with `timeout` and `signal` aborts; default the session's `toolTimeoutMs`. */
  timeoutMs?: number;
  /** Ask the session's `approvals` policy first (a denial is a tool failure the model reads). */
  needsApproval?: boolean;
}

/** The tools of a conversation, by the name the model calls them. */
export type HostTools = Record<string, HostTool>;

/** The session's host-channel options (shared by `createAgentSession` and `attachAgentSession`). */
export interface HostChannelSessionOptions {
  /** The application's own tools; the backend's factory must add `host.tools()` (start fails with `tools-not-taken` otherwise). */
  tools?: HostTools;
  /** A tool call's deadline unless the tool has its own; default 60000 (`0`: none). */
  toolTimeoutMs?: number;
  /** The conversation's store; the factory must pass `host.state_store()` (start fails with `store-not-taken` otherwise). */
  store?: ConversationStore;
  /** A store operation's deadline; default 30000. */
  storeTimeoutMs?: number;
  /**
   * Continue the conversation of this snapshot (`session.snapshot()`'s, or one a store kept; an object,
   * its JSON text, or a `SnapshotText`). Checked before anything starts (`invalid-snapshot`); it becomes what `store` holds (an
   * empty one, or one holding this revision), or a store in memory when none is given.
   */
  resume?: Snapshot | SnapshotText | string;
  /** The agent a `resume` snapshot must belong to (its descriptor's name, and instance key if given): another's is `invalid-snapshot`. */
  resumeAgentId?: { type: string; key?: string } | SnapshotAgentId;
  /** The longest line taken from the backend on the host channel; default 256 MiB (the protocol's limit). */
  hostChannelMaxLineBytes?: number;
}

/** What a tool result is, once checked. */
export type HostToolResult = JsonValue;
