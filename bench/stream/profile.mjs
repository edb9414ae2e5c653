// Profiling aid for bench/stream.mjs: runs one host on one input a few
// times, with no other contender. For ours it also counts the batches
// delivered and the event-loop turns they took.
//
//   node --cpu-prof --cpu-prof-dir=<dir> bench/stream/profile.mjs small ours
//   node bench/stream/cpuprofile-summary.mjs <dir>/*.cpuprofile
//   perf record -F 2000 --call-graph dwarf -- node bench/stream/profile.mjs small ours
//
// input: small (100,000 small events), small400k (400,000 small events),
// nested10 / string10 (one 10 MB line), nested50 / string50 (one 50 MB
// line); host: ours | baseline | parse (bare JSON.parse of the same lines in
// process, after a forced GC when run with --expose-gc). The V8 CPU profile
// counts native work that runs before any JavaScript frame in a callback
// (e.g. creating the batch's strings) as "(idle)"; perf shows it.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { nestedResult, smallStream, toolEnd } from "../lines.mjs";

const require = createRequire(import.meta.url);
const { spawnBridgeProcess } = require("../../dist/index.js");
const { zodDecodeBridgeEventLine } = require("../.build/zod-baseline.js");
const WRITER = fileURLToPath(new URL("./writer.mjs", import.meta.url));

const [input = "small", host = "ours", runsArg = "5"] = process.argv.slice(2);
const inputs = {
  small: () => smallStream(100_000),
  small400k: () => smallStream(400_000),
  nested10: () => [toolEnd(nestedResult(10 << 20))],
  string10: () => [toolEnd("x".repeat(10 << 20))],
  string50: () => [toolEnd("x".repeat(50 << 20))],
  nested50: () => [toolEnd(nestedResult(50 << 20))],
};
const lines = inputs[input]();
const dir = mkdtempSync(join(tmpdir(), "bridge-stream-profile-"));
const path = join(dir, "input.ndjson");
writeFileSync(path, `${lines.join("\n")}\n`);

function ours() {
  return new Promise((resolve) => {
    let events = 0;
    let batches = 0;
    let inBatch = false;
    // Event-loop turns, counted by a setImmediate chain, and the batches
    // delivered in each: Node-API dispatches queued thread-safe-function
    // calls back to back (up to 1000 per turn), so a burst can take one turn.
    let turn = 0;
    let alive = true;
    const batchesPerTurn = new Map();
    const tick = () => {
      turn++;
      if (alive) setImmediate(tick);
    };
    setImmediate(tick);
    spawnBridgeProcess(
      { command: process.execPath, args: [WRITER, path] },
      {
        onEvent() {
          events++;
          // Every batch is one callback from the native side, and microtasks
          // run after it: a new batch is an event with no pending microtask.
          if (!inBatch) {
            inBatch = true;
            batches++;
            batchesPerTurn.set(turn, (batchesPerTurn.get(turn) ?? 0) + 1);
            queueMicrotask(() => (inBatch = false));
          }
        },
        onExit: () => {
          alive = false;
          const mostInOneTurn = Math.max(...batchesPerTurn.values());
          resolve({ events, batches, turnsWithBatches: batchesPerTurn.size, mostBatchesInOneTurn: mostInOneTurn });
        },
      },
    );
  });
}

function baseline() {
  return new Promise((resolve) => {
    let events = 0;
    let pending = 2;
    const child = spawn(process.execPath, [WRITER, path], { stdio: ["pipe", "pipe", "pipe"] });
    const done = () => --pending === 0 && resolve({ events });
    createInterface({ input: child.stdout, crlfDelay: Infinity })
      .on("line", (line) => {
        zodDecodeBridgeEventLine(line);
        events++;
      })
      .once("close", done);
    child.once("exit", done);
  });
}

function parse() {
  globalThis.gc?.();
  for (const line of lines) JSON.parse(line);
  return { events: lines.length };
}

const hosts = { ours, baseline, parse };
try {
  for (let i = 0; i < Number(runsArg); i++) {
    const start = performance.now();
    const result = await hosts[host]();
    console.log(`${host} ${input}: ${(performance.now() - start).toFixed(1)} ms`, result);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
