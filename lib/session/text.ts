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
  /** When `pending` got its first unit (`performance.now()`). */
  pendingSince: number;
  /** `pending`'s last UTF-16 unit (0 when empty): with the next delta's, whether it ends a sentence. */
  lastUnit: number;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/** Coalesced delivery: at once from this many UTF-16 code units… */
const DELIVER_AT_UNITS = 96;
/** …or from this many when the pending text ends a sentence. */
const SENTENCE_AT_UNITS = 32;
/**
 * Whether text whose last two UTF-16 units are `prev`, `last` ends a
 * sentence: `/[.!?]\s$/`, judged from the units alone (testing the pending
 * text itself would flatten it at every delta).
 */
function endsSentence(prev: number, last: number): boolean {
  return (prev === 0x2e || prev === 0x21 || prev === 0x3f) && isWhitespace(last);
}

/** `\s` of a JavaScript regular expression (WhiteSpace and LineTerminator). */
function isWhitespace(unit: number): boolean {
  if (unit <= 0x20) return unit === 0x20 || (unit >= 0x09 && unit <= 0x0d);
  return (
    unit === 0xa0 ||
    unit === 0x1680 ||
    (unit >= 0x2000 && unit <= 0x200a) ||
    unit === 0x2028 ||
    unit === 0x2029 ||
    unit === 0x202f ||
    unit === 0x205f ||
    unit === 0x3000 ||
    unit === 0xfeff
  );
}
/**
 * Otherwise, this long after the pending text's first unit. One timer per
 * segment, left armed across flushes: when it fires early for the text
 * pending now, it is armed again for the rest (re-arming a timer per chunk
 * cost more than the rest of a chunk's handling).
 */
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
    const segment = (this.open ??= { stream, number: ++this.counter, text: "", pending: "", pendingSince: 0, lastUnit: 0, timer: undefined });
    if (segment.pending === "") segment.pendingSince = performance.now();
    const last = delta.charCodeAt(delta.length - 1);
    const prev = delta.length >= 2 ? delta.charCodeAt(delta.length - 2) : segment.lastUnit;
    segment.lastUnit = last;
    segment.text += delta;
    segment.pending += delta;
    if (this.mode === "immediate") {
      this.flush();
      return;
    }
    const pending = segment.pending;
    if (pending.length >= DELIVER_AT_UNITS || (pending.length >= SENTENCE_AT_UNITS && endsSentence(prev, last))) {
      this.flush();
    } else if (segment.timer === undefined) {
      this.arm(segment, COALESCE_MS);
    }
  }

  /** The segment's timer, due in `ms`: delivers the pending text once it has waited `COALESCE_MS`. */
  private arm(segment: Segment, ms: number): void {
    segment.timer = setTimeout(() => {
      segment.timer = undefined;
      if (this.open !== segment || segment.pending === "") return;
      const waited = performance.now() - segment.pendingSince;
      if (waited >= COALESCE_MS - 1) this.flush();
      else this.arm(segment, COALESCE_MS - waited);
    }, ms);
  }

  /** Delivers the pending text, if any; the segment stays open (and its timer armed). */
  flush(): void {
    const segment = this.open;
    if (!segment) return;
    if (segment.pending.length === 0) return;
    const delta = segment.pending;
    segment.pending = "";
    segment.lastUnit = 0;
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
    segment.lastUnit = 0;
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
    segment.lastUnit = 0;
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
