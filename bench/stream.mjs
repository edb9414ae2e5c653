// Stream decoding benchmark (issue: off-thread stream decoding). A real
// child process writes prebuilt NDJSON to a real pipe (`cat FILE`, or
// bench/stream/writer.mjs where the writing must be paced or answer
// requests); two hosts receive it, in one process and interleaved:
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
// before anything is timed; the timed region of a run is spawn → exit,
// except in measurement 3 (request → event, from a writer that stays up).
// The writer is `cat` where pacing does not matter: Node's own startup
// (~55 ms) would otherwise be most of a 100k-event run on both sides;
// STREAM_BENCH_WRITER=node uses writer.mjs everywhere.
//
//   npm run bench:stream   (tsc -p bench/tsconfig.json && node --expose-gc bench/stream.mjs)
//   node --expose-gc bench/stream.mjs 3 4     (only measurements 3 and 4)
//   STREAM_BENCH_RAW=1 node --expose-gc bench/stream.mjs   (also every run's numbers, in ms, on stderr)
//   STREAM_BENCH_BEFORE=<tree> npm run bench:stream   (also <tree>'s build of spawnBridgeProcess, side by side)
//
// Measurement 5 runs every host in a fresh `node` process per run
// (bench/stream/fresh.mjs), for a host that starts, hosts one conversation
// and exits: its JavaScript runs cold. Two knobs for finding where its time
// goes: FRESH_LOAD_PACKAGE=1 (every host loads the package first, as ours
// must) and FRESH_NODE_FLAGS="--flag ..." (V8/Node flags for every fresh
// process, e.g. --no-incremental-marking; a diagnosis, not a result).
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
import { processCpuMs, threadCpuMs, threadTimes } from "./stream/measure.mjs";

const require = createRequire(import.meta.url);
const { spawnBridgeProcess } = require("../dist/index.js");
const { zodDecodeBridgeEventLine } = require("./.build/zod-baseline.js");

const WRITER = fileURLToPath(new URL("./stream/writer.mjs", import.meta.url));
const FRESH = fileURLToPath(new URL("./stream/fresh.mjs", import.meta.url));
// STREAM_BENCH_BEFORE=<tree>: that tree's build too, as "ours, the build before".
const BEFORE = process.env.STREAM_BENCH_BEFORE;
const spawnBefore = BEFORE ? require(`${BEFORE}/dist/index.js`).spawnBridgeProcess : undefined;
/**
 * The writer child for a file: `cat` (starts in about a millisecond), or
 * bench/stream/writer.mjs for paced writing or when STREAM_BENCH_WRITER=node
 * (Node's own startup, ~55 ms, then dominates small streams on both sides).
 */
function writer(file, writerArgs) {
  if (writerArgs.length === 0 && process.env.STREAM_BENCH_WRITER !== "node") return ["cat", [file]];
  return [process.execPath, [WRITER, file, ...writerArgs]];
}
const now = () => process.hrtime.bigint();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const elu = () => performance.eventLoopUtilization();
const only = new Set(process.argv.slice(2).map(Number));
const wanted = (n) => only.size === 0 || only.has(n);

if (typeof globalThis.gc !== "function") console.warn("(run with --expose-gc: no forced GC between runs)");

// ---- the hosts ---------------------------------------------------------------

/**
 * What every run records, between just before spawn and the completion
 * callback:
 * - `wallNs`: hrtime;
 * - `activeMs`: event-loop active time of this (the main, JS) thread, from
 *   performance.eventLoopUtilization(): wall time minus the time the loop
 *   spent waiting in epoll. It includes the spawn call, every callback and
 *   GC work on this thread, and time the thread was runnable but had no
 *   core; native threads are not in it.
 * - `cpuMs`: CPU time of this thread (/proc/self/task/<pid>/schedstat);
 *   unlike `activeMs` it does not count time the thread waited for a core
 *   (nor waits for GC helper threads), but it does count the kernel's work
 *   for the thread's wake-ups inside epoll_wait;
 * - `eldMaxNs`: the longest gap between ticks of a 1 ms
 *   monitorEventLoopDelay timer, enabled just before spawn and disabled
 *   20 ms after completion, so that the tick after a final stall is
 *   recorded; `transferEldMaxNs`: the same from a second monitor that is
 *   disabled in the first onEvent, i.e. before the callback that delivers
 *   the first event has returned (the stall of that callback is not in it);
 * - `spawnMs`: the synchronous spawn call alone; `firstEventMs`: spawn →
 *   first onEvent;
 * - diagnostics: `waitedMs`, time this thread was runnable but waiting for
 *   a core (schedstat run_delay); `otherCpuMs`, CPU time of this process's
 *   other threads (process.cpuUsage() minus `cpuMs`: native readers, libuv,
 *   GC helpers).
 *
 * The 1 ms monitor runs in every run, also to keep the ELU honest: with
 * libuv 1.46 (Node 20), when a signal (here the child's SIGCHLD) interrupts
 * an epoll_wait, the idle time of that wait is dropped and counts as active
 * (`spawn("sleep", ["0.2"])` alone shows 200 ms active, 2 ms with a 1 ms
 * timer running). With the timer, a wait lasts at most about 1 ms.
 */
