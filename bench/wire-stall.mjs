// How long one large line holds the event loop on each path: through
// wireBridgeProcess (a child's Readable streams, framed and judged inside
// the stream's write, then parsed whole on the JS thread) and through
// spawnBridgeProcess (the native reader off the thread, large values
// restored over several turns). The longest gap of a 1 ms heartbeat while
// the line is delivered, median of 5.
//
//   node --expose-gc bench/wire-stall.mjs
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { EventEmitter } from "node:events";
import { median } from "./harness.mjs";

const require = createRequire(import.meta.url);
const { spawnBridgeProcess, wireBridgeProcess } = require("../dist/index.js");

const files = (count) => Array.from({ length: count }, (_, i) => ({ path: `src/m${i}/f${i}.ts`, size: i * 37, tags: ["ts", i % 2 ? "odd" : "even"], meta: { lines: [i, i + 1] } }));
const lineOf = (finalOutput) => JSON.stringify({ protocol_version: "1.0", type: "run_complete", ts: 1, final_output: finalOutput, turn_count: 1, response_count: 1, shim_state: {} });
const cases = [
  ["5 MB nested result", lineOf({ files: files(50_000) })],
  ["50 MB nested result", lineOf({ files: files(500_000) })],
  ["50 MB string result", lineOf("x".repeat(50_000_000))],
];

/** Runs `deliver` while a 1 ms heartbeat measures the longest gap; resolves once the event came. */
async function longestGap(deliver) {
  globalThis.gc?.();
  let last = performance.now();
  let worst = 0;
  const beat = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 1);
  await new Promise((resolve) => setTimeout(resolve, 20));
  worst = 0;
  last = performance.now();
  const t0 = performance.now();
  await deliver();
  const total = performance.now() - t0;
  const now = performance.now();
  worst = Math.max(worst, now - last);
  clearInterval(beat);
  return { worst, total };
}

function viaWire(line) {
  return new Promise((resolve) => {
    const child = new EventEmitter();
    child.stdout = new PassThrough();
    child.stderr = new PassThrough();
    wireBridgeProcess(child, { onEvent: () => resolve(), onDecodeError: (e) => { throw e; } });
    // In 64 KiB chunks, as a pipe delivers them, one per turn.
    const bytes = Buffer.from(`${line}\n`);
    let at = 0;
    const next = () => {
      child.stdout.write(bytes.subarray(at, (at += 65536)));
      if (at < bytes.length) setImmediate(next);
    };
    next();
  });
}

function viaSpawn(file) {
  return new Promise((resolve) => spawnBridgeProcess({ command: "cat", args: [file] }, { onEvent: () => {}, onExit: resolve }));
}

const dir = mkdtempSync(join(tmpdir(), "wire-stall-"));
console.log(`node ${process.version}; longest event-loop gap (1 ms heartbeat) while one line is delivered; median of 5`);
console.log("| line | wireBridgeProcess: longest gap | spawnBridgeProcess: longest gap | wire / spawn |");
console.log("| --- | ---: | ---: | ---: |");
for (const [name, line] of cases) {
  const file = join(dir, "line.ndjson");
  writeFileSync(file, `${line}\n`);
  const wire = [];
  const spawned = [];
  for (let round = -1; round < 5; round++) {
    const w = await longestGap(() => viaWire(line));
    const s = await longestGap(() => viaSpawn(file));
    if (round >= 0) (wire.push(w.worst), spawned.push(s.worst));
  }
  const w = median(wire);
  const s = median(spawned);
  console.log(`| ${name} (${(line.length / 1e6).toFixed(1)} MB) | ${w.toFixed(1)} ms | ${s.toFixed(1)} ms | ${(w / s).toFixed(1)}x |`);
}
rmSync(dir, { recursive: true, force: true });
