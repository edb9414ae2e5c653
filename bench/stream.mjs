// Stream decoding benchmark (issue: off-thread stream decoding). A real
// child process (bench/stream/writer.mjs) writes prebuilt NDJSON to a real
// pipe; two hosts receive it, in one process and interleaved:
//
// - ours: `spawnBridgeProcess`; stdout and stderr are OS pipes read, framed
//   and validated by the addon's native threads, and the JS thread gets
//   ordered batches of line strings, JSON.parses each, and calls onEvent;
// - baseline (what users would write instead): `child_process.spawn` with
//   pipes, Node `readline` on stdout (and stderr), and the pure-TypeScript
//   zod 4 decoder (bench/zod-baseline.ts) on every line, calling the same
//   onEvent.
//
// Every contender runs once per round, in rotating order, after a forced GC;
// tables show medians, and ratios are medians of the per-round ratios.
// The lines are generated (bench/lines.mjs) and written to temporary files
// before anything is timed; the timed region of a run is spawn → exit.
//
//   npm run bench:stream      (tsc -p bench/tsconfig.json && node --expose-gc bench/stream.mjs)
//   node --expose-gc bench/stream.mjs 3 4     (only measurements 3 and 4)
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay, performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { formatNs, median } from "./harness.mjs";
import { nestedResult, smallStream, toolEnd } from "./lines.mjs";

const require = createRequire(import.meta.url);
const { spawnBridgeProcess } = require("../dist/index.js");
const { zodDecodeBridgeEventLine } = require("./.build/zod-baseline.js");

const WRITER = fileURLToPath(new URL("./stream/writer.mjs", import.meta.url));
const now = () => process.hrtime.bigint();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const elu = () => performance.eventLoopUtilization();
const only = new Set(process.argv.slice(2).map(Number));
const wanted = (n) => only.size === 0 || only.has(n);

if (typeof globalThis.gc !== "function") console.warn("(run with --expose-gc: no forced GC between runs)");

// ---- the hosts ---------------------------------------------------------------

/**
 * What every run records. `wallNs`: hrtime from just before spawn to the
 * completion callback. `activeMs`: event-loop active time of this (the
 * main) thread over the same interval, from performance.eventLoopUtilization()
 * (wall time minus time spent idle waiting in the poll phase; it includes
 * the spawn call, every callback, GC on this thread; native threads are not
 * in it). `eldMaxNs`: the largest gap between ticks of a 1 ms
 * monitorEventLoopDelay timer, enabled just before spawn and disabled 20 ms
 * after completion, so that the tick after a final stall is recorded.
 */
function finishRun(start, stats, code, monitor) {
  const wallNs = Number(now() - start.time);
  const activeMs = performance.eventLoopUtilization(elu(), start.elu).active;
  const result = { wallNs, activeMs, code, ...stats };
  if (!monitor) return Promise.resolve(result);
  return sleep(20).then(() => {
    monitor.disable();
    return { ...result, eldMaxNs: monitor.max };
  });
}

function startRun(withMonitor) {
  let monitor = null;
  if (withMonitor) {
    monitor = monitorEventLoopDelay({ resolution: 1 });
    monitor.enable();
  }
  return { monitor, start: { elu: elu(), time: now() } };
}

/** The consumer both hosts call: count, and touch the event. */
function consumer() {
  const stats = { events: 0, invalid: 0, stderr: 0, typeChars: 0 };
  return {
    stats,
    onEvent(event) {
      stats.events++;
      stats.typeChars += event.type.length;
    },
    onDecodeError() {
      stats.invalid++;
    },
    onStderr() {
      stats.stderr++;
    },
  };
}

/** Ours: spawnBridgeProcess; completion is onExit. */
function runOurs(file, writerArgs = [], withMonitor = false) {
  return new Promise((resolve, reject) => {
    const { stats, onEvent, onDecodeError, onStderr } = consumer();
    const { monitor, start } = startRun(withMonitor);
    spawnBridgeProcess(
      { command: process.execPath, args: [WRITER, file, ...writerArgs] },
      {
        onEvent,
        onDecodeError,
        onInvalidLine() {},
        onStderr,
        onExit: (code) => finishRun(start, stats, code, monitor).then(resolve, reject),
        onSpawnError: reject,
      },
    );
  });
}

