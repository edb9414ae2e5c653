/**
 * Text segmentation (docs/protocol.md §9.5.4): assistant and reasoning deltas
 * become `TextChunk`s, coalesced or immediate, with exactly one `done: true`
 * chunk per segment.
 */
import type { TextChunk } from "./types";

export type TextStream = "assistant" | "reasoning";

interface Segment {
  stream: TextStream;
  number: number;
  text: string;
  pending: string;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** Coalesced delivery: at once from this many UTF-16 code units… */
const DELIVER_AT_UNITS = 96;
/** …or from this many when the pending text ends a sentence. */
const SENTENCE_AT_UNITS = 32;
const SENTENCE_END = /[.!?]\s$/;
/** Otherwise, after this delay (one timer per segment). */
const COALESCE_MS = 120;

export class TextSegmenter {
  private open: Segment | undefined;
  private counter = 0;

  constructor(
    private readonly mode: "coalesced" | "immediate",
    private readonly deliver: (stream: TextStream, chunk: TextChunk) => void,
  ) {}

  /**
   * Adds a delta to a stream, opening a segment (and closing the other
   * stream's) as needed. An empty delta is ignored: it opens no segment and
   * delivers no chunk (docs/protocol.md §9.5.4).
   */
  append(stream: TextStream, delta: string): void {
    if (delta === "") return;
    if (this.open && this.open.stream !== stream) this.close();
    const segment = (this.open ??= { stream, number: ++this.counter, text: "", pending: "", timer: undefined });
    segment.text += delta;
    segment.pending += delta;
    if (this.mode === "immediate") {
      this.flush();
      return;
    }
    const pending = segment.pending;
    if (pending.length >= DELIVER_AT_UNITS || (pending.length >= SENTENCE_AT_UNITS && SENTENCE_END.test(pending))) {
      this.flush();
    } else if (segment.timer === undefined && pending.length > 0) {
      segment.timer = setTimeout(() => {
        segment.timer = undefined;
        if (this.open === segment) this.flush();
      }, COALESCE_MS);
    }
  }

  /** Delivers the pending text, if any; the segment stays open. */
  flush(): void {
    const segment = this.open;
    if (!segment) return;
    this.stopTimer(segment);
    if (segment.pending.length === 0) return;
    const delta = segment.pending;
    segment.pending = "";
    this.deliver(segment.stream, { delta, text: segment.text, segment: segment.number, done: false });
  }

  /** Ends the open segment with its `done: true` chunk. */
  close(): void {
    const segment = this.open;
    if (!segment) return;
    this.open = undefined;
    this.stopTimer(segment);
    const delta = segment.pending;
    segment.pending = "";
    this.deliver(segment.stream, { delta, text: segment.text, segment: segment.number, done: true });
  }

  /**
   * `run_complete` with a string final output `F`: the open assistant
   * segment ends with its text replaced by `F`; with no assistant segment
   * open, a non-empty `F` is delivered as a segment of its own.
   */
  complete(finalOutput: string): void {
    if (this.open?.stream === "reasoning") this.close();
    const segment = this.open;
    if (!segment) {
      if (finalOutput.length > 0) {
        const number = ++this.counter;
        this.deliver("assistant", { delta: finalOutput, text: finalOutput, segment: number, done: true });
      }
      return;
    }
    this.open = undefined;
    this.stopTimer(segment);
    let delta: string;
    if (finalOutput === segment.text) delta = segment.pending;
    else if (finalOutput.startsWith(segment.text)) delta = segment.pending + finalOutput.slice(segment.text.length);
    else delta = finalOutput;
    segment.pending = "";
    segment.text = finalOutput;
    this.deliver("assistant", { delta, text: finalOutput, segment: segment.number, done: true });
  }

  /** Clears timers without delivering (teardown after `close()`). */
  dispose(): void {
    if (this.open) this.stopTimer(this.open);
  }

  private stopTimer(segment: Segment): void {
    if (segment.timer !== undefined) {
      clearTimeout(segment.timer);
      segment.timer = undefined;
    }
  }
}
