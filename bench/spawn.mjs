#!/usr/bin/env node
// What the native supervisor adds to starting a backend: time from
// spawnBridgeProcess() to the first event, supervised against grouped (no
// supervisor), interleaved in one run, and the supervisor's resident memory.
//   node bench/spawn.mjs [rounds]
//   SPAWN_BENCH_BEFORE=<tree> node bench/spawn.mjs [rounds]   (also <tree>'s
//       build, supervised, side by side; and how often each build delivered
//       the first event before onStarted)
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const { spawnBridgeProcess } = require(join(root, "dist", "index.js"));
const BEFORE = process.env.SPAWN_BENCH_BEFORE;
const spawnBefore = BEFORE ? require(join(BEFORE, "dist", "index.js")).spawnBridgeProcess : undefined;
const rounds = Number(process.argv[2] ?? 40);
const ready = JSON.stringify({ protocol_version: "1.0", type: "ready", ts: 1, version: "0", package: "bench", metadata: {} });
// A backend that writes its ready line and waits for stdin to close.
const backend = { command: "sh", args: ["-c", `echo '${ready}'; cat > /dev/null`] };

function rssKb(pid) {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match ? Number(match[1]) : NaN;
}

function once(supervise, spawn = spawnBridgeProcess) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    let reported = false;
    let child;
    child = spawn({ ...backend, supervise }, {
      onStarted: () => (reported = true),
      onEvent: () => {
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        const rss = supervise ? rssKb(child.pid) : undefined;
        child.stdin.end();
        resolve({ ms, rss, eventFirst: !reported });
      },
      onSpawnError: reject,
    });
  });
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const results = { supervised: [], grouped: [], rss: [], before: [], eventFirst: { supervised: 0, before: 0 } };
for (let i = 0; i < 5; i++) await once(i % 2 === 0); // warm up
for (let i = 0; i < rounds; i++) {
  const kinds = ["supervised", "grouped", ...(BEFORE ? ["before"] : [])];
  for (const kind of i % 2 === 0 ? kinds : kinds.reverse()) {
    const r = await once(kind !== "grouped", kind === "before" ? spawnBefore : spawnBridgeProcess);
    results[kind].push(r.ms);
    if (kind === "supervised") results.rss.push(r.rss);
    if (r.eventFirst && kind !== "grouped") results.eventFirst[kind] += 1;
  }
}
const ratios = results.supervised.map((ms, i) => ms / results.grouped[i]);
console.log(`spawn to first event, ${rounds} interleaved rounds:`);
console.log(`  supervised: median ${median(results.supervised).toFixed(2)} ms`);
console.log(`  grouped (no supervisor): median ${median(results.grouped).toFixed(2)} ms`);
console.log(`  median of per-round ratios: ${median(ratios).toFixed(2)}x, difference ${(median(results.supervised) - median(results.grouped)).toFixed(2)} ms`);
console.log(`  supervisor resident memory: median ${median(results.rss)} kB`);
console.log(`  first event before onStarted: ${results.eventFirst.supervised} of ${rounds}`);
if (BEFORE) {
  const toBefore = results.supervised.map((ms, i) => ms / results.before[i]);
  console.log(`  the build before (${BEFORE}), supervised: median ${median(results.before).toFixed(2)} ms; median of per-round ratios (now / before) ${median(toBefore).toFixed(3)}x`);
  console.log(`  the build before: first event before onStarted ${results.eventFirst.before} of ${rounds}`);
}
