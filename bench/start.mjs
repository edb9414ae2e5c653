#!/usr/bin/env node
// Starting a conversation cold against warm (issue 21, docs/prefork.md),
// side by side in one run, with the real backend (examples/backend's demo
// app: agentlane 0.22.0, a scripted model, a tool call that needs an
// approval):
//   1. createAgentSession → ready, and → the first text event of a run
//      started at ready (p50, p99 over ROUNDS sessions each, interleaved);
//   2. CPU per start: the host's (process.cpuUsage) and the backend's
//      processes' (the backend and its supervisor; warm: also the prefork
//      server's share, the fork), from /proc/<pid>/task/*/schedstat;
//   3. private memory of a backend, idle after ready and waiting for an
//      approval mid-run: USS (Private_*) and PSS from /proc/<pid>/smaps_rollup,
//      with WARM_SIBLINGS conversations of the server alive at once;
//   4. N sessions started at once, N = 1, 10, 32, 100: time until the last
//      is ready (warm: the server prewarmed, and started by the burst itself).
//   node bench/start.mjs [rounds=30]
// START_BENCH_COLD_MAX (default 32): the largest N started cold at once (100
// cold backends need ~8 GB and minutes of both cores). START_BENCH_PARTS
// (default 1,2,3,4): which measurements (1 and 2 are one run).
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { loadavg } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const { createAgentSession, prewarm, closeWarmServers } = createRequire(import.meta.url)(join(root, "dist", "index.js"));
const rounds = Number(process.argv[2] ?? 30);
const coldMax = Number(process.env.START_BENCH_COLD_MAX ?? 32);
const bursts = [1, 10, 32, 100];
const parts = new Set((process.env.START_BENCH_PARTS ?? "1,2,3,4").split(","));
const PROMPT = "Please save a note about the process bridge.";

function spec(warm, tag = "") {
  return {
    command: join(root, ".venv", "bin", "python"),
    args: ["-m", "agentlane_process_bridge", "--app", "demo_app:create_backend"],
    cwd: join(root, "examples", "backend"),
    // A tag in the environment is a server of its own (a distinct key).
    env: { ...process.env, START_BENCH: tag },
    warm: warm ? { fallback: "error" } : false,
  };
}

// ---- /proc ----------------------------------------------------------------

/** CPU time of a process's live threads, ns. */
function cpuNs(pid) {
  let total = 0;
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      total += Number(readFileSync(`/proc/${pid}/task/${task}/schedstat`, "utf8").split(" ")[0]);
    }
  } catch {
    // Gone.
  }
  return total;
}

/** USS (private clean + dirty) and PSS, kB. */
function memory(pid) {
  const text = readFileSync(`/proc/${pid}/smaps_rollup`, "utf8");
  const field = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? NaN);
  return { uss: field("Private_Clean") + field("Private_Dirty"), pss: field("Pss"), rss: field("Rss") };
}

const hostCpuUs = () => {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
};

// ---- statistics -------------------------------------------------------------

function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)];
}
const median = (values) => quantile(values, 0.5);
const ms = (value) => `${value.toFixed(1)} ms`;
const mb = (kb) => `${(kb / 1024).toFixed(1)} MB`;

// ---- the machine's load (shared with other work: each part says its own) ------

let loadSamples = [];
setInterval(() => loadSamples.push(loadavg()[0]), 2000).unref();
/** The 1-minute load average sampled every 2 s since the last call. */
function loadDuring() {
  const samples = [...loadSamples, loadavg()[0]];
  loadSamples = [];
  const f = (x) => x.toFixed(1);
  return `load average (1 min) during it: min ${f(Math.min(...samples))}, median ${f(median(samples))}, max ${f(Math.max(...samples))}`;
}

// ---- 1 and 2: one start at a time --------------------------------------------