function startRun() {
  const monitor = monitorEventLoopDelay({ resolution: 1 });
  const transferMonitor = monitorEventLoopDelay({ resolution: 1 });
  monitor.enable();
  transferMonitor.enable();
  const [cpu, waited] = threadTimes();
  const start = { elu: elu(), cpu, waited, processCpu: processCpuMs(), time: now() };
  const marks = { spawned: 0n, firstEvent: 0n };
  return {
    monitor,
    transferMonitor,
    start,
    marks,
    spawned: () => (marks.spawned = now()),
    firstEvent: () => {
      transferMonitor.disable();
      marks.firstEvent = now();
    },
  };
}

async function finishRun({ monitor, transferMonitor, start, marks }, stats, code) {
  const end = now();
  const activeMs = performance.eventLoopUtilization(elu(), start.elu).active;
  const [cpu, waited] = threadTimes();
  const processCpu = processCpuMs();
  transferMonitor.disable();
  await sleep(20);
  monitor.disable();
  const cpuMs = cpu - start.cpu;
  return {
    wallNs: Number(end - start.time),
    activeMs,
    cpuMs,
    eldMaxNs: monitor.max,
    transferEldMaxNs: transferMonitor.max,
    spawnMs: Number(marks.spawned - start.time) / 1e6,
    firstEventMs: marks.firstEvent ? Number(marks.firstEvent - start.time) / 1e6 : NaN,
    waitedMs: waited - start.waited,
    otherCpuMs: processCpu - start.processCpu - cpuMs,
    code,
    ...stats,
  };
}

