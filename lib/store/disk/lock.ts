/**
 * The lock that makes a save or delete one step across processes: the
 * native `tryLockFile` (src/file_lock.rs: the kernel's advisory lock, let go
 * when its holder ends, even by SIGKILL), polled with a short backoff since
 * a blocking wait would hold one of libuv's few threads.
 */
import { native } from "../../native";

/** A held lock. */
export interface HeldLock {
  release(): void;
}

/** The lock was held by another writer for the whole time limit. */
export class LockTimeout extends Error {
  constructor(readonly timeoutMs: number) {
    super(`another writer held the conversation's lock for over ${timeoutMs} ms`);
    this.name = "LockTimeout";
  }
}

/** The longest pause between two attempts. */
const MAX_PAUSE_MS = 20;

function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Takes the lock of the file at `path` (its folder must exist), waiting at
 * most `timeoutMs` (`LockTimeout`) or until `signal` aborts (its reason).
 * An error opening the file is thrown as the addon reports it.
 */
export async function lockFile(path: string, timeoutMs: number, signal: AbortSignal | undefined): Promise<HeldLock> {
  const deadline = Date.now() + timeoutMs;
  for (let attempt = 0; ; attempt += 1) {
    signal?.throwIfAborted();
    const lock = native.tryLockFile(path);
    if (lock !== null) return lock;
    const left = deadline - Date.now();
    if (left <= 0) throw new LockTimeout(timeoutMs);
    await pause(Math.min(2 ** attempt, MAX_PAUSE_MS, left), signal);
  }
}
