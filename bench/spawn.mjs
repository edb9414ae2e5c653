#!/usr/bin/env node
// What the native supervisor adds to starting a backend: time from
// spawnBridgeProcess() to the first event, supervised against grouped (no
// supervisor), interleaved in one run, and the supervisor's resident memory.
//   node bench/spawn.mjs [rounds]
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const { spawnBridgeProcess } = createRequire(import.meta.url)(join(root, "dist", "index.js"));
const rounds = Number(process.argv[2] ?? 40);
const ready = JSON.stringify({ protocol_version: "1.0", type: "ready", ts: 1, version: "0", package: "bench", metadata: {} });
// A backend that writes its ready line and waits for stdin to close.
const backend = { command: "sh", args: ["-c", `echo '${ready}'; cat > /dev/null`] };

function rssKb(pid) {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match ? Number(match[1]) : NaN;
}

function once(supervise) {
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    let child;
    child = spawnBridgeProcess({ ...backend, supervise }, {
      onEvent: () => {
        const ms = Number(process.hrtime.bigint() - started) / 1e6;
        const rss = supervise ? rssKb(child.pid) : undefined;
        child.stdin.end();
        resolve({ ms, rss });
      },
      onSpawnError: reject,
    });
  });
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const results = { supervised: [], grouped: [], rss: [] };
for (let i = 0; i < 5; i++) await once(i % 2 === 0); // warm up
for (let i = 0; i < rounds; i++) {
  for (const supervise of i % 2 === 0 ? [true, false] : [false, true]) {
    const r = await once(supervise);
    results[supervise ? "supervised" : "grouped"].push(r.ms);
    if (supervise) results.rss.push(r.rss);
  }
}
const ratios = results.supervised.map((ms, i) => ms / results.grouped[i]);
console.log(`spawn to first event, ${rounds} interleaved rounds:`);
console.log(`  supervised: median ${median(results.supervised).toFixed(2)} ms`);
console.log(`  grouped (no supervisor): median ${median(results.grouped).toFixed(2)} ms`);
console.log(`  median of per-round ratios: ${median(ratios).toFixed(2)}x, difference ${(median(results.supervised) - median(results.grouped)).toFixed(2)} ms`);
console.log(`  supervisor resident memory: median ${median(results.rss)} kB`);