/** One conversation: start, ready, a run until its first text; CPU at ready. */
async function oneStart(warm, server) {
  const serverBefore = server ? cpuNs(server.pid) : 0;
  const hostBefore = hostCpuUs();
  const begun = performance.now();
  let firstText;
  let approve;
  const session = await createAgentSession({
    backend: spec(warm),
    textDelivery: "immediate",
    onAssistantText: () => (firstText ??= performance.now() - begun),
    approvals: () => new Promise((resolve) => (approve = resolve)),
  });
  const ready = performance.now() - begun;
  const hostCpu = (hostCpuUs() - hostBefore) * 1000;
  const { pid, supervisorPid } = session.process;
  const backendCpu = cpuNs(pid) + cpuNs(supervisorPid);
  const serverCpu = server ? cpuNs(server.pid) - serverBefore : 0;
  const run = session.run(PROMPT);
  while (approve === undefined) await new Promise((resolve) => setTimeout(resolve, 1));
  approve(true);
  await run;
  await session.close();
  return { ready, firstText, hostCpu, backendCpu, serverCpu };
}

async function sequential() {
  const server = await prewarm(spec(true));
  const results = { cold: [], warm: [] };
  for (let i = 0; i < 2; i++) {
    await oneStart(false);
    await oneStart(true, server);
  }
  for (let i = 0; i < rounds; i++) {
    for (const warm of i % 2 === 0 ? [false, true] : [true, false]) {
      results[warm ? "warm" : "cold"].push(await oneStart(warm, warm ? server : undefined));
    }
  }
  return results;
}

// ---- 3: memory ------------------------------------------------------------------

/** Memory of `count` backends alive at once, idle and then waiting for an approval mid-run. */
async function memoryOf(warm, count) {
  const sessions = [];
  const approvals = [];
  for (let i = 0; i < count; i++) {
    let asked;
    const waiting = new Promise((resolve) => (asked = resolve));
    const session = await createAgentSession({
      backend: spec(warm),
      approvals: () => new Promise((resolve) => asked(resolve)),
    });
    sessions.push(session);
    approvals.push(waiting);
  }
  await new Promise((resolve) => setTimeout(resolve, 300));
  const idle = sessions.map((s) => memory(s.process.pid));
  const runs = sessions.map((s) => s.run(PROMPT));
  const resolvers = await Promise.all(approvals);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const waiting = sessions.map((s) => memory(s.process.pid));
  for (const approve of resolvers) approve(true);
  await Promise.all(runs);
  await Promise.all(sessions.map((s) => s.close()));
  const summary = (list) => ({ uss: median(list.map((m) => m.uss)), pss: median(list.map((m) => m.pss)), rss: median(list.map((m) => m.rss)) });
  return { idle: summary(idle), waiting: summary(waiting) };
}

// ---- 4: N at once -----------------------------------------------------------------

async function burst(warm, n, { prewarmed }) {
  const tag = `burst-${warm ? "warm" : "cold"}-${n}-${prewarmed ? "prewarmed" : "fresh"}`;
  if (warm && prewarmed) await prewarm(spec(true, tag));
  const begun = performance.now();
  const results = await Promise.allSettled(
    Array.from({ length: n }, () =>
      createAgentSession({ backend: spec(warm, tag), ...(warm ? {} : { readyTimeoutMs: 600_000 }) }).then((session) => ({
        session,
        at: performance.now() - begun,
      })),
    ),
  );
  const ready = results.filter((r) => r.status === "fulfilled").map((r) => r.value);
  const failed = results.filter((r) => r.status === "rejected").map((r) => r.reason?.code ?? String(r.reason));
  const last = ready.length > 0 ? Math.max(...ready.map((r) => r.at)) : NaN;
  await Promise.all(ready.map((r) => r.session.close()));
  if (warm) await closeWarmServers();
  return { n, last, ready: ready.length, failed };
}

// ---- run ------------------------------------------------------------------------

