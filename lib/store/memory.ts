/**
 * The in-memory store: snapshots in this process's memory, for tests, for
 * one host that keeps its conversations across backend restarts (a crashed
 * backend resumes; a crashed host loses them), and as the reference every
 * other store's contract suite is measured against.
 *
 * Each conversation's snapshot is kept as its JSON text (`saveText` keeps
 * the backend's text as the session hands it, unparsed), so a loaded
 * snapshot is a fresh copy and a caller changing one it saved or loaded
 * changes nothing stored, exactly as with the disk and database stores.
 * Each call checks and decides within one JavaScript turn: that is its
 * atomicity.
 */
import { parseSnapshot, leadingRevision } from "./snapshot";
import { checkConversationId, requireRevision, revisionArguments, snapshotToSave, textToSave } from "./rules";
import type { SnapshotText } from "./snapshot-text";
import type { ConversationStore, ConversationStores, RevisionOptions, Snapshot, StoreCallOptions } from "./types";

/** The in-memory store (`memoryStore()`). */
export interface MemoryStore extends ConversationStores {
  /** The ids of the conversations that have a snapshot, in the order they were first saved. */
  conversationIds(): Promise<string[]>;
}

/** A new, empty in-memory store. */
export function memoryStore(): MemoryStore {
  const texts = new Map<string, string>();
  const revisionOf = (id: string): number | null => {
    const text = texts.get(id);
    return text === undefined ? null : (leadingRevision(text) ?? parseSnapshot(text).revision);
  };
  return {
    conversationIds: async () => [...texts.keys()],
    conversation(id: string): ConversationStore {
      checkConversationId(id);
      const put = (text: string, expected: number | null): void => {
        requireRevision("save", id, expected, revisionOf(id));
        texts.set(id, text);
      };
      return {
        async load(options?: StoreCallOptions): Promise<Snapshot | null> {
          options?.signal?.throwIfAborted();
          const text = texts.get(id);
          return text === undefined ? null : parseSnapshot(text);
        },
        async save(snapshot: Snapshot, options: RevisionOptions): Promise<void> {
          const { expected } = revisionArguments(options);
          put(snapshotToSave(snapshot, expected), expected);
        },
        async saveText(snapshot: SnapshotText, options: RevisionOptions): Promise<void> {
          const { expected } = revisionArguments(options);
          put(textToSave(snapshot, expected), expected);
        },
        async delete(options: RevisionOptions): Promise<void> {
          const { expected } = revisionArguments(options);
          requireRevision("delete", id, expected, revisionOf(id));
          texts.delete(id);
        },
      };
    },
  };
}
