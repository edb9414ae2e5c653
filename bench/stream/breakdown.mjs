// In-process companion of bench/stream.mjs measurement 3 and 4: what one
// large line costs the JS thread besides JSON.parse, without a child.
//
// - bare JSON.parse of the line (a sequential V8 string);
// - copying the line's UTF-8 bytes into a new V8 string, what
//   napi_create_string_utf8 does for every line under 64 KiB (Buffer#toString
//   calls the same v8::String::NewFromUtf8), alone and followed by JSON.parse;
// - JSON.parse of a freshly made external one-byte string, the form in which
//   the addon hands over ASCII lines of 64 KiB and more (made here with
//   Buffer#toString("latin1"), which copies; only the parse is timed).
//
// Interleaved rounds after a forced GC, medians, ratios are medians of
// per-round ratios to bare JSON.parse.
//
//   node --expose-gc bench/stream/breakdown.mjs
import { formatNs, median } from "../harness.mjs";
import { nestedResult, toolEnd } from "../lines.mjs";

const now = () => process.hrtime.bigint();
const cases = [
  ["tool_end, 10 MB nested result", () => toolEnd(nestedResult(10 << 20)), 11],
  ["tool_end, 10 MB string result", () => toolEnd("x".repeat(10 << 20)), 21],
  ["tool_end, 50 MB string result", () => toolEnd("x".repeat(50 << 20)), 11],
];

function time(run) {
  globalThis.gc?.();
  return run();
}

console.log(`node ${process.version}, ${process.platform}-${process.arch}`);
console.log("| line | bare JSON.parse | copy from UTF-8 | ratio | copy from UTF-8 + JSON.parse | ratio | JSON.parse of a fresh external string | ratio |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const [name, make, rounds] of cases) {
  const line = make();
  const bytes = Buffer.from(line, "utf8");
  const contenders = [
    () => {
      const start = now();
      JSON.parse(line);
      return Number(now() - start);
    },
    () => {
      const start = now();
      bytes.toString("utf8");
      return Number(now() - start);
    },
    () => {
      const start = now();
      JSON.parse(bytes.toString("utf8"));
      return Number(now() - start);
    },
    () => {
      const external = bytes.toString("latin1");
      const start = now();
      JSON.parse(external);
      return Number(now() - start);
    },
  ];
  const times = contenders.map(() => []);
  for (let round = -2; round < rounds; round++) {
    const order = contenders.map((_, i) => i);
    for (let k = 0; k < (round + 2) % contenders.length; k++) order.push(order.shift());
    const roundTimes = [];
    for (const i of order) roundTimes[i] = time(contenders[i]);
    if (round >= 0) roundTimes.forEach((t, i) => times[i].push(t));
  }
  const cell = (i) => `${formatNs(median(times[i]))} | ${median(times[i].map((t, r) => t / times[0][r])).toFixed(2)}×`;
  console.log(`| ${name} | ${formatNs(median(times[0]))} | ${cell(1)} | ${cell(2)} | ${cell(3)} |`);
}
