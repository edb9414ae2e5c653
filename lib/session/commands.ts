/**
 * The commands sent and not yet answered, and the rules that match answers
 * to them (docs/protocol.md §8.11, §9.5.4, §12.3). The protocol has no
 * correlation ids: the backend handles commands one at a time, in order, so
 * an answer belongs to the oldest command still waiting for that kind of
 * answer, and a command-scoped `error` to the oldest command of all.
 */
import type { BridgeEvent } from "../protocol";
import type { Deferred } from "./deferred";
import { approvalRecord } from "./records";

/** A sent command still waiting for its response. */
export type SentCommand =
  | { kind: "prompt" }
  | { kind: "cancel"; op: Deferred<void> }
  | { kind: "reset"; op: Deferred<void>; sentAt: number; retries: number }
  | { kind: "configure"; op: Deferred<unknown> }
  | { kind: "approve"; id: string }
  | { kind: "shutdown" };

/** The queue of sent commands, oldest first. */
export class CommandQueue {
  private readonly sent: SentCommand[] = [];
  /** The deadlines of the commands that must be answered in time (`watch`). */
  private readonly deadlines = new Map<SentCommand, ReturnType<typeof setTimeout>>();

  /** Records a command about to be written. */
  push(entry: SentCommand): void {
    this.sent.push(entry);
  }

  /**
   * Calls `unanswered` if `entry` is still waiting for its answer (nothing
   * took it from the queue: no answer, no error, no teardown) after `ms`.
   * Tied to the command, not to its caller: a caller that stopped waiting
   * (its signal) leaves the backend owing the answer all the same.
   */
  watch(entry: SentCommand, ms: number, unanswered: () => void): void {
    if (!this.sent.includes(entry)) return;
    this.deadlines.set(
      entry,
      setTimeout(() => {
        this.deadlines.delete(entry);
        if (this.sent.includes(entry)) unanswered();
      }, ms),
    );
  }

  /** Removes a command that turned out not to be sent. */
  forget(entry: SentCommand): void {
    const index = this.sent.indexOf(entry);
    if (index >= 0) this.removeAt(index);
  }

  /** Removes the entry at `index` (and its deadline); returns it. */
  private removeAt(index: number): SentCommand {
    const [entry] = this.sent.splice(index, 1);
    clearTimeout(this.deadlines.get(entry));
    this.deadlines.delete(entry);
    return entry;
  }

  /** §9.5.4 step 5: removes the command an event answers, if any. */
  acknowledge(event: BridgeEvent): void {
    switch (event.type) {
      case "run_start":
        this.take("prompt");
        return;
      case "cancel_requested":
      case "cancel_ignored":
        this.take("cancel");
        return;
      case "reset":
        this.take("reset");
        return;
      case "shutdown":
        this.take("shutdown");
        return;
      case "run_event": {
        // A successful approve has no answer of its own: its resolved record is one.
        const record = approvalRecord(event.event);
        if (record?.status === "resolved") {
          const index = this.sent.findIndex((p) => p.kind === "approve" && p.id === record.request_id);
          if (index >= 0) this.removeAt(index);
        }
        return;
      }
    }
  }

  /**
   * Removes the oldest entry of a kind. `approve` entries older than it were
   * handled by the backend without an answer (an error would have come
   * first), so they go too (§12.3).
   */
  take<K extends SentCommand["kind"]>(kind: K): Extract<SentCommand, { kind: K }> | undefined {
    const index = this.sent.findIndex((p) => p.kind === kind);
    if (index < 0) return undefined;
    const entry = this.removeAt(index);
    for (let i = index - 1; i >= 0; i--) {
      if (this.sent[i].kind === "approve") this.removeAt(i);
    }
    return entry as Extract<SentCommand, { kind: K }>;
  }

  /** Whether a command of `kind` is waiting. */
  has(kind: SentCommand["kind"]): boolean {
    return this.sent.some((p) => p.kind === kind);
  }

  /** How many commands wait for an answer. */
  get size(): number {
    return this.sent.length;
  }

  /** A command-scoped error belongs to the oldest command still waiting (§8.11). */
  blame(): SentCommand | undefined {
    return this.sent.length > 0 ? this.removeAt(0) : undefined;
  }

  /** Empties the queue (teardown), returning what was waiting. */
  drain(): SentCommand[] {
    for (const timer of this.deadlines.values()) clearTimeout(timer);
    this.deadlines.clear();
    return this.sent.splice(0);
  }
}
