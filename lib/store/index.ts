/**
 * Conversation stores: the interface a session plugs in, the snapshot
 * checks, and the ready stores that need nothing beyond this package (the
 * PostgreSQL store is its own entry, `./stores/postgres`, since it needs
 * the application's `pg`).
 */
export type {
  ConversationStore,
  ConversationStores,
  RevisionOptions,
  Snapshot,
  SnapshotAgentId,
  SnapshotMessage,
  SnapshotState,
  StoreCallOptions,
} from "./types";
export {
  checkSnapshot,
  parseSnapshot,
  snapshotAgentId,
  snapshotRevision,
  snapshotTurnCount,
  SNAPSHOT_SCHEMA_VERSION,
  type SnapshotCheckOptions,
} from "./snapshot";
export { snapshotText, SnapshotText } from "./snapshot-text";
export { memoryStore, type MemoryStore } from "./memory";
export { diskStore, type DiskStore, type DiskStoreOptions } from "./disk/index";