console.log(`bench:start, ${rounds} sessions each, interleaved; Node ${process.version}, ${new Date().toISOString()}; load average ${loadavg().map((x) => x.toFixed(1)).join(" ")}`);
let begun = performance.now();
const server = await prewarm(spec(true));
console.log(`prefork server ready in ${ms(performance.now() - begun)} (pid ${server.pid}, ${mb(memory(server.pid).rss)} RSS, ${mb(memory(server.pid).uss)} USS)`);

loadDuring();
const seq = parts.has("1") || parts.has("2") ? await sequential() : { cold: [], warm: [] };
if (seq.cold.length > 0) {
console.log("\n1. createAgentSession → ready / → first text event (the run started at ready)");
for (const mode of ["cold", "warm"]) {
  const r = seq[mode];
  const readies = r.map((x) => x.ready);
  const texts = r.map((x) => x.firstText);
  console.log(`  ${mode}: ready p50 ${ms(median(readies))}, p99 ${ms(quantile(readies, 0.99))}; first text p50 ${ms(median(texts))}, p99 ${ms(quantile(texts, 0.99))}`);
}
const ratio = median(seq.warm.map((w, i) => w.ready / seq.cold[i].ready));
console.log(`  warm/cold ready, median of per-round ratios: ${ratio.toFixed(3)}`);

console.log("\n2. CPU per start, until ready (median)");
for (const mode of ["cold", "warm"]) {
  const r = seq[mode];
  const host = median(r.map((x) => x.hostCpu)) / 1e6;
  const backend = median(r.map((x) => x.backendCpu)) / 1e6;
  const serverShare = median(r.map((x) => x.serverCpu)) / 1e6;
  const total = median(r.map((x) => x.hostCpu + x.backendCpu + x.serverCpu)) / 1e6;
  console.log(`  ${mode}: host ${ms(host)}, backend + its supervisor ${ms(backend)}${mode === "warm" ? `, prefork server (the fork) ${ms(serverShare)}` : ""}; total ${ms(total)}`);
}
console.log(`  (1 and 2: ${loadDuring()})`);
}

const siblings = Number(process.env.WARM_SIBLINGS ?? 4);
if (parts.has("3")) {
console.log(`\n3. Memory of a backend (median of ${siblings} alive at once)`);
for (const warm of [false, true]) {
  const m = await memoryOf(warm, siblings);
  const line = (what, x) => `${what} USS ${mb(x.uss)}, PSS ${mb(x.pss)} (RSS ${mb(x.rss)})`;
  console.log(`  ${warm ? "warm" : "cold"}: ${line("idle", m.idle)}; ${line("waiting for an approval", m.waiting)}`);
}
const serverMemory = memory(server.pid);
console.log(`  the prefork server itself: USS ${mb(serverMemory.uss)}, PSS ${mb(serverMemory.pss)}, RSS ${mb(serverMemory.rss)}`);
console.log(`  (3: ${loadDuring()})`);
}
await closeWarmServers();

if (parts.has("4")) console.log("\n4. N sessions started at once: time until the last is ready");
for (const n of parts.has("4") ? bursts : []) {
  const rows = [];
  if (n <= coldMax) rows.push(["cold", await burst(false, n, { prewarmed: false })]);
  rows.push(["warm, server prewarmed", await burst(true, n, { prewarmed: true })]);
  rows.push(["warm, server started by the burst", await burst(true, n, { prewarmed: false })]);
  for (const [what, r] of rows) {
    const failures = r.failed.length > 0 ? `, ${r.failed.length} failed (${[...new Set(r.failed)].join(", ")})` : "";
    console.log(`  N=${n} ${what}: last ready at ${Number.isNaN(r.last) ? "-" : ms(r.last)} (${r.ready}/${n} ready${failures})`);
  }
  if (n > coldMax) console.log(`  N=${n} cold: not run (START_BENCH_COLD_MAX=${coldMax})`);
  console.log(`  (N=${n}: ${loadDuring()})`);
}
