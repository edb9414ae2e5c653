// Where the JS-thread time of one large line goes in ours, in process and
// without a child: bare JSON.parse of the line; creating the line's string
// from its UTF-8 bytes the way the addon does (napi_create_string_utf8 and
// Buffer#toString("utf8") both call v8::String::NewFromUtf8); that plus
// JSON.parse (what ours does per line); and Buffer#toString("latin1"), which
// for buffers over ~1 MB gives an external one-byte string (a malloc and a
// memcpy, no decoding), plus JSON.parse.
//
//   node --expose-gc bench/stream/breakdown.mjs
import { compare, formatNs } from "../harness.mjs";
import { nestedResult, toolEnd } from "../lines.mjs";

const cases = [
  ["tool_end, 10 MB nested result", () => toolEnd(nestedResult(10 << 20)), 11],
  ["tool_end, 10 MB string result", () => toolEnd("x".repeat(10 << 20)), 21],
  ["tool_end, 50 MB string result", () => toolEnd("x".repeat(50 << 20)), 11],
  ["tool_end, 50 MB nested result", () => toolEnd(nestedResult(50 << 20)), 5],
];

console.log(`node ${process.version}, ${process.platform}-${process.arch}`);
console.log("| line | JSON.parse | string from UTF-8 | ratio | string from UTF-8 + JSON.parse | ratio | external Latin-1 copy + JSON.parse | ratio |");
console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
for (const [name, make, rounds] of cases) {
  const line = make();
  const bytes = Buffer.from(line, "utf8");
  const [parse, utf8, utf8Parse, latin1Parse] = compare(
    [
      ["JSON.parse", () => JSON.parse(line)],
      ["utf8", () => bytes.toString("utf8")],
      ["utf8 + parse", () => JSON.parse(bytes.toString("utf8"))],
      ["latin1 + parse", () => JSON.parse(bytes.toString("latin1"))],
    ],
    [0],
    { rounds, warmup: 2 },
  );
  const cell = (row) => `${formatNs(row.perEventNs)} | ${row.ratio.toFixed(2)}×`;
  console.log(`| ${name} | ${formatNs(parse.perEventNs)} | ${cell(utf8)} | ${cell(utf8Parse)} | ${cell(latin1Parse)} |`);
}
