/**
 * The fuzz-derived corpus and the string-scan boundaries, judged three ways:
 * the text path, the parsed-value path, and the native stream reader (framing,
 * shape memory and large-value lifting on its own thread). The three must
 * agree on every input. With PBN_VERDICTS_DIR set, every verdict is also
 * recorded (verdicts.ts), so that scripts/cross-arm64.sh can require the
 * x86_64 build (SSE2 string scan) and the aarch64 build (portable scan) to
 * give identical ones.
 *
 * The fuzz-derived inputs are the libFuzzer corpora of the `validator` and
 * `lift` targets that `npm test`'s fuzz pass leaves in
 * crates/bridge-core/fuzz/corpus (inputs the fuzzer kept for reaching new
 * code), plus the fuzzers' seeds.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { decodeBridgeEventLine, wireBridgeProcess } from "../lib/index";
import { examples, repoRoot } from "./helpers";
import { lineVerdict, verdictOf, verdicts } from "./verdicts";

const { prng } = createRequire(__filename)("./fixtures/hostile-lines.js") as { prng: (seed: number) => () => number };

const fuzzDir = join(repoRoot, "crates/bridge-core/fuzz");

/** The fuzz-derived inputs as lines: corpus files (sorted, so both runs see one order) and seeds. */
function fuzzLines(): { lines: string[]; corpusFiles: number } {
  const lines = new Set<string>();
  let corpusFiles = 0;
  for (const target of ["validator", "lift"]) {
    const dir = join(fuzzDir, "corpus", target);
    if (!existsSync(dir)) continue;
    for (const file of readdirSync(dir).sort()) {
      const bytes = readFileSync(join(dir, file));
      const text = bytes.toString("utf8");
      // The targets skip inputs that are not UTF-8; so does this.
      if (Buffer.from(text, "utf8").equals(bytes)) {
        lines.add(text);
        corpusFiles += 1;
      }
    }
  }
  for (const line of readFileSync(join(fuzzDir, "seeds.ndjson"), "utf8").split("\n")) if (line) lines.add(line);
  for (const example of [...examples.valid, ...examples.invalid]) lines.add(example.line);
  return { lines: [...lines], corpusFiles };
}

/**
 * Lines that put every special a JSON string scan looks for (quote,
 * backslash, control bytes, non-ASCII) at every offset from 0 to 40 of a
 * string, across the 8- and 16-byte blocks of both scans, terminated and
 * cut; then seeded escape-heavy strings, some over 16 KiB (parsed first) and
 * over 64 KiB (their strings lifted by the stream reader).
 */
function boundaryLines(): string[] {
  const head = '{"protocol_version":"1.0","type":"run_start","ts":1,"prompt":"';
  const tail = '"}';
  const specials = ['\\"', "\\\\", "\\n", "\\u00e9", "\\ud83d\\ude00", "\\ud800", "é", "😀", "\u0001", "\u001f", "\t", "\\x", "\\u12G4", '"', "\\", "\u007f", "\u0080"];
  const lines: string[] = [];
  for (const special of specials) {
    for (let offset = 0; offset <= 40; offset++) {
      const before = "a".repeat(offset);
      lines.push(head + before + special + "b".repeat((offset * 7) % 23) + tail);
      lines.push(head + before + special);
    }
  }
  const rng = prng(0xa64);
  const alphabet = ["a", "Z", " ", "0", "\\n", '\\"', "\\\\", "\\u0041", "é", "中", "😀", "\\ud83d", "/", "\\/", "~", "\\t"];
  for (let n = 0; n < 300; n++) {
    const length = n < 250 ? Math.floor(rng() * 200) : n < 290 ? 16_500 + Math.floor(rng() * 5_000) : 70_000 + Math.floor(rng() * 5_000);
    let text = "";
    while (text.length < length) text += alphabet[Math.floor(rng() * alphabet.length)];
    if (n % 9 === 0) {
      const at = Math.floor(rng() * (text.length + 1));
      text = text.slice(0, at) + "\u0002" + text.slice(at);
    }
    lines.push(head + text + tail);
  }
  return lines;
}

/** Both paths agree when their verdicts are equal, syntax error positions aside. */
const agreeing = (verdict: string) => {
  const [text, value] = verdict.split("\t");
  const bare = (v: string) => v.replace(/^BridgeDecodeError "Invalid JSON bridge event: .*$/, "syntax error");
  return bare(text) === bare(value);
};

/** Delivers `lines` through the native stream reader; one verdict per delivered event or error. */
async function streamVerdicts(lines: string[]): Promise<string[]> {
  const stdout = new PassThrough();
  const delivered: string[] = [];
  const wiring = wireBridgeProcess(
    { stdout, stderr: null },
    {
      onEvent: (event) => delivered.push(verdictOf(() => event, "")),
      onDecodeError: (error) => delivered.push(verdictOf(() => { throw error; }, "")),
    },
  );
  stdout.end(lines.map((line) => `${line}\n`).join(""));
  const deadline = Date.now() + 60_000;
  while (delivered.length < lines.length && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
  wiring.dispose();
  return delivered;
}

function judge(name: string, lines: string[]) {
  const recorder = verdicts(name);

  it("both decoding paths agree on every input", () => {
    const disagreements: string[] = [];
    for (const line of lines) {
      recorder.record(line);
      const verdict = lineVerdict(line);
      if (!agreeing(verdict) && disagreements.length < 5) disagreements.push(`${JSON.stringify(line.slice(0, 300))}\n  ${verdict}`);
    }
    expect(disagreements).toEqual([]);
  });

  it("the stream reader delivers what the text path decides, in order", async () => {
    // One line per line: inputs holding a line break are framed differently.
    const single = lines.filter((line) => !/[\r\n]/.test(line));
    const delivered = await streamVerdicts(single);
    expect(delivered.length).toBe(single.length);
    const mismatches: string[] = [];
    single.forEach((line, i) => {
      recorder.note(`stream#${i}`, delivered[i]);
      const direct = verdictOf(decodeBridgeEventLine, line);
      if (direct !== delivered[i] && mismatches.length < 5) mismatches.push(`${JSON.stringify(line.slice(0, 300))}\n  direct ${direct}\n  stream ${delivered[i]}`);
    });
    expect(mismatches).toEqual([]);
  });
}

describe("the fuzz-derived corpus", () => {
  const { lines, corpusFiles } = fuzzLines();
  it("is there: seeds and examples, plus what the fuzz pass kept", () => {
    expect(lines.length).toBeGreaterThan(100);
    // Without a fuzz pass first (a bare `vitest run`), only seeds and examples.
    console.log(`fuzz-derived corpus: ${lines.length} distinct inputs, from ${corpusFiles} libFuzzer corpus files, the seeds and the examples`);
  });
  judge("fuzz-derived", lines);
});

describe("string-scan block boundaries", () => {
  const lines = boundaryLines();
  judge("scan-boundaries", lines);
});
