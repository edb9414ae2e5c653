// Child process of bench/stream.mjs measurement 5: one run of one host in
// this fresh `node` process, so that its JavaScript runs cold (no earlier
// run warmed the JIT, the inline caches or the heap), like a CLI, a test
// or a serverless handler that hosts one conversation and exits.
//
//   node bench/stream/fresh.mjs HOST FILE EVENTS [TREE]
//
// HOST: `ours` (spawnBridgeProcess of TREE's build, default this tree),
// `naive` (child_process.spawn, a JS framer: Buffer#indexOf(10) and one
// JSON.parse per line, no validation), `readline` (child_process.spawn,
// readline, JSON.parse per line) or `parse` (JSON.parse of FILE's lines,
// read and split before the timed region: the parse's first pass). The
// writer child is `cat FILE`. Prints one JSON object on stdout: the run's
// numbers (bench/stream.mjs says what each is).
//
// FRESH_LOAD_PACKAGE=1: every host loads the package (TREE's dist) before
// its timed region, as `ours` must, so that all start from a heap that
// has loaded the same code (and collected what loading it left behind).
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { PerformanceObserver, constants, monitorEventLoopDelay, performance } from "node:perf_hooks";
import { createInterface } from "node:readline";
import { processCpuMs, resetPeakRss, statusBytes, threadTimes } from "./measure.mjs";

const [host, file, eventsArg, tree = join(import.meta.dirname, "..", "..")] = process.argv.slice(2);
const expected = Number(eventsArg);
const now = () => process.hrtime.bigint();
const elu = () => performance.eventLoopUtilization();

// Loading the package is not in the timed region; it is reported apart.
const loadStart = now();
const loaded = host === "ours" || process.env.FRESH_LOAD_PACKAGE === "1" ? createRequire(import.meta.url)(resolve(tree, "dist/index.js")) : undefined;
const spawnBridgeProcess = host === "ours" ? loaded.spawnBridgeProcess : undefined;
const loadMs = Number(now() - loadStart) / 1e6;

function startRun() {
  const peakReset = resetPeakRss();
  const rssBefore = statusBytes("VmRSS");
  // A 1 ms timer runs in every run, as in the warm measurements: with libuv
  // 1.46, an epoll_wait interrupted by SIGCHLD otherwise counts as active.
  const monitor = monitorEventLoopDelay({ resolution: 1 });
  monitor.enable();
  // The garbage collector's pauses on this thread during the run (V8 reports
  // them a little later, so they are added to the result after a wait).
  const pauses = [];
  const gcs = new PerformanceObserver((list) => pauses.push(...list.getEntries()));
  gcs.observe({ entryTypes: ["gc"] });
  const startedAt = performance.now();
  const [cpu, waited] = threadTimes();
  const start = { elu: elu(), cpu, waited, processCpu: processCpuMs(), time: now(), firstEvent: 0n };
  const stats = { events: 0, invalid: 0, stderr: 0, typeChars: 0 };
  const finish = (code) => {
    const end = now();
    const activeMs = performance.eventLoopUtilization(elu(), start.elu).active;
    const [cpuEnd, waitedEnd] = threadTimes();
    const cpuMs = cpuEnd - start.cpu;
    const otherCpuMs = processCpuMs() - start.processCpu - cpuMs;
    monitor.disable();
    const endedAt = performance.now();
    const result = {
      host,
      wallNs: Number(end - start.time),
      activeMs,
      cpuMs,
      waitedMs: waitedEnd - start.waited,
      otherCpuMs,
      firstEventMs: start.firstEvent ? Number(start.firstEvent - start.time) / 1e6 : undefined,
      eldMaxNs: monitor.max,
      loadMs,
      // Growth of the resident size over the run, at its peak (NaN when the
      // peak could not be reset to the size before the run).
      peakRssGrowth: peakReset ? statusBytes("VmHWM") - rssBefore : NaN,
      code,
      ...stats,
    };
    setTimeout(() => {
      gcs.disconnect();
      const during = pauses.filter((entry) => entry.startTime >= startedAt && entry.startTime < endedAt);
      result.gcPauseMs = during.reduce((sum, entry) => sum + entry.duration, 0);
      result.majorGcs = during.filter((entry) => entry.detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR).length;
      process.stdout.write(`${JSON.stringify(result)}\n`);
    }, 50);
  };
  const consumer = {
    onEvent(event) {
      if (stats.events++ === 0) start.firstEvent = now();
      stats.typeChars += event.type.length;
    },
    onDecodeError() {
      stats.invalid++;
    },
    onStderr() {
      stats.stderr++;
    },
  };
  return { consumer, finish, stats };
}

/** The naive framer: chunks kept until a newline comes, then each line sliced and parsed. */
function naive(child, { onEvent }) {
  let pending = [];
  child.stdout.on("data", (chunk) => {
    let start = 0;
    let newline = chunk.indexOf(10);
    if (newline !== -1 && pending.length > 0) {
      pending.push(chunk.subarray(0, newline));
      onEvent(JSON.parse(Buffer.concat(pending).toString("utf8")));
      pending = [];
      start = newline + 1;
      newline = chunk.indexOf(10, start);
    }
    for (; newline !== -1; newline = chunk.indexOf(10, start)) {
      onEvent(JSON.parse(chunk.toString("utf8", start, newline)));
      start = newline + 1;
    }
    if (start < chunk.length) pending.push(chunk.subarray(start));
  });
}

/** readline over the child's stdout, JSON.parse per line. */
function lines(child, { onEvent }) {
  createInterface({ input: child.stdout, crlfDelay: Infinity }).on("line", (line) => onEvent(JSON.parse(line)));
}

function spawnCat(frame) {
  const { consumer, finish } = startRun();
  const child = spawn("cat", [file], { stdio: ["pipe", "pipe", "pipe"] });
  frame(child, consumer);
  createInterface({ input: child.stderr, crlfDelay: Infinity }).on("line", consumer.onStderr);
  child.once("close", (code) => finish(code));
}

function ours() {
  const { consumer, finish } = startRun();
  spawnBridgeProcess({ command: "cat", args: [file] }, { ...consumer, onInvalidLine() {}, onExit: (code) => finish(code), onSpawnError: (error) => { throw error; } });
}

/** The parse's first pass over the same lines: timed by hrtime, nothing else on the thread. */
function parse() {
  const text = readFileSync(file, "utf8");
  const all = text.split("\n");
  all.pop();
  const { finish, stats } = startRun();
  let typeChars = 0;
  for (let i = 0; i < all.length; i++) typeChars += JSON.parse(all[i]).type.length;
  stats.events = all.length;
  stats.typeChars = typeChars;
  finish(0);
}

const hosts = { ours, naive: () => spawnCat(naive), readline: () => spawnCat(lines), parse };
if (!hosts[host] || !(expected > 0)) throw new Error(`usage: fresh.mjs ${Object.keys(hosts).join("|")} FILE EVENTS [TREE]`);
hosts[host]();
