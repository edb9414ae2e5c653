/**
 * Direct unit tests of the text segmenter (docs/protocol.md §9.5.4, "Text
 * segmentation"), with vitest's fake timers for the 120 ms coalescing timer.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { TextSegmenter, type TextStream } from "../../lib/session/text";
import type { TextChunk } from "../../lib/index";

interface Delivered extends TextChunk {
  stream: TextStream;
}

function segmenter(mode: "coalesced" | "immediate" = "coalesced") {
  const out: Delivered[] = [];
  const text = new TextSegmenter(mode, (stream, chunk) => out.push({ stream, ...chunk }));
  return { text, out };
}

/** Every opened segment got exactly one done:true chunk, and it was its last. */
function expectOneDonePerSegment(out: Delivered[]): void {
  const bySegment = new Map<number, Delivered[]>();
  for (const chunk of out) bySegment.set(chunk.segment, [...(bySegment.get(chunk.segment) ?? []), chunk]);
  for (const [, chunks] of bySegment) {
    expect(chunks.filter((c) => c.done)).toHaveLength(1);
    expect(chunks[chunks.length - 1].done).toBe(true);
  }
}

const x = (n: number, c = "x") => c.repeat(n);

beforeEach(() => {
  vi.useFakeTimers();
});

afterEach(() => {
  expect(vi.getTimerCount()).toBe(0);
  vi.useRealTimers();
});

describe("TextSegmenter: immediate delivery", () => {
  it("delivers every non-empty delta at once, with the full text so far", () => {
    const { text, out } = segmenter("immediate");
    text.append("assistant", "Hel");
    text.append("assistant", "lo");
    expect(out).toEqual([
      { stream: "assistant", delta: "Hel", text: "Hel", segment: 1, done: false },
      { stream: "assistant", delta: "lo", text: "Hello", segment: 1, done: false },
    ]);
    text.close();
    expect(out[2]).toEqual({ stream: "assistant", delta: "", text: "Hello", segment: 1, done: true });
    expect(vi.getTimerCount()).toBe(0);
  });

  it("an empty delta is ignored: it opens no segment, and closing delivers nothing (docs/protocol.md §9.5.4, corrected)", () => {
    const { text, out } = segmenter("immediate");
    text.append("assistant", "");
    expect(out).toEqual([]);
    text.close();
    expect(out).toEqual([]);
    text.append("assistant", "a");
    expect(out).toEqual([{ stream: "assistant", delta: "a", text: "a", segment: 1, done: false }]);
  });
});

