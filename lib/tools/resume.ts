/**
 * `resume`: a session that continues a conversation from a snapshot
 * (issue 33). The snapshot is checked before anything starts (corrupted,
 * an unknown version, another agent's: `invalid-snapshot`), then becomes
 * what the session's store holds, so that the backend's factory loads it
 * through `host.state_store()` and every later run is saved on top of it:
 * into the application's `store` when it gave one (which must be empty, or
 * hold this very revision: anything else is `resume-conflict`, never an
 * overwrite), else into a store in this process's memory.
 */
import { SessionStartError, SnapshotError } from "../errors";
import { memoryStore } from "../store/memory";
import { snapshotText, type SnapshotText } from "../store/snapshot-text";
import type { ConversationStore, Snapshot } from "../store/types";
import type { HostChannelSessionOptions } from "./types";

/** The options with the snapshot put into the store, or the start's error. */
export async function resumeInto<T extends HostChannelSessionOptions>(options: T): Promise<T> {
  const given = options.resume;
  if (given === undefined) return options;
  let snapshot: SnapshotText;
  try {
    const check = options.resumeAgentId === undefined ? {} : { agentId: options.resumeAgentId };
    // Text is checked in Rust unparsed; a document is checked and encoded (so it is a copy).
    snapshot = snapshotText(given, check);
  } catch (error) {
    if (!(error instanceof SnapshotError)) throw error;
    throw new SessionStartError(`The snapshot to resume is refused: ${error.message}`, "invalid-snapshot", { cause: error });
  }
  const store: ConversationStore = options.store ?? memoryStore().conversation("resumed");
  let stored: Snapshot | null;
  try {
    stored = await store.load();
    if (stored === null) {
      const first = { expectedRevision: null };
      await (store.saveText === undefined ? store.save(snapshot.document, first) : store.saveText(snapshot, first));
    }
  } catch (error) {
    throw new SessionStartError(`The snapshot to resume could not be put into the store: ${(error as Error).message}`, "resume-conflict", { cause: error });
  }
  const { type, key } = snapshot.agentId;
  if (stored !== null && (stored.revision !== snapshot.revision || stored.agent_id.type !== type || stored.agent_id.key !== key)) {
    throw new SessionStartError(
      `The store already holds revision ${stored.revision} of agent ${stored.agent_id.type}/${stored.agent_id.key}, not the snapshot to resume ` +
        `(revision ${snapshot.revision} of ${type}/${key}): resume into an empty store, or without resume to continue what it holds.`,
      "resume-conflict",
    );
  }
  return { ...options, store, resume: undefined };
}
