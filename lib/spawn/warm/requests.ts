/**
 * The fork requests of one prefork server, as this host sends them: never
 * waiting for the server (docs/prefork.md §3), and watching that it keeps
 * serving them.
 *
 * A request the server has no room for (its channel is full: `busy`) waits
 * here, in order, and is sent again as the server makes room. The server
 * *makes progress* when a request it was sent is answered (its supervisor
 * says `started` or `failed`, or the control socket ends). A server that
 * makes none for `patienceMs` of a waiting request (3 s, or half that
 * start's ready timeout if less) is unresponsive: stopped (SIGSTOP, a
 * debugger) or hung. Its waiting starts are then given up at once (they
 * fall back cold or fail, `server-unresponsive`) instead of waiting out
 * their ready timeout, and the server is closed (`server.ts`).
 */
import type { WarmStartError } from "../../errors";
import type { NativeBinding } from "../../native";

type ForkRefusal = NonNullable<ReturnType<InstanceType<NativeBinding["PreforkServer"]>["fork"]>>;

/** How long a start waits for a server that makes no progress, at most. */
export const STALL_MS = 3000;

/** How often requests the server had no room for are tried again. */
const RETRY_MS = 25;

/** One fork request, from the start that makes it. */
export interface PendingFork {
  /** Sends the request: `null` once sent, else why not. */
  send(): ForkRefusal | null;
  /** The request will not be served (the server is closed, or unresponsive): the start falls back or fails. */
  giveUp(error: WarmStartError): void;
  /** How long this start waits for a server that makes no progress. */
  readonly patienceMs: number;
}

interface Entry {
  fork: PendingFork;
  /** When it started waiting on the server. */
  since: number;
  /** Called with the refusal when a retried send is refused for good. */
  refused: (refusal: ForkRefusal) => void;
}

export class ForkRequests {
  /** Refused `busy`: sent again, in order, once the server makes room. */
  private readonly queued: Entry[] = [];
  /** Sent, not yet answered. */
  private readonly sent = new Map<PendingFork, Entry>();
  private lastProgress = 0;
  private stallTimer: ReturnType<typeof setTimeout> | undefined;
  private retryTimer: ReturnType<typeof setTimeout> | undefined;

  /** `unresponsive`: the server made no progress within a waiting start's patience. */
  constructor(private readonly unresponsive: () => void) {}

  /**
   * Sends `fork` now, or queues it behind the ones the server had no room
   * for. `refused` is called if it cannot be sent after all (the server
   * refuses it for another reason than room).
   */
  submit(fork: PendingFork, refused: (refusal: ForkRefusal) => void): ForkRefusal | null {
    const entry: Entry = { fork, since: Date.now(), refused };
    if (this.queued.length === 0) {
      const refusal = fork.send();
      if (refusal === null) this.sent.set(fork, entry);
      else if (refusal.code !== "busy") return refusal;
      else this.queued.push(entry);
    } else {
      this.queued.push(entry);
    }
    this.schedule();
    return null;
  }

  /** A sent request was answered: the server makes progress. */
  answered(fork: PendingFork): void {
    if (!this.sent.delete(fork)) return;
    this.lastProgress = Date.now();
    this.sendQueued();
    this.schedule();
  }

  /** A start no longer waits (given up, or its backend runs). */
  withdraw(fork: PendingFork): void {
    this.sent.delete(fork);
    const at = this.queued.findIndex((entry) => entry.fork === fork);
    if (at >= 0) this.queued.splice(at, 1);
    this.schedule();
  }

  /** The starts waiting on the server (sent or queued). */
  get waiting(): number {
    return this.sent.size + this.queued.length;
  }

  /**
   * The server takes no more requests: the queued ones are given up with
   * `error` (and, `sent`, those it was sent and has not answered: it will
   * not, being unresponsive).
   */
  giveUpAll(error: WarmStartError, sent: boolean): void {
    this.stop();
    const given = [...this.queued.splice(0).map((entry) => entry.fork), ...(sent ? this.sent.keys() : [])];
    if (sent) this.sent.clear();
    for (const fork of given) fork.giveUp(error);
  }

  /** No more watching. */
  stop(): void {
    clearTimeout(this.stallTimer);
    clearTimeout(this.retryTimer);
    this.stallTimer = this.retryTimer = undefined;
  }

  /** Sends what was queued, in order, while the server takes it. */
  private sendQueued(): void {
    while (this.queued.length > 0) {
      const entry = this.queued[0];
      const refusal = entry.fork.send();
      if (refusal?.code === "busy") return;
      this.queued.shift();
      if (refusal === null) this.sent.set(entry.fork, entry);
      else entry.refused(refusal);
    }
  }

  /** The next check: a retry while requests are queued, a stall check while any waits. */
  private schedule(): void {
    clearTimeout(this.stallTimer);
    clearTimeout(this.retryTimer);
    this.stallTimer = this.retryTimer = undefined;
    if (this.queued.length > 0) {
      // A queued start is awaited: this timer keeps the host alive, as the
      // start's own channels will.
      this.retryTimer = setTimeout(() => {
        this.retryTimer = undefined;
        this.sendQueued();
        this.schedule();
      }, RETRY_MS);
    }
    const entries = [...this.sent.values(), ...this.queued];
    if (entries.length === 0) return;
    const due = Math.min(...entries.map((entry) => Math.max(this.lastProgress, entry.since) + entry.fork.patienceMs));
    this.stallTimer = setTimeout(() => {
      this.stallTimer = undefined;
      const now = Date.now();
      if ([...this.sent.values(), ...this.queued].some((entry) => now >= Math.max(this.lastProgress, entry.since) + entry.fork.patienceMs)) {
        this.stop();
        this.unresponsive();
      } else {
        this.schedule();
      }
    }, Math.max(0, due - Date.now()));
    this.stallTimer.unref();
  }
}