/**
 * Baseline: child_process.spawn + readline + zod decoder; completion is
 * stdout's readline 'close', stderr's readline 'close' and the child's
 * 'exit', whichever comes last.
 */
function runBaseline(file, writerArgs = [], withMonitor = false) {
  return new Promise((resolve, reject) => {
    const { stats, onEvent, onDecodeError, onStderr } = consumer();
    const { monitor, start } = startRun(withMonitor);
    const child = spawn(process.execPath, [WRITER, file, ...writerArgs], { stdio: ["pipe", "pipe", "pipe"] });
    let pending = 3;
    let code = null;
    const done = () => {
      if (--pending === 0) finishRun(start, stats, code, monitor).then(resolve, reject);
    };
    const lines = createInterface({ input: child.stdout, crlfDelay: Infinity });
    lines.on("line", (line) => {
      let event;
      try {
        event = zodDecodeBridgeEventLine(line);
      } catch (error) {
        onDecodeError(error, line);
        return;
      }
      onEvent(event);
    });
    lines.once("close", done);
    const errors = createInterface({ input: child.stderr, crlfDelay: Infinity });
    errors.on("line", onStderr);
    errors.once("close", done);
    child.once("exit", (exitCode) => {
      code = exitCode;
      done();
    });
    child.once("error", reject);
  });
}

/** The writer alone, its stdout to /dev/null: the child's own time. */
function runWriterAlone(file) {
  return new Promise((resolve, reject) => {
    const start = { elu: elu(), time: now() };
    const child = spawn(process.execPath, [WRITER, file], { stdio: ["pipe", "ignore", "ignore"] });
    child.once("exit", (code) => finishRun(start, {}, code).then(resolve, reject));
    child.once("error", reject);
  });
}

/** Bare JSON.parse of the same lines, in process. */
function runParse(lines) {
  const start = now();
  let typeChars = 0;
  for (let i = 0; i < lines.length; i++) typeChars += JSON.parse(lines[i]).type.length;
  return { wallNs: Number(now() - start), typeChars };
}

/** Bare JSON.parse of one line in a timer callback, seen by the same delay monitor. */
async function runParseUnderMonitor(line) {
  const monitor = monitorEventLoopDelay({ resolution: 1 });
  monitor.enable();
  await sleep(20);
  const start = now();
  JSON.parse(line);
  const wallNs = Number(now() - start);
  await sleep(20);
  monitor.disable();
  return { wallNs, eldMaxNs: monitor.max };
}

// ---- rounds ------------------------------------------------------------------

/**
 * Runs every contender once per round, in rotating order, after a forced
 * GC and a short settle; returns each contender's results (warmup rounds
 * dropped).
 */
async function interleave(contenders, { rounds, warmup = 2 }) {
  const results = contenders.map(() => []);
  for (let round = -warmup; round < rounds; round++) {
    const order = contenders.map((_, i) => i);
    for (let k = 0; k < (round + warmup) % contenders.length; k++) order.push(order.shift());
    for (const i of order) {
      globalThis.gc?.();
      await sleep(30);
      const result = await contenders[i][1]();
      contenders[i][2]?.(result);
      if (round >= 0) results[i].push(result);
    }
  }
  return results;
}

const med = (runs, key) => median(runs.map((r) => r[key]));
/** Median over rounds of a[r][keyA] / b[r][keyB]. */
const ratio = (a, b, keyA, keyB = keyA) => median(a.map((r, i) => r[keyA] / b[i][keyB]));
const ms = (value) => `${value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : 2)} ms`;
const x = (value) => `${value.toFixed(2)}×`;
const mib = (bytes) => `${(bytes / (1 << 20)).toFixed(1)} MiB`;
const verdict = (met) => (met ? "met" : "**not met**");

