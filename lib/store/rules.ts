/**
 * What every ready store checks the same way: the conversation id, the
 * arguments of `save` and `delete`, agentlane's revision rule, and an
 * aborted signal. Each store then only decides how the rule is made atomic
 * (one JavaScript turn, a file lock, one SQL statement).
 */
import { InvalidConversationIdError, InvalidOptionError, SnapshotError, StoreConflictError, StoreError, StoreFailedError, type StoreOperation } from "../errors";
import { checkSnapshot, encodeSnapshot } from "./snapshot";
import { SnapshotText } from "./snapshot-text";
import type { RevisionOptions, Snapshot } from "./types";

/** An unpaired UTF-16 surrogate. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** `id` if a store can hold it: a non-empty string without NUL or unpaired surrogates. */
export function checkConversationId(id: unknown): string {
  if (typeof id !== "string" || id === "") {
    throw new InvalidConversationIdError(`A conversation id must be a non-empty string, not ${typeof id === "string" ? '""' : String(id)}.`);
  }
  if (id.includes("\0")) throw new InvalidConversationIdError("A conversation id must not hold a NUL character.");
  if (LONE_SURROGATE.test(id)) throw new InvalidConversationIdError("A conversation id must not hold an unpaired surrogate (it has no UTF-8 form).");
  return id;
}

/**
 * The arguments of `save` and `delete`: rejects with the signal's reason
 * once it is aborted, and checks `expectedRevision` (`null` or a whole
 * number of at least 0, else `InvalidOptionError`).
 */
export function revisionArguments(options: RevisionOptions | undefined): { expected: number | null; signal: AbortSignal | undefined } {
  const { expectedRevision, signal } = options ?? ({} as Partial<RevisionOptions>);
  signal?.throwIfAborted();
  if (expectedRevision === null) return { expected: null, signal };
  if (typeof expectedRevision !== "number" || !Number.isSafeInteger(expectedRevision) || expectedRevision < 0) {
    throw new InvalidOptionError(
      `expectedRevision must be null (no snapshot stored) or a whole number of at least 0, not ${typeof expectedRevision === "number" ? expectedRevision : typeof expectedRevision}.`,
      "expectedRevision",
    );
  }
  return { expected: expectedRevision, signal };
}

/**
 * Checks what `save` was given and returns the text to store: the snapshot
 * must be one (`SnapshotError`), and its revision above `expectedRevision`
 * (agentlane's rule: `snapshot-revision-not-increasing`).
 */
export function snapshotToSave(snapshot: Snapshot, expectedRevision: number | null): string {
  checkSnapshot(snapshot);
  requireIncreasing(snapshot.revision, expectedRevision);
  return encodeSnapshot(snapshot);
}

/**
 * `snapshotToSave` for `saveText`: the snapshot was checked when it was
 * made (a `SnapshotText` is, else `TypeError`); its text is stored as it is.
 */
export function textToSave(snapshot: SnapshotText, expectedRevision: number | null): string {
  if (!(snapshot instanceof SnapshotText)) throw new TypeError("saveText needs a SnapshotText (snapshotText(document or text) makes one).");
  requireIncreasing(snapshot.revision, expectedRevision);
  return snapshot.text;
}

/** agentlane's rule: a save's revision is above the expected one (`snapshot-revision-not-increasing`). */
function requireIncreasing(revision: number, expectedRevision: number | null): void {
  if (expectedRevision !== null && revision <= expectedRevision) {
    throw new SnapshotError(
      `Snapshot refused (snapshot-revision-not-increasing): revision ${revision} must be greater than the expected revision ${expectedRevision}.`,
      "snapshot-revision-not-increasing",
      "revision",
    );
  }
}

/** Throws `StoreConflictError` unless the stored revision is the expected one. */
export function requireRevision(operation: "save" | "delete", conversationId: string, expected: number | null, actual: number | null): void {
  if (expected !== actual) throw new StoreConflictError(operation, conversationId, expected, actual);
}

/** `promise`, or the signal's reason as soon as it aborts (the work itself is not stopped). */
export function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) return promise;
  signal.throwIfAborted();
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}

/**
 * `error` as a store reports it: its own errors (conflicts, refused
 * snapshots) and the signal's reason as they are; anything else (the file
 * system's, the database's, a lock not had) as `store-failed`, with it as
 * `cause` and `hint` (when given) after its message.
 */
export function reportedError(error: unknown, operation: StoreOperation, id: string, signal: AbortSignal | undefined, hint?: string): unknown {
  if (error instanceof StoreError || error instanceof SnapshotError) return error;
  if (signal?.aborted === true && error === signal.reason) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new StoreFailedError(operation, id, hint === undefined ? message : `${message} (${hint})`, { cause: error });
}
