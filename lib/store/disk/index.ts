/**
 * The on-disk store: one directory, one JSON file per conversation.
 *
 * ```
 * <directory>/<stem>.json         the snapshot (agentlane's document, `revision` first)
 * <directory>/.<stem>.json.tmp    a save being written (a crash may leave it; the next save overwrites it)
 * <directory>/.locks/<stem>.lock  the conversation's lock file (empty, kept)
 * ```
 *
 * The files are the owner's only (0600, the directories it makes 0700): a
 * snapshot is a whole conversation.
 *
 * A save is atomic and durable: the text goes to the temporary file, which
 * is flushed (`fdatasync`), renamed over the snapshot and the directory
 * flushed, so a reader sees the old file or the new one, whole, whatever
 * happens when. The revision check and the write are one step across
 * processes: both happen under the conversation's lock (lock.ts). A load
 * takes no lock (a rename never shows a half-written file).
 */
import { mkdir, open, readdir, readFile, rename, unlink } from "node:fs/promises";
import { join } from "node:path";
import { checkMilliseconds } from "../../options";
import { checkConversationId, reportedError, requireRevision, revisionArguments, snapshotToSave, textToSave, untilAborted } from "../rules";
import type { SnapshotText } from "../snapshot-text";
import { LEADING_REVISION_CHARS, leadingRevision, parseSnapshot } from "../snapshot";
import type { ConversationStore, ConversationStores, RevisionOptions, Snapshot, StoreCallOptions } from "../types";
import { lockFile } from "./lock";
import { fileStem, idOfStem } from "./names";

/** `diskStore` options. */
export interface DiskStoreOptions {
  /** The directory of the snapshots (created, with its parents, at the first save). */
  directory: string;
  /** How long a save or delete waits for another writer of the same conversation (default 10 000 ms). */
  lockTimeoutMs?: number;
}

/** The on-disk store (`diskStore()`). */
export interface DiskStore extends ConversationStores {
  readonly directory: string;
  /** The ids of the conversations that have a snapshot file (in no particular order). */
  conversationIds(): Promise<string[]>;
}

const LOCKS = ".locks";
const SUFFIX = ".json";

function missing(error: unknown): boolean {
  return (error as NodeJS.ErrnoException)?.code === "ENOENT";
}

/** The stem of `id`, or `undefined` for an id the store could not have named. */
function stemOrNothing(id: string): string | undefined {
  try {
    return fileStem(checkConversationId(id));
  } catch {
    return undefined;
  }
}

/** Flushes a directory's entries (a rename or unlink in it); Windows cannot open a directory and needs none. */
async function syncDirectory(directory: string): Promise<void> {
  if (process.platform === "win32") return;
  const handle = await open(directory, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** The revision stored in `file`, or `null` when there is none (read from its first bytes when this store wrote it). */
async function revisionIn(file: string): Promise<number | null> {
  let head: string;
  try {
    const handle = await open(file, "r");
    try {
      const buffer = Buffer.alloc(LEADING_REVISION_CHARS);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      head = buffer.toString("latin1", 0, bytesRead);
    } finally {
      await handle.close();
    }
  } catch (error) {
    if (missing(error)) return null;
    throw error;
  }
  const revision = leadingRevision(head);
  if (revision !== undefined) return revision;
  const text = await readFile(file, "utf8").catch((error: unknown) => (missing(error) ? null : Promise.reject(error)));
  if (text === null) return null;
  try {
    return parseSnapshot(text).revision;
  } catch (cause) {
    throw new Error(`the stored snapshot ${file} cannot be read (${(cause as Error).message})`, { cause });
  }
}

/** Writes `text` to `file` through `temporary`: flushed, renamed, the directory flushed. */
async function replaceAtomically(directory: string, file: string, temporary: string, text: string): Promise<void> {
  // Owner only: a snapshot is a whole conversation.
  const handle = await open(temporary, "w", 0o600);
  try {
    await handle.writeFile(text, "utf8");
    await handle.datasync();
  } finally {
    await handle.close();
  }
  await rename(temporary, file);
  await syncDirectory(directory);
}

/** A store of snapshot files in `options.directory`. */
export function diskStore(options: DiskStoreOptions): DiskStore {
  const { directory } = options;
  if (typeof directory !== "string" || directory === "") throw new TypeError("diskStore needs a directory (a non-empty path).");
  checkMilliseconds("lockTimeoutMs", options.lockTimeoutMs);
  const lockTimeoutMs = options.lockTimeoutMs ?? 10_000;
  const locks = join(directory, LOCKS);
  /** Runs `step` holding the conversation's lock. */
  async function locked<T>(stem: string, signal: AbortSignal | undefined, step: () => Promise<T>): Promise<T> {
    // Each time (one cheap call): the folders may have been removed since the last save.
    await mkdir(locks, { recursive: true, mode: 0o700 });
    const lock = await lockFile(join(locks, `${stem}.lock`), lockTimeoutMs, signal);
    try {
      return await step();
    } finally {
      lock.release();
    }
  }

  return {
    directory,
    async conversationIds(): Promise<string[]> {
      const names = await readdir(directory).catch((error: unknown) => (missing(error) ? [] : Promise.reject(error)));
      // Only the files this store names: another file in the folder is not a conversation.
      return names.flatMap((name) => {
        const id = name.endsWith(SUFFIX) ? idOfStem(name.slice(0, -SUFFIX.length)) : undefined;
        return id !== undefined && `${stemOrNothing(id)}${SUFFIX}` === name ? [id] : [];
      });
    },
    conversation(id: string): ConversationStore {
      checkConversationId(id);
      const stem = fileStem(id);
      const file = join(directory, `${stem}${SUFFIX}`);
      const temporary = join(directory, `.${stem}${SUFFIX}.tmp`);
      /** The revision check and the write, under the conversation's lock. */
      async function write(text: string, expected: number | null, signal: AbortSignal | undefined): Promise<void> {
        try {
          await locked(stem, signal, async () => {
            requireRevision("save", id, expected, await revisionIn(file));
            // The last moment to give up: from here the save completes.
            signal?.throwIfAborted();
            await replaceAtomically(directory, file, temporary, text);
          });
        } catch (error) {
          throw reportedError(error, "save", id, signal);
        }
      }
      return {
        async load(callOptions?: StoreCallOptions): Promise<Snapshot | null> {
          const signal = callOptions?.signal;
          try {
            const text = await untilAborted(readFile(file, "utf8"), signal);
            return parseSnapshot(text);
          } catch (error) {
            if (missing(error)) return null;
            throw reportedError(error, "load", id, signal);
          }
        },
        async save(snapshot: Snapshot, callOptions: RevisionOptions): Promise<void> {
          const { expected, signal } = revisionArguments(callOptions);
          await write(snapshotToSave(snapshot, expected), expected, signal);
        },
        async saveText(snapshot: SnapshotText, callOptions: RevisionOptions): Promise<void> {
          const { expected, signal } = revisionArguments(callOptions);
          await write(textToSave(snapshot, expected), expected, signal);
        },
        async delete(callOptions: RevisionOptions): Promise<void> {
          const { expected, signal } = revisionArguments(callOptions);
          try {
            await locked(stem, signal, async () => {
              const actual = await revisionIn(file);
              requireRevision("delete", id, expected, actual);
              if (actual === null) return;
              signal?.throwIfAborted();
              await unlink(file);
              await syncDirectory(directory);
            });
          } catch (error) {
            throw reportedError(error, "delete", id, signal);
          }
        },
      };
    },
  };
}
