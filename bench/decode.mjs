// Synchronous decode benchmark (issue: native strict decoder).
// Compares, in one process and interleaved: bare JSON.parse, our
// decodeBridgeEventLine, and a pure-TypeScript zod 4 decoder written to the
// same spec (bench/zod-baseline.ts, what users would pick instead).
//
//   npm run bench:decode            (node --expose-gc bench/decode.mjs)
//   DECODE_BENCH_NATIVE=1 node --expose-gc bench/decode.mjs
//                                   (also the native call alone: validateEventLine)
import { createRequire } from "node:module";
import { compare, formatNs } from "./harness.mjs";
import { llmStart, nestedResult, smallStream, textDelta, toolEnd } from "./lines.mjs";

const require = createRequire(import.meta.url);
const { decodeBridgeEventLine } = require("../dist/index.js");
const { zodDecodeBridgeEventLine } = require("./.build/zod-baseline.js");

// BENCH_BEFORE=<another tree>: that build's decodeBridgeEventLine too, side by side.
const before = process.env.BENCH_BEFORE ? require(`${process.env.BENCH_BEFORE}/dist/index.js`).decodeBridgeEventLine : undefined;
const contenders = [
  ["JSON.parse", (line) => JSON.parse(line)],
  ["decodeBridgeEventLine", decodeBridgeEventLine],
  ["zod baseline", zodDecodeBridgeEventLine],
  ...(before ? [["decodeBridgeEventLine, the build before", before]] : []),
];
// DECODE_BENCH_NATIVE=1: the native validation call alone (the line copied
// out of V8, judged, no parse), to see what the call costs beside the parse.
const nativeAlone = process.env.DECODE_BENCH_NATIVE === "1" ? require("../dist/native.js").native.validateEventLine : undefined;
if (nativeAlone) contenders.push(["validateEventLine alone", (line) => nativeAlone(line)]);

const cases = [
  ["text_delta run_event", () => Array.from({ length: 20_000 }, (_, i) => textDelta(i)), { rounds: 21 }],
  // The worst case for the core's memory of line shapes: a key that differs
  // on every line (inside the open `raw`), so no line repeats a shape.
  ["text_delta run_event, a new shape on every line", () => Array.from({ length: 20_000 }, (_, i) => textDelta(i).replace('"raw":null', `"raw":{"k${i}":1}`)), { rounds: 21 }],
  ["llm_start, 200 messages", () => Array.from({ length: 200 }, () => llmStart(200)), { rounds: 21 }],
  ["tool_end, 1 MB nested result", () => [toolEnd(nestedResult(1 << 20))], { rounds: 41 }],
  ["tool_end, 10 MB nested result", () => [toolEnd(nestedResult(10 << 20))], { rounds: 15 }],
  ["tool_end, 10 MB string result", () => [toolEnd("x".repeat(10 << 20))], { rounds: 21 }],
  ["stream of 100,000 small events", () => smallStream(100_000), { rounds: 9 }],
];

// Sanity: all three agree on every benchmark line before anything is timed.
for (const [name, make] of cases) {
  for (const line of make().slice(0, 50)) {
    const expected = JSON.stringify(JSON.parse(line));
    if (JSON.stringify(decodeBridgeEventLine(line)) !== expected) throw new Error(`${name}: decode differs`);
    if (JSON.stringify(zodDecodeBridgeEventLine(line)) !== expected) throw new Error(`${name}: zod differs`);
  }
}

console.log(`node ${process.version}, ${process.platform}-${process.arch}`);
console.log(`| case | line size | JSON.parse per event | decodeBridgeEventLine | ratio | zod baseline | ratio |${before ? " before | before / now |" : ""}${nativeAlone ? " validateEventLine alone | ratio |" : ""}`);
console.log(`| --- | ---: | ---: | ---: | ---: | ---: | ---: |${before ? " ---: | ---: |" : ""}${nativeAlone ? " ---: | ---: |" : ""}`);
for (const [name, make, options] of cases) {
  const lines = make();
  const size = lines.reduce((n, l) => n + l.length, 0) / lines.length;
  const rows = compare(contenders, lines, options);
  const [parse, ours, zod] = rows;
  const earlier = before ? rows[3] : undefined;
  const alone = nativeAlone ? rows[rows.length - 1] : undefined;
  const sizeText = size >= 1 << 20 ? `${(size / (1 << 20)).toFixed(1)} MiB` : size >= 1024 ? `${(size / 1024).toFixed(1)} KiB` : `${size.toFixed(0)} B`;
  console.log(
    `| ${name} | ${sizeText} | ${formatNs(parse.perEventNs)} | ${formatNs(ours.perEventNs)} | ${ours.ratio.toFixed(2)}× | ${formatNs(zod.perEventNs)} | ${zod.ratio.toFixed(2)}× |` +
      (earlier ? ` ${formatNs(earlier.perEventNs)} | ${(earlier.ratio / ours.ratio).toFixed(2)}× |` : "") +
      (alone ? ` ${formatNs(alone.perEventNs)} | ${alone.ratio.toFixed(3)}× |` : ""),
  );
}