/** The consumer both hosts call: count, and touch the event. */
function consumer(run) {
  const stats = { events: 0, invalid: 0, stderr: 0, typeChars: 0 };
  return {
    stats,
    onEvent(event) {
      if (stats.events++ === 0) run.firstEvent();
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

/** Ours (or the build before's): spawnBridgeProcess; completion is onExit. */
function runOurs(file, writerArgs = [], spawnHost = spawnBridgeProcess) {
  const [command, args] = writer(file, writerArgs);
  return new Promise((resolve, reject) => {
    const run = startRun();
    const { stats, onEvent, onDecodeError, onStderr } = consumer(run);
    spawnHost(
      { command, args },
      {
        onEvent,
        onDecodeError,
        onInvalidLine() {},
        onStderr,
        onExit: (code) => finishRun(run, stats, code).then(resolve, reject),
        onSpawnError: reject,
      },
    );
    run.spawned();
  });
}

/**
 * Baseline: child_process.spawn + readline + zod decoder; completion is
 * stdout's readline 'close', stderr's readline 'close' and the child's
 * 'exit', whichever comes last.
 */
function runBaseline(file, writerArgs = []) {
  const [command, args] = writer(file, writerArgs);
  return new Promise((resolve, reject) => {
    const run = startRun();
    const { stats, onEvent, onDecodeError, onStderr } = consumer(run);
    const child = spawn(command, args, { stdio: ["pipe", "pipe", "pipe"] });
    run.spawned();
    let pending = 3;
    let code = null;
    const done = () => {
      if (--pending === 0) finishRun(run, stats, code).then(resolve, reject);
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
    const run = startRun();
    const child = spawn(...writer(file, []), { stdio: ["pipe", "ignore", "ignore"] });
    run.spawned();
    child.once("exit", (code) => finishRun(run, {}, code).then(resolve, reject));
    child.once("error", reject);
  });
}

/**
 * A host whose writer child stays up (`writer.mjs FILE on-request`): each
 * `request()` writes a newline to the child's stdin and resolves once the
 * file's one event has reached onEvent, with the JS thread's event-loop
 * active time and CPU time in between (no spawn or exit in the interval).
 * Ours is spawnBridgeProcess; the baseline is spawn + readline + zod.
 */
async function openSteadyHost(kind, file) {
  let waiting = null;
  const onEvent = (event) => {
    if (!waiting || event.type !== "run_event") return;
    const { resolve, start } = waiting;
    waiting = null;
    resolve({
      wallNs: Number(now() - start.time),
      activeMs: performance.eventLoopUtilization(elu(), start.elu).active,
      cpuMs: threadCpuMs() - start.cpu,
    });
  };
  const fail = (what) => (error) => waiting?.reject(new Error(`${kind}: ${what}: ${error?.message ?? error}`));
  let exited;
  const exit = new Promise((resolve) => (exited = resolve));
  let child;
  if (kind === "ours" || kind === "before") {
    child = (kind === "ours" ? spawnBridgeProcess : spawnBefore)(
      { command: process.execPath, args: [WRITER, file, "on-request"] },
      { onEvent, onDecodeError: fail("decode error"), onStderr: fail("stderr"), onExit: () => exited(), onSpawnError: fail("spawn") },
    );
  } else {
    child = spawn(process.execPath, [WRITER, file, "on-request"], { stdio: ["pipe", "pipe", "pipe"] });
    createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (line) => {
      let event;
      try {
        event = zodDecodeBridgeEventLine(line);
      } catch (error) {
        fail("decode error")(error);
        return;
      }
      onEvent(event);
    });
    createInterface({ input: child.stderr, crlfDelay: Infinity }).on("line", fail("stderr"));
    child.once("exit", () => exited());
    child.once("error", fail("spawn"));
  }
  await sleep(300); // the writer's startup, outside any timed interval
  return {
    request: () =>
      new Promise((resolve, reject) => {
        waiting = { resolve, reject, start: { elu: elu(), cpu: threadCpuMs(), time: now() } };
        child.stdin.write("\n");
      }),
    close: () => {
      child.stdin.end();
      return exit;
    },
  };
}

/** Bare JSON.parse of the same lines, in process. */
function runParse(lines) {
  const cpu = threadCpuMs();
  const start = now();
  let typeChars = 0;
  for (let i = 0; i < lines.length; i++) typeChars += JSON.parse(lines[i]).type.length;
  const wallNs = Number(now() - start);
  return { wallNs, cpuMs: threadCpuMs() - cpu, typeChars };
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

/**
 * One run of `host` in a fresh `node` process (bench/stream/fresh.mjs); its
 * numbers come back as a JSON line on its stdout.
 */
function runFresh(host, path, events, tree) {
  return new Promise((resolve, reject) => {
    const flags = (process.env.FRESH_NODE_FLAGS ?? "").split(" ").filter(Boolean);
    const child = spawn(process.execPath, [...flags, FRESH, host, path, String(events), ...(tree ? [tree] : [])], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (text) => (out += text));
    child.once("error", reject);
    child.once("close", (code) => {
      if (code !== 0) return reject(new Error(`fresh ${host}: exit ${code}`));
      resolve(JSON.parse(out));
    });
  });
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
  if (process.env.STREAM_BENCH_RAW) {
    for (const [i, [name]] of contenders.entries()) {
      const keys = ["wallNs", "firstEventMs", "spawnMs", "activeMs", "cpuMs", "waitedMs", "otherCpuMs", "eldMaxNs", "transferEldMaxNs"].filter((k) => k in results[i][0]);
      console.error(name, keys.map((k) => `${k}: ${results[i].map((r) => (k.endsWith("Ns") ? r[k] / 1e6 : r[k]).toFixed(1)).join(" ")}`).join(" | "));
    }
  }
  return results;
}

const med = (runs, key) => median(runs.map((r) => r[key]));
/** Median over rounds of a[r][keyA] / b[r][keyB]. */
const ratio = (a, b, keyA, keyB = keyA) => median(a.map((r, i) => r[keyA] / b[i][keyB]));
const ms = (value) => `${value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : 2)} ms`;
const x = (value) => `${value.toFixed(2)}×`;
const mib = (bytes) => (bytes < 1 << 20 ? `${bytes} B` : `${(bytes / (1 << 20)).toFixed(1)} MiB`);
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
    const [ours, base, parse, alone, before] = await interleave(
      [
        ["ours", () => runOurs(path), check],
        ["baseline", () => runBaseline(path), check],
        ["JSON.parse", () => runParse(lines)],
        ["writer alone", () => runWriterAlone(path), (r) => {
          if (r.code !== 0) throw new Error(`writer alone: exit ${r.code}`);
        }],
        ...(BEFORE ? [["ours, the build before", () => runOurs(path, [], spawnBefore), check]] : []),
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
      if (before) console.log(`| ours, the build before | ${ms(med(before, "wallNs") / 1e6)} | ${formatNs(med(before, "wallNs") / n)} | ${x(ratio(before, ours, "wallNs"))} |`);
      console.log(`\nBaseline / ours: ${x(speedup)} (target ≥ 2.50×: ${verdict(speedup >= 2.5)}).`);
      console.log("\nWhere the wall time goes (medians; the child's CPU is not included):\n");
      console.log("| contender | wall | spawn → first event | JS thread: event-loop active | JS thread: CPU | JS thread: runnable, waiting for a core | other threads of this process: CPU | longest event-loop stall (1 ms monitor) |");
      console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
      for (const [name, runs] of [["ours", ours], ["baseline", base], ["writer alone", alone], ...(before ? [["ours, the build before", before]] : [])]) {
        const first = runs === alone ? "" : ms(med(runs, "firstEventMs"));
        console.log(`| ${name} | ${ms(med(runs, "wallNs") / 1e6)} | ${first} | ${ms(med(runs, "activeMs"))} | ${ms(med(runs, "cpuMs"))} | ${ms(med(runs, "waitedMs"))} | ${ms(med(runs, "otherCpuMs"))} | ${ms(med(runs, "eldMaxNs") / 1e6)} |`);
      }
    }
    if (wanted(2)) {
      const per = (runs, key) => formatNs((med(runs, key) * 1e6) / n);
      const elu = (runs) => ratio(runs, parse, "activeMs", "wallNs") * 1e6;
      const cpu = (runs) => ratio(runs, parse, "cpuMs");
      console.log(`\n### 2. JS-thread time per event, ${n.toLocaleString("en-US")} small events\n`);
      console.log("| contender | interval | JS-thread active (ELU) per event | ratio to JSON.parse | JS-thread CPU per event | ratio to JSON.parse |");
      console.log("| --- | --- | ---: | ---: | ---: | ---: |");
      console.log(`| JSON.parse of the ${n.toLocaleString("en-US")} lines, in process | the parse loop (hrtime) | ${formatNs(med(parse, "wallNs") / n)} | 1.00× | ${per(parse, "cpuMs")} | 1.00× |`);
      console.log(`| ours | spawn → onExit | ${per(ours, "activeMs")} | ${x(elu(ours))} | ${per(ours, "cpuMs")} | ${x(cpu(ours))} |`);
      console.log(`| baseline | spawn → close and exit | ${per(base, "activeMs")} | ${x(elu(base))} | ${per(base, "cpuMs")} | ${x(cpu(base))} |`);
      console.log(`| (writer alone, no reader) | spawn → exit | ${per(alone, "activeMs")} | ${x(elu(alone))} | ${per(alone, "cpuMs")} | ${x(cpu(alone))} |`);
      if (before) console.log(`| ours, the build before | spawn → onExit | ${per(before, "activeMs")} | ${x(elu(before))} | ${per(before, "cpuMs")} | ${x(cpu(before))} |`);
      console.log(`\nOurs / JSON.parse: ${x(elu(ours))} by event-loop active time, ${x(cpu(ours))} by thread CPU time (target ≤ 1.30×: ${verdict(elu(ours) <= 1.3)}).`);
    }
  }

  if (wanted(3)) {
    const cases = [
      ["tool_end, 10 MB nested result", toolEnd(nestedResult(10 << 20)), 21],
      ["tool_end, 10 MB string result", toolEnd("x".repeat(10 << 20)), 31],
      // Not a target: what a request costs the JS thread with nearly no line.
      ["(tool_end, 100-byte string result)", toolEnd("x".repeat(100)), 21],
    ];
    const rows = [];
    const verdicts = [];
    for (const [name, line, rounds] of cases) {
      const path = file("large.ndjson", [line]);
      const ours = await openSteadyHost("ours", path);
      const base = await openSteadyHost("baseline", path);
      const earlier = BEFORE ? await openSteadyHost("before", path) : undefined;
      try {
        const [oursRuns, baseRuns, parse, beforeRuns] = await interleave(
          [
            ["ours", () => ours.request()],
            ["baseline", () => base.request()],
            ["JSON.parse", () => runParse([line])],
            ...(earlier ? [["ours, the build before", () => earlier.request()]] : []),
          ],
          { rounds },
        );
        const elu = (runs) => ratio(runs, parse, "activeMs", "wallNs") * 1e6;
        const cpu = (runs) => ratio(runs, parse, "cpuMs");
        const both = (runs) => `${ms(med(runs, "activeMs"))} / ${ms(med(runs, "cpuMs"))}`;
        const target = !name.startsWith("(");
        const ratios = (runs) => (target ? `${x(elu(runs))} / ${x(cpu(runs))}` : "—");
        rows.push(
          `| ${name} | ${mib(line.length)} | ${ms(med(parse, "wallNs") / 1e6)} / ${ms(med(parse, "cpuMs"))} | ${both(oursRuns)} | ${ratios(oursRuns)} | ${both(baseRuns)} | ${ratios(baseRuns)} | ${ms(med(oursRuns, "wallNs") / 1e6)} / ${ms(med(baseRuns, "wallNs") / 1e6)} |` +
            (beforeRuns ? ` ${both(beforeRuns)} | ${ratios(beforeRuns)} |` : ""),
        );
        if (target) verdicts.push(`${name}: ${x(elu(oursRuns))} by ELU, ${x(cpu(oursRuns))} by CPU (target ≤ 1.10× by ELU: ${verdict(elu(oursRuns) <= 1.1)})`);
      } finally {
        await Promise.all([ours.close(), base.close(), earlier?.close()]);
      }
    }
    console.log("\n### 3. One large line from a running backend: JS-thread time, request → event\n");
    console.log("The writer child is started once per host and copies the line to its stdout whenever it reads a newline on stdin (`writer.mjs FILE on-request`), like a backend answering mid-conversation; each round times one request, from writing the newline to the child's stdin until the event has reached onEvent. Each cell: event-loop active time (ELU) / thread CPU time of the JS thread, medians; ratios (medians of per-round ratios) are ELU to JSON.parse's hrtime / CPU to JSON.parse's CPU. The verdict uses ELU: the time the event loop could not run anything else. The last row is not a target: it shows what a request costs either host with a line of almost nothing (the stdin write, the wake-ups, the callbacks).\n");
    console.log(`| line | size | bare JSON.parse, in process (hrtime / CPU) | ours | ratio | baseline | ratio | wall, request → event (ours / baseline) |${BEFORE ? " the build before | ratio |" : ""}`);
    console.log(`| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |${BEFORE ? " ---: | ---: |" : ""}`);
    for (const row of rows) console.log(row);
    console.log(`\nOurs / JSON.parse: ${verdicts.join("; ")}.`);
  }

  if (wanted(4)) {
    const cases = [
      ["tool_end, 50 MB string result", toolEnd("x".repeat(50 << 20)), 7],
      ["tool_end, 50 MB nested result", toolEnd(nestedResult(50 << 20)), 5],
    ];
    const slow = [String(64 * 1024), "2"];
    const check = expectDelivered("50 MB line", 1);
    const rows = [];
    const verdicts = [];
    for (const [name, line, rounds] of cases) {
      const path = file("huge.ndjson", [line]);
      const [ours, base, parse] = await interleave(
        [
          ["ours", () => runOurs(path, slow), check],
          ["baseline", () => runBaseline(path, slow), check],
          ["JSON.parse", () => runParseUnderMonitor(line)],
        ],
        { rounds, warmup: 1 },
      );
      for (const r of parse) {
        if (r.eldMaxNs < r.wallNs) console.warn(`(the delay monitor missed a ${formatNs(r.wallNs)} JSON.parse: max ${formatNs(r.eldMaxNs)})`);
      }
      const toParse = (runs) => ratio(runs, parse, "eldMaxNs", "wallNs");
      const toParseSeen = (runs) => ratio(runs, parse, "eldMaxNs");
      const stall = (runs) => `${ms(med(runs, "eldMaxNs") / 1e6)} (${ms(med(runs, "transferEldMaxNs") / 1e6)})`;
      const ratios = (runs) => `${x(toParse(runs))} / ${x(toParseSeen(runs))}`;
      rows.push(
        `| ${name} | ${mib(line.length)} | ${ms(med(ours, "wallNs") / 1e6)} / ${ms(med(base, "wallNs") / 1e6)} | ${ms(med(parse, "wallNs") / 1e6)} / ${ms(med(parse, "eldMaxNs") / 1e6)} | ${stall(ours)} | ${ratios(ours)} | ${stall(base)} | ${ratios(base)} | ${ms(med(ours, "activeMs"))} / ${ms(med(base, "activeMs"))} |`,
      );
      verdicts.push(`${name}: ${x(toParse(ours))} of its hrtime, ${x(toParseSeen(ours))} of its stall seen by the same monitor (target ≤ 1.00× by the same monitor: ${verdict(toParseSeen(ours) <= 1)})`);
    }
    console.log("\n### 4. Longest event-loop stall while one large line streams in (64 KiB chunks, 2 ms pauses)\n");
    console.log("Stalls: max of a 1 ms monitorEventLoopDelay over the whole run, medians (in parentheses: until the first onEvent, i.e. the transfer without the callback that delivers the event). Bare JSON.parse: in process, in a timer callback, timed by hrtime / seen by the same kind of monitor. Ratios: medians of per-round ratios to JSON.parse's hrtime / to JSON.parse's monitor max.\n");
    console.log("| line | size | transfer, spawn → exit (ours / baseline) | bare JSON.parse (hrtime / monitor max) | ours, longest stall | ratio | baseline, longest stall | ratio | event-loop active (ours / baseline) |");
    console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const row of rows) console.log(row);
    console.log(`\nOurs' longest stall / JSON.parse: ${verdicts.join("; ")}.`);
  }

  if (wanted(5)) {
    // One fresh `node` process per host and run (bench/stream/fresh.mjs),
    // 5 interleaved repetitions; the writer is `cat`.
    const hosts = [
      ["ours", "ours"],
      ...(BEFORE ? [["ours, the build before", "ours", BEFORE]] : []),
      ["naive JS framer", "naive"],
      ["readline + JSON.parse", "readline"],
      ["JSON.parse alone, first pass", "parse"],
    ];
    const cases = [
      ["100,000 small events", smallStream(100_000), hosts],
      ["one 10 MB nested line", [toolEnd(nestedResult(10 << 20))], hosts],
      ["one 250 MB string line", [toolEnd("x".repeat(250e6))], hosts.filter(([, host]) => host !== "parse")],
    ];
    const results = [];
    for (const [name, lines, contenders] of cases) {
      const path = file("fresh.ndjson", lines);
      const bytes = lines.reduce((n, l) => n + Buffer.byteLength(l) + 1, 0);
      const check = expectDelivered(`fresh ${name}`, lines.length);
      const runs = await interleave(
        contenders.map(([label, host, tree]) => [label, () => runFresh(host, path, lines.length, tree), check]),
        { rounds: 5, warmup: 0 },
      );
      results.push({ name, bytes, runs: new Map(contenders.map(([label], i) => [label, runs[i]])) });
    }
    const [small, nested, huge] = results;
    const labels = hosts.map(([label]) => label);
    console.log("\n### 5. A fresh process: one new `node` per host and run\n");
    console.log(
      "Each run is a new `node` process (bench/stream/fresh.mjs) that spawns `cat FILE` and hosts its output once, cold; 5 repetitions, hosts interleaved in rotating order. The naive JS framer: `child_process.spawn`, `Buffer#indexOf(10)`, one `JSON.parse` per line, no validation; readline + `JSON.parse` likewise; `JSON.parse` alone: the file's lines, read and split before the timed region, parsed once. Loading the package (`require`) is not in the timed region (last row). Medians; JS-thread busy is event-loop active time (ELU) / thread CPU time; GC pauses: the collector's pauses on the JS thread in the timed region (PerformanceObserver \"gc\" entries; incremental marking's steps between them are not pauses)." +
        (process.env.FRESH_LOAD_PACKAGE === "1" ? " Every host loaded the package first (FRESH_LOAD_PACKAGE=1)." : "") +
        (process.env.FRESH_NODE_FLAGS ? ` Node flags: ${process.env.FRESH_NODE_FLAGS}.` : "") +
        "\n",
    );
    console.log(`| input | ${labels.join(" | ")} |`);
    console.log(`| --- |${labels.map(() => " ---: |").join("")}`);
    const row = (title, result, fn) => console.log(`| ${title} | ${labels.map((label) => (result.runs.has(label) ? fn(result.runs.get(label)) : "—")).join(" | ")} |`);
    const busy = (runs) => `${ms(med(runs, "activeMs"))} / ${ms(med(runs, "cpuMs"))}`;
    row(`${small.name}, wall`, small, (runs) => ms(med(runs, "wallNs") / 1e6));
    row(`${small.name}, JS-thread busy`, small, busy);
    row(`${small.name}, spawn → first event`, small, (runs) => (runs[0].firstEventMs === undefined ? "—" : ms(med(runs, "firstEventMs"))));
    row(`${nested.name}, JS-thread busy`, nested, busy);
    row(`${nested.name}, wall`, nested, (runs) => ms(med(runs, "wallNs") / 1e6));
    row(`${nested.name}, GC pauses (runs with a major GC)`, nested, (runs) => `${ms(med(runs, "gcPauseMs"))} (${runs.filter((run) => run.majorGcs > 0).length} of ${runs.length})`);
    row("loading the package (not timed above)", small, (runs) => (runs[0].host === "ours" ? ms(med(runs, "loadMs")) : "—"));
    const ours = (result) => result.runs.get("ours");
    const naiveWall = ratio(ours(small), small.runs.get("naive JS framer"), "wallNs");
    const parse = (result) => result.runs.get("JSON.parse alone, first pass");
    const toParse = (result, runs = ours(result)) => [ratio(runs, parse(result), "activeMs", "wallNs") * 1e6, ratio(runs, parse(result), "cpuMs")];
    const [smallElu, smallCpu] = toParse(small);
    const [nestedElu, nestedCpu] = toParse(nested);
    console.log(`\nOurs, fresh process (medians of per-repetition ratios): 100,000 small events, wall ${x(naiveWall)} the naive framer's (target ≤ 0.90×: ${verdict(naiveWall <= 0.9)}); JS-thread busy ${x(smallElu)} by ELU / ${x(smallCpu)} by CPU the parse's first pass (target ≤ 1.30×: ${verdict(smallElu <= 1.3)}); the 10 MB nested line's JS-thread busy ${x(nestedElu)} / ${x(nestedCpu)} its parse's (target ≤ 1.00×: ${verdict(nestedElu <= 1)}).`);
    if (BEFORE) {
      const earlier = (result) => result.runs.get("ours, the build before");
      const [smallBefore] = toParse(small, earlier(small));
      const [nestedBefore] = toParse(nested, earlier(nested));
      console.log(`The build before: 100,000 small events, wall ${x(ratio(earlier(small), small.runs.get("naive JS framer"), "wallNs"))} the naive framer's, JS-thread ${x(smallBefore)} the parse's; the 10 MB nested line ${x(nestedBefore)}.`);
    }
    console.log(`\nMemory, ${huge.name} (${mib(huge.bytes)}): growth of the process's resident size from just before the spawn to its peak (VmHWM), medians, and its ratio to the line's size.\n`);
    console.log(`| | ${labels.filter((label) => huge.runs.has(label)).join(" | ")} |`);
    console.log(`| --- |${labels.filter((label) => huge.runs.has(label)).map(() => " ---: |").join("")}`);
    const present = labels.filter((label) => huge.runs.has(label));
    console.log(`| peak growth | ${present.map((label) => mib(med(huge.runs.get(label), "peakRssGrowth"))).join(" | ")} |`);
    console.log(`| / the line | ${present.map((label) => x(med(huge.runs.get(label), "peakRssGrowth") / huge.bytes)).join(" | ")} |`);
    console.log(`| JS-thread busy | ${present.map((label) => busy(huge.runs.get(label))).join(" | ")} |`);
    const peak = med(ours(huge), "peakRssGrowth") / huge.bytes;
    console.log(`\nOurs' peak / the line: ${x(peak)} (target ≤ 1.10×: ${verdict(peak <= 1.1)}).`);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
