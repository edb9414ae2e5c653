/**
 * The host side of agentlane's `StateStore` (`harness/_state_store.py`): the
 * snapshot document it saves and the store interface a session plugs in.
 *
 * The revision rules are agentlane's, exactly, so that the backend's
 * `load`/`save`/`delete` can be answered by any of these stores:
 * - `save(snapshot, { expectedRevision: null })` requires the store to be
 *   empty; with a number, the stored revision must equal it and
 *   `snapshot.revision` must be greater;
 * - `delete({ expectedRevision })`: the stored revision must equal it
 *   (`null`: the store must be empty, and then nothing happens).
 * A refused save or delete writes nothing and rejects with
 * `StoreConflictError` (`revision-conflict`); a store that fails rejects
 * with `StoreFailedError` (`store-failed`, the `cause` says why).
 */

import type { JsonValue } from "../protocol";
import type { SnapshotText } from "./snapshot-text";

/** agentlane's `AgentId` in JSON: the agent's type (its descriptor's name) and instance key. */
export interface SnapshotAgentId {
  type: string;
  key: string;
}

/** One message of the conversation as the model sees it (`role` and the provider's fields). */
export interface SnapshotMessage {
  role: string;
  [field: string]: JsonValue;
}

/** The committed run state inside a snapshot (agentlane's `_RunStatePayload`). */
export interface SnapshotState {
  instructions: string | null;
  history: SnapshotMessage[];
  /** The model's responses (OpenAI chat completions), one per model turn. */
  responses: Array<{ [field: string]: JsonValue }>;
  shim_state: { [key: string]: JsonValue };
  turn_count: number;
}

/**
 * agentlane's `AgentSnapshot` as JSON (`schema_version` 1): the whole
 * committed conversation of one agent. Fields agentlane ignores may be
 * present; stores keep them.
 */
export interface Snapshot {
  schema_version: 1;
  agent_id: SnapshotAgentId;
  /** The committed generation: 1 after the first successful run, one more after each. */
  revision: number;
  /** ISO 8601 with a time zone (agentlane writes UTC, `…Z`). */
  created_at: string;
  state: SnapshotState;
}

/** What every store call takes: an `AbortSignal` that gives up waiting (the call rejects with `signal.reason`). */
export interface StoreCallOptions {
  signal?: AbortSignal;
}

/** `save` and `delete`: the revision the caller believes is stored (`null`: none). */
export interface RevisionOptions extends StoreCallOptions {
  expectedRevision: number | null;
}

/**
 * The snapshot store of one conversation: what agentlane's `StateStore`
 * calls in the backend reach on the host. Each call is atomic: a save
 * replaces the whole snapshot or nothing.
 */
export interface ConversationStore {
  /** The stored snapshot, checked (`SnapshotError` when it is not one), or `null`. */
  load(options?: StoreCallOptions): Promise<Snapshot | null>;
  /** Stores `snapshot` if the stored revision is `expectedRevision` (see the module doc). */
  save(snapshot: Snapshot, options: RevisionOptions): Promise<void>;
  /**
   * Optional: `save` for a snapshot as checked JSON text (`snapshot.text`,
   * `revision` first). The session calls it for each committed run when
   * the store has it, else `save(snapshot.document)`: a store that keeps
   * text stores the backend's text without parsing or encoding it. Same
   * rules, same errors as `save`.
   */
  saveText?(snapshot: SnapshotText, options: RevisionOptions): Promise<void>;
  /** Removes the snapshot if the stored revision is `expectedRevision`. */
  delete(options: RevisionOptions): Promise<void>;
}

/**
 * A ready store: many conversations by id, each with its own snapshot.
 * `conversation(id)` is cheap and does no I/O; it throws
 * `InvalidConversationIdError` for an id the store cannot hold.
 */
export interface ConversationStores {
  conversation(id: string): ConversationStore;
}