describe("TextSegmenter: coalesced delivery", () => {
  it("holds short text for 120 ms, then flushes it (done: false) with one timer per segment", () => {
    const { text, out } = segmenter();
    text.append("assistant", "Hi");
    expect(out).toEqual([]);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(100);
    text.append("assistant", " there");
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(19);
    expect(out).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(out).toEqual([{ stream: "assistant", delta: "Hi there", text: "Hi there", segment: 1, done: false }]);
    // Nothing pending: no new timer until the next delta.
    expect(vi.getTimerCount()).toBe(0);
    text.append("assistant", "!");
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(120);
    expect(out[1]).toEqual({ stream: "assistant", delta: "!", text: "Hi there!", segment: 1, done: false });
    text.close();
    expect(out[2]).toEqual({ stream: "assistant", delta: "", text: "Hi there!", segment: 1, done: true });
  });

  it("delivers at once from 96 UTF-16 code units, not at 95", () => {
    const { text, out } = segmenter();
    text.append("assistant", x(95));
    expect(out).toEqual([]);
    text.append("assistant", "y");
    expect(out).toEqual([{ stream: "assistant", delta: x(95) + "y", text: x(95) + "y", segment: 1, done: false }]);
    // The segment's timer stays armed; firing with nothing pending, it delivers nothing and is not armed again.
    vi.advanceTimersByTime(500);
    expect(out).toHaveLength(1);
    expect(vi.getTimerCount()).toBe(0);
    text.close();
  });

  it("text pending after a flush waits its full 120 ms: the segment's timer, firing early for it, is armed for the rest", () => {
    const { text, out } = segmenter();
    text.append("assistant", "a");
    vi.advanceTimersByTime(100);
    text.flush();
    vi.advanceTimersByTime(10);
    text.append("assistant", "b");
    vi.advanceTimersByTime(10); // the timer armed for "a" fires: "b" has waited 10 ms
    expect(out.map((c) => c.delta)).toEqual(["a"]);
    expect(vi.getTimerCount()).toBe(1);
    vi.advanceTimersByTime(109);
    expect(out.map((c) => c.delta)).toEqual(["a"]);
    vi.advanceTimersByTime(1);
    expect(out.map((c) => c.delta)).toEqual(["a", "b"]);
    expect(vi.getTimerCount()).toBe(0);
    text.close();
  });

  it("counts UTF-16 code units, not code points (48 emoji = 96 units)", () => {
    const { text, out } = segmenter();
    text.append("assistant", "😀".repeat(47) + "a");
    expect(out).toEqual([]);
    text.close();
    const second = segmenter();
    second.text.append("assistant", "😀".repeat(48));
    expect(second.out).toHaveLength(1);
    expect(second.out[0].delta).toBe("😀".repeat(48));
    second.text.close();
  });

  it("delivers at once from 32 code units when the pending text ends with . ! or ? plus one whitespace", () => {
    for (const ending of [". ", "! ", "?\n", ".\t"]) {
      const { text, out } = segmenter();
      const delta = x(30) + ending;
      expect(delta).toHaveLength(32);
      text.append("assistant", delta);
      expect(out).toEqual([{ stream: "assistant", delta, text: delta, segment: 1, done: false }]);
      text.close();
    }
  });

  it("judges the sentence end as /[.!?]\\s$/ on the pending text for every UTF-16 unit, also when the punctuation and the unit come in separate deltas", () => {
    const disagreements: string[] = [];
    for (let unit = 0; unit <= 0xffff; unit++) {
      const char = String.fromCharCode(unit);
      for (const split of [false, true]) {
        const { text, out } = segmenter();
        if (split) {
          text.append("assistant", x(30) + "!");
          text.append("assistant", char);
        } else {
          text.append("assistant", x(30) + "!" + char);
        }
        const expected = /[.!?]\s$/.test(x(30) + "!" + char);
        if ((out.length === 1) !== expected) disagreements.push(`U+${unit.toString(16)} split=${split}`);
        text.close();
      }
    }
    expect(disagreements).toEqual([]);
  });

  it("does not deliver early below 32 units, without the whitespace, or with two whitespace characters", () => {
    for (const delta of [x(29) + ". ", x(40) + ".", x(40) + ",  ", x(40) + ".  ", x(40) + "a "]) {
      const { text, out } = segmenter();
      text.append("assistant", delta);
      expect(out, JSON.stringify(delta)).toEqual([]);
      vi.advanceTimersByTime(120);
      expect(out).toEqual([{ stream: "assistant", delta, text: delta, segment: 1, done: false }]);
      text.close();
    }
  });

  it("applies the thresholds to the accumulated pending buffer, not to the single delta", () => {
    const { text, out } = segmenter();
    text.append("assistant", x(20));
    text.append("assistant", x(10) + ". ");
    expect(out).toEqual([{ stream: "assistant", delta: x(30) + ". ", text: x(30) + ". ", segment: 1, done: false }]);
    text.append("assistant", x(50));
    text.append("assistant", x(46));
    expect(out[1]).toEqual({ stream: "assistant", delta: x(96), text: x(30) + ". " + x(96), segment: 1, done: false });
    text.close();
  });

  it("an empty delta opens no segment and sets no timer; the next stream's segment is the first", () => {
    const { text, out } = segmenter();
    text.append("assistant", "");
    expect(out).toEqual([]);
    expect(vi.getTimerCount()).toBe(0);
    text.append("reasoning", "think");
    expect(out).toEqual([]);
    text.close();
    expect(out).toEqual([{ stream: "reasoning", delta: "think", text: "think", segment: 1, done: true }]);
  });
});