function expectDelivered(name, events) {
  return (result) => {
    if (result.code !== 0 || result.events !== events || result.invalid !== 0 || result.stderr !== 0) {
      throw new Error(`${name}: expected ${events} valid events and exit 0, got ${JSON.stringify(result)}`);
    }
  };
}

// ---- inputs ------------------------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), "bridge-stream-bench-"));
const file = (name, lines) => {
  const path = join(dir, name);
  writeFileSync(path, lines.length ? `${lines.join("\n")}\n` : "");
  return path;
};

try {
  console.log(`node ${process.version}, ${process.platform}-${process.arch}`);

  if (wanted(1) || wanted(2)) {
    const lines = smallStream(100_000);
    const path = file("small.ndjson", lines);
    const bytes = lines.reduce((n, l) => n + l.length + 1, 0);
    const check = expectDelivered("small stream", lines.length);
    const [ours, base, parse, alone] = await interleave(
      [
        ["ours", () => runOurs(path), check],
        ["baseline", () => runBaseline(path), check],
        ["JSON.parse", () => runParse(lines)],
        ["writer alone", () => runWriterAlone(path)],
      ],
      { rounds: 15 },
    );
    const n = lines.length;
    const speedup = ratio(base, ours, "wallNs");
    if (wanted(1)) {
      console.log(`\n### 1. ${n.toLocaleString("en-US")} small events (${mib(bytes)}) end to end, spawn → exit\n`);
      console.log("| contender | spawn → exit | per event | ratio to ours |");
      console.log("| --- | ---: | ---: | ---: |");
      console.log(`| ours: spawnBridgeProcess, until onExit | ${ms(med(ours, "wallNs") / 1e6)} | ${formatNs(med(ours, "wallNs") / n)} | 1.00× |`);
      console.log(`| baseline: spawn + readline + zod, until close and exit | ${ms(med(base, "wallNs") / 1e6)} | ${formatNs(med(base, "wallNs") / n)} | ${x(speedup)} |`);
      console.log(`| (writer alone, stdout to /dev/null, until exit) | ${ms(med(alone, "wallNs") / 1e6)} | | ${x(ratio(alone, ours, "wallNs"))} |`);
      console.log(`\nBaseline / ours: ${x(speedup)} (target ≥ 2.50×: ${verdict(speedup >= 2.5)}).`);
    }
    if (wanted(2)) {
      const oursRatio = ratio(ours, parse, "activeMs", "wallNs") * 1e6;
      const baseRatio = ratio(base, parse, "activeMs", "wallNs") * 1e6;
      console.log(`\n### 2. JS-thread time per event, ${n.toLocaleString("en-US")} small events\n`);
      console.log("| contender | what is timed | per event | ratio to JSON.parse |");
      console.log("| --- | --- | ---: | ---: |");
      console.log(`| JSON.parse | hrtime around JSON.parse of the ${n.toLocaleString("en-US")} lines, in process | ${formatNs(med(parse, "wallNs") / n)} | 1.00× |`);
      console.log(`| ours | event-loop active time, spawn → onExit | ${formatNs((med(ours, "activeMs") * 1e6) / n)} | ${x(oursRatio)} |`);
      console.log(`| baseline | event-loop active time, spawn → close and exit | ${formatNs((med(base, "activeMs") * 1e6) / n)} | ${x(baseRatio)} |`);
      console.log(`| (writer alone) | event-loop active time, spawn → exit | ${formatNs((med(alone, "activeMs") * 1e6) / n)} | ${x(ratio(alone, parse, "activeMs", "wallNs") * 1e6)} |`);
      console.log(`\nOurs / JSON.parse: ${x(oursRatio)} (target ≤ 1.30×: ${verdict(oursRatio <= 1.3)}).`);
    }
  }

  if (wanted(3)) {
    const empty = file("empty.ndjson", []);
    const cases = [
      ["tool_end, 10 MB nested result", toolEnd(nestedResult(10 << 20)), 11],
      ["tool_end, 10 MB string result", toolEnd("x".repeat(10 << 20)), 15],
    ];
    const check = expectDelivered("10 MB line", 1);
    const rows = [];
    for (const [name, line, rounds] of cases) {
      const path = file("large.ndjson", [line]);
      const [ours, base, parse, floor] = await interleave(
        [
          ["ours", () => runOurs(path), check],
          ["baseline", () => runBaseline(path), check],
          ["JSON.parse", () => runParse([line])],
          ["ours, empty stream", () => runOurs(empty), expectDelivered("empty stream", 0)],
        ],
        { rounds },
      );
      const oursRatio = ratio(ours, parse, "activeMs", "wallNs") * 1e6;
      rows.push(
        `| ${name} | ${mib(line.length)} | ${ms(med(parse, "wallNs") / 1e6)} | ${ms(med(ours, "activeMs"))} | ${x(oursRatio)} ${oursRatio <= 1.1 ? "" : "(target ≤ 1.10×: **not met**)"} | ${ms(med(base, "activeMs"))} | ${x(ratio(base, parse, "activeMs", "wallNs") * 1e6)} | ${ms(med(floor, "activeMs"))} | ${ms(med(ours, "wallNs") / 1e6)} / ${ms(med(base, "wallNs") / 1e6)} |`,
      );
    }
    console.log("\n### 3. One large line: JS-thread time, spawn → exit\n");
    console.log("| line | size | JSON.parse (hrtime, in process) | ours (event-loop active) | ratio | baseline (event-loop active) | ratio | ours, empty stream (active) | wall, ours / baseline |");
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const row of rows) console.log(row);
    console.log("\nTarget: ours ≤ 1.10× JSON.parse.");
  }

  if (wanted(4)) {
    const cases = [
      ["tool_end, 50 MB string result", toolEnd("x".repeat(50 << 20)), 7],
      ["tool_end, 50 MB nested result", toolEnd(nestedResult(50 << 20)), 5],
    ];
    const slow = [String(64 * 1024), "2"];
    const check = expectDelivered("50 MB line", 1);
    const rows = [];
    for (const [name, line, rounds] of cases) {
      const path = file("huge.ndjson", [line]);
      const [ours, base, parse] = await interleave(
        [
          ["ours", () => runOurs(path, slow, true), check],
          ["baseline", () => runBaseline(path, slow, true), check],
          ["JSON.parse", () => runParseUnderMonitor(line)],
        ],
        { rounds, warmup: 1 },
      );
      for (const r of parse) {
        if (r.eldMaxNs < r.wallNs) console.warn(`(the delay monitor missed a ${formatNs(r.wallNs)} JSON.parse: max ${formatNs(r.eldMaxNs)})`);
      }
      const oursRatio = ratio(ours, parse, "eldMaxNs", "wallNs");
      rows.push(
        `| ${name} | ${mib(line.length)} | ${ms(med(ours, "wallNs") / 1e6)} / ${ms(med(base, "wallNs") / 1e6)} | ${ms(med(parse, "wallNs") / 1e6)} | ${ms(med(parse, "eldMaxNs") / 1e6)} | ${ms(med(ours, "eldMaxNs") / 1e6)} | ${x(oursRatio)} ${oursRatio <= 1 ? "" : "(target ≤ 1.00×: **not met**)"} | ${ms(med(base, "eldMaxNs") / 1e6)} | ${x(ratio(base, parse, "eldMaxNs", "wallNs"))} | ${ms(med(ours, "activeMs"))} / ${ms(med(base, "activeMs"))} |`,
      );
    }
    console.log("\n### 4. Longest event-loop stall while one large line streams in (64 KiB chunks, 2 ms pauses)\n");
    console.log("| line | size | transfer, spawn → exit (ours / baseline) | JSON.parse (hrtime) | JSON.parse, monitor max | ours, monitor max | ratio to JSON.parse | baseline, monitor max | ratio | event-loop active (ours / baseline) |");
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const row of rows) console.log(row);
    console.log("\nTarget: ours' longest stall ≤ the JSON.parse time of the line.");
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
