/**
 * `session.stream(text)`: a run as an async iterable of typed updates.
 *
 * Consumption is the backpressure: while more than `HIGH_WATER` updates
 * wait for the consumer, the session's flow gate is closed, so the native
 * reader stops and the backend waits in `write(2)`; the host never buffers
 * the stream. Leaving the loop early (`break`, `return`, a throw) cancels
 * the run, and the loop is left once it has ended. The last update is the run's `result`; a failed run ends the
 * iteration with its error.
 */
import type { ApprovalRequestPayload } from "../protocol";
import type { FlowGate } from "../stream/flow";
import type { AgentActivity, ApprovalResolution, PlanUpdate, RunResult, TextChunk, ToolActivity } from "./types";

/** One thing that happened during a run, in wire order. */
export type SessionUpdate =
  | { type: "text"; chunk: TextChunk }
  | { type: "reasoning"; chunk: TextChunk }
  | { type: "tool"; activity: ToolActivity }
  | { type: "agent"; activity: AgentActivity }
  | { type: "plan"; plan: PlanUpdate }
  /** The agent asks for an approval (the session's `approvals` policy answers it). */
  | { type: "approval-request"; requestId: string; request: ApprovalRequestPayload; reason: string | null }
  | { type: "approval"; resolution: ApprovalResolution }
  /** The last update: how the run ended. */
  | { type: "result"; result: RunResult };

/** Updates waiting above this close the flow gate… */
export const HIGH_WATER = 256;
/** …and it opens again once the consumer has brought them down to this. */
export const LOW_WATER = 64;

/** A run's updates, as an async iterator (see the module's notes). */
export class UpdateStream implements AsyncIterableIterator<SessionUpdate> {
  private readonly queue: SessionUpdate[] = [];
  private wake: (() => void) | undefined;
  private ended: { error: unknown } | { result: RunResult } | undefined;
  private finished = false;

  constructor(
    private readonly flow: FlowGate,
    /** The consumer left early: cancel the run; settles once it has ended. */
    private readonly abandon: () => Promise<void>,
  ) {}

  /** An update, in wire order. */
  push(update: SessionUpdate): void {
    if (this.finished) return;
    this.queue.push(update);
    if (this.queue.length > HIGH_WATER) this.flow.close();
    this.wake?.();
  }

  /** The run ended: its result is the last update. */
  end(result: RunResult): void {
    if (this.ended) return;
    this.ended = { result };
    this.push({ type: "result", result });
    this.wake?.();
  }

  /** The run failed: the iteration ends with `error`, after the updates before it. */
  fail(error: unknown): void {
    if (this.ended) return;
    this.ended = { error };
    this.wake?.();
  }

  async next(): Promise<IteratorResult<SessionUpdate>> {
    for (;;) {
      const update = this.queue.shift();
      if (this.queue.length <= LOW_WATER) this.flow.open();
      if (update !== undefined) return { value: update, done: false };
      if (this.ended && "error" in this.ended) {
        this.finish();
        throw this.ended.error;
      }
      if (this.ended || this.finished) {
        this.finish();
        return { value: undefined, done: true };
      }
      await new Promise<void>((resolve) => (this.wake = resolve));
      this.wake = undefined;
    }
  }

  /**
   * The consumer left: the run is cancelled (if it has not ended) and the
   * rest is dropped; resolves once the run has ended, so that the next run
   * can start right after the loop.
   */
  async return(): Promise<IteratorResult<SessionUpdate>> {
    const ending = this.ended ? undefined : this.abandon();
    this.finish();
    await ending;
    return { value: undefined, done: true };
  }

  [Symbol.asyncIterator](): this {
    return this;
  }

  private finish(): void {
    this.finished = true;
    this.queue.length = 0;
    this.flow.open();
  }
}