describe("TextSegmenter: flush and close", () => {
  it("flush delivers the pending text and keeps the segment open; with nothing pending it delivers nothing", () => {
    const { text, out } = segmenter();
    text.flush();
    expect(out).toEqual([]);
    text.append("assistant", "ab");
    text.flush();
    text.flush();
    expect(out).toEqual([{ stream: "assistant", delta: "ab", text: "ab", segment: 1, done: false }]);
    text.append("assistant", "c");
    text.close();
    expect(out[1]).toEqual({ stream: "assistant", delta: "c", text: "abc", segment: 1, done: true });
  });

  it("close without an open segment delivers nothing; closing twice gives one done chunk", () => {
    const { text, out } = segmenter();
    text.close();
    expect(out).toEqual([]);
    text.append("assistant", "a");
    text.close();
    text.close();
    expect(out).toEqual([{ stream: "assistant", delta: "a", text: "a", segment: 1, done: true }]);
  });

  it("close stops the segment's timer, and a later segment gets its own timer", () => {
    const { text, out } = segmenter();
    text.append("assistant", "a");
    vi.advanceTimersByTime(100);
    text.close();
    expect(vi.getTimerCount()).toBe(0);
    text.append("assistant", "b");
    vi.advanceTimersByTime(100);
    expect(out).toHaveLength(1);
    vi.advanceTimersByTime(20);
    expect(out[1]).toEqual({ stream: "assistant", delta: "b", text: "b", segment: 2, done: false });
    text.close();
  });

  it("switching streams closes the open segment; segment numbers are shared by both streams", () => {
    const { text, out } = segmenter("immediate");
    text.append("reasoning", "hmm");
    text.append("assistant", "Yes");
    text.append("reasoning", "again");
    text.close();
    expect(out).toEqual([
      { stream: "reasoning", delta: "hmm", text: "hmm", segment: 1, done: false },
      { stream: "reasoning", delta: "", text: "hmm", segment: 1, done: true },
      { stream: "assistant", delta: "Yes", text: "Yes", segment: 2, done: false },
      { stream: "assistant", delta: "", text: "Yes", segment: 2, done: true },
      { stream: "reasoning", delta: "again", text: "again", segment: 3, done: false },
      { stream: "reasoning", delta: "", text: "again", segment: 3, done: true },
    ]);
    expectOneDonePerSegment(out);
  });

  it("coalesced: switching streams delivers the pending text in the done chunk", () => {
    const { text, out } = segmenter();
    text.append("reasoning", "hmm");
    text.append("assistant", "Yes");
    expect(out).toEqual([{ stream: "reasoning", delta: "hmm", text: "hmm", segment: 1, done: true }]);
    vi.advanceTimersByTime(120);
    expect(out[1]).toEqual({ stream: "assistant", delta: "Yes", text: "Yes", segment: 2, done: false });
    text.close();
  });

  it("dispose clears the timer without delivering anything", () => {
    const { text, out } = segmenter();
    text.append("assistant", "pending");
    text.dispose();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(1000);
    expect(out).toEqual([]);
  });
});

describe("TextSegmenter: completion with a final output", () => {
  it("equal to the streamed text: the final delta is the pending buffer", () => {
    const { text, out } = segmenter();
    text.append("assistant", "Two files.");
    text.complete("Two files.");
    expect(out).toEqual([{ stream: "assistant", delta: "Two files.", text: "Two files.", segment: 1, done: true }]);
    expect(vi.getTimerCount()).toBe(0);
  });

  it("equal, with nothing pending: the final delta is empty", () => {
    const { text, out } = segmenter("immediate");
    text.append("assistant", "Done.");
    text.complete("Done.");
    expect(out[1]).toEqual({ stream: "assistant", delta: "", text: "Done.", segment: 1, done: true });
  });

  it("extending the streamed text: pending buffer plus the extra tail", () => {
    const { text, out } = segmenter();
    text.append("assistant", x(96));
    text.append("assistant", "ab");
    text.complete(x(96) + "abcd");
    expect(out).toEqual([
      { stream: "assistant", delta: x(96), text: x(96), segment: 1, done: false },
      { stream: "assistant", delta: "abcd", text: x(96) + "abcd", segment: 1, done: true },
    ]);
  });

  it("different from the streamed text: the whole final output, and the text is replaced", () => {
    const { text, out } = segmenter("immediate");
    text.append("assistant", "Draft");
    text.complete("Final answer");
    expect(out[1]).toEqual({ stream: "assistant", delta: "Final answer", text: "Final answer", segment: 1, done: true });
  });

  it("an empty segment (opened by an empty delta) is extended by the whole final output", () => {
    const { text, out } = segmenter();
    text.append("assistant", "");
    text.complete("All done");
    expect(out).toEqual([{ stream: "assistant", delta: "All done", text: "All done", segment: 1, done: true }]);
  });

  it("an empty final output replaces streamed text with an empty delta and text", () => {
    const { text, out } = segmenter();
    text.append("assistant", "abc");
    text.complete("");
    expect(out).toEqual([{ stream: "assistant", delta: "", text: "", segment: 1, done: true }]);
  });

  it("no open segment: a non-empty final output becomes a one-chunk segment; an empty one delivers nothing", () => {
    const { text, out } = segmenter();
    text.complete("Saved.");
    text.complete("");
    expect(out).toEqual([{ stream: "assistant", delta: "Saved.", text: "Saved.", segment: 1, done: true }]);
    text.append("assistant", "next");
    text.close();
    expect(out[1].segment).toBe(2);
  });

  it("an open reasoning segment is closed normally, then the final output is its own assistant segment", () => {
    const { text, out } = segmenter();
    text.append("reasoning", "thinking");
    text.complete("Answer");
    expect(out).toEqual([
      { stream: "reasoning", delta: "thinking", text: "thinking", segment: 1, done: true },
      { stream: "assistant", delta: "Answer", text: "Answer", segment: 2, done: true },
    ]);
    expectOneDonePerSegment(out);
  });

  it("completion clears the coalescing timer and ends the segment", () => {
    const { text, out } = segmenter();
    text.append("assistant", "a");
    text.complete("a");
    expect(vi.getTimerCount()).toBe(0);
    text.close();
    expect(out).toHaveLength(1);
  });
});
