#!/usr/bin/env node
// What a committed run costs in each ready store (issue 33: "snapshot cost
// per committed run under 1 ms for 100 turns", for the host's own part):
// one save of a 100-turn conversation, in memory, on disk and in PostgreSQL
// (a real server, scripts/postgres-server.mjs), side by side in one run,
// interleaved (each round saves once in every store, in rotating order).
//   node bench/stores.mjs [saves=300] [turns=100]
// For each store: the wall time of a save (p50, p99), the host's CPU per
// save (process.cpuUsage around it: the JavaScript thread and libuv's
// threads, without the waits for the disk or the database), and for
// PostgreSQL the server's CPU per save (its processes' utime + stime from
// /proc); then the time of a load (what a resume reads). The snapshot is the
// real agentlane document of tests/fixtures/snapshots/one-turn.json grown to
// `turns` exchanges of a 300-character question and a 1,200-character answer.
// Each store is measured twice per round, on two conversations: `save` of a
// document (what an application calls) and `saveText` of a `SnapshotText`
// (what the session calls for each committed run since issue 33: the
// backend's text, checked in Rust, made outside the timing here; the
// request's bytes to the memory store end to end are the last line, from
// bench/snapshot-cost.cjs).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { loadavg, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { startPostgres } from "../scripts/postgres-server.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const { memoryStore, diskStore, checkSnapshot, snapshotText } = require(join(root, "dist", "index.js"));
const { snapshotCost } = require(join(root, "bench", "snapshot-cost.cjs"));
const { postgresStore } = require(join(root, "dist", "store", "postgres.js"));
const { Pool } = require("pg");
const saves = Number(process.argv[2] ?? 300);
const turns = Number(process.argv[3] ?? 100);

/** The fixture grown to `turns` exchanges, at `revision`. */
function conversation(revision) {
  const base = JSON.parse(readFileSync(join(root, "tests", "fixtures", "snapshots", "one-turn.json"), "utf8"));
  const history = [];
  const responses = [];
  for (let turn = 0; turn < turns; turn += 1) {
    const answer = `Turn ${turn}: ${"an answer of the model, ".repeat(50)}`.slice(0, 1200);
    history.push({ role: "user", content: `Question ${turn}: ${"what the user asks about, ".repeat(12)}`.slice(0, 300) });
    history.push({ role: "assistant", content: answer });
    const response = structuredClone(base.state.responses[0]);
    response.id = `resp-${turn}`;
    response.choices[0].message.content = answer;
    responses.push(response);
  }
  return { ...base, revision, state: { ...base.state, history, responses, turn_count: turns } };
}

/** The CPU time of a process and its children (the server's backends), ms, from /proc. */
function treeCpuMs(pid) {
  let ticks = 0;
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1].split(" ");
      if (Number(entry) === pid || Number(fields[1]) === pid) ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // Gone.
    }
  }
  return (ticks * 1000) / 100;
}

function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

const scratch = mkdtempSync(join(tmpdir(), "pbn-bench-stores-"));
const server = await startPostgres();
const pool = new Pool({ ...server.connection, max: 2 });
pool.on("error", () => {});
const postgres = postgresStore({ pool });
await postgres.createSchema();

const disk = diskStore({ directory: join(scratch, "snapshots") });
const contenders = [];
for (const [name, stores, serverPid] of [["memory", memoryStore()], ["disk", disk], ["postgres", postgres, () => server.pid]]) {
  contenders.push({ name: `${name}, save(document)`, store: stores.conversation("document"), serverPid });
  contenders.push({ name: `${name}, saveText`, store: stores.conversation("text"), serverPid, text: true });
}
const snapshots = Array.from({ length: saves + 1 }, (_, index) => conversation(index + 1));
const texts = snapshots.map((snapshot) => snapshotText(JSON.stringify(snapshot)));
const bytes = Buffer.byteLength(JSON.stringify(snapshots[0]));

// The first save of each (creating the file, the row) is not measured.
for (const contender of contenders) {
  await contender.store.save(snapshots[0], { expectedRevision: null });
  Object.assign(contender, { wall: [], cpu: [], user: 0, system: 0, serverMs: 0, loads: [] });
}
const load0 = loadavg()[0];
for (let round = 1; round <= saves; round += 1) {
  for (let i = 0; i < contenders.length; i += 1) {
    const contender = contenders[(round + i) % contenders.length];
    const server0 = contender.serverPid ? treeCpuMs(contender.serverPid()) : 0;
    const cpu0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    if (contender.text) await contender.store.saveText(texts[round], { expectedRevision: round });
    else await contender.store.save(snapshots[round], { expectedRevision: round });
    const t1 = process.hrtime.bigint();
    const cpu = process.cpuUsage(cpu0);
    contender.wall.push(Number(t1 - t0) / 1e6);
    contender.cpu.push((cpu.user + cpu.system) / 1000);
    contender.user += cpu.user / 1000;
    contender.system += cpu.system / 1000;
    if (contender.serverPid) contender.serverMs += treeCpuMs(contender.serverPid()) - server0;
    if (round % 10 === 0) {
      const l0 = process.hrtime.bigint();
      await contender.store.load();
      contender.loads.push(Number(process.hrtime.bigint() - l0) / 1e6);
    }
  }
}
const load1 = loadavg()[0];

// What every store does on the host before any I/O: the checks, and the JSON text.
const parts = { check: [], text: [] };
for (let round = 1; round <= saves; round += 1) {
  let t0 = process.hrtime.bigint();
  checkSnapshot(snapshots[round]);
  parts.check.push(Number(process.hrtime.bigint() - t0) / 1e6);
  t0 = process.hrtime.bigint();
  JSON.stringify(snapshots[round]);
  parts.text.push(Number(process.hrtime.bigint() - t0) / 1e6);
}

const ms = (value) => value.toFixed(3);
console.log(`stores bench: ${saves} saves each, ${turns} turns, snapshot ${(bytes / 1024).toFixed(1)} KiB; ${server.version}; load average ${load0.toFixed(1)} → ${load1.toFixed(1)}`);
console.log("| store | save wall p50 / p99 | host CPU per save, p50 / mean (user + system) | server CPU per save | load wall p50 |");
console.log("| --- | ---: | ---: | ---: | ---: |");
for (const c of contenders) {
  const mean = c.cpu.reduce((a, b) => a + b, 0) / c.cpu.length;
  const serverPart = c.serverPid ? `${ms(c.serverMs / saves)} ms` : "–";
  const split = `${ms(c.user / saves)} + ${ms(c.system / saves)}`;
  console.log(`| ${c.name} | ${ms(quantile(c.wall, 0.5))} / ${ms(quantile(c.wall, 0.99))} ms | ${ms(quantile(c.cpu, 0.5))} / ${ms(mean)} ms (${split}) | ${serverPart} | ${ms(quantile(c.loads, 0.5))} ms |`);
}

console.log(`of which, in every store's save(document): checkSnapshot p50 ${ms(quantile(parts.check, 0.5))} ms, the JSON text (JSON.stringify) p50 ${ms(quantile(parts.text, 0.5))} ms`);
const cost = snapshotCost(JSON.stringify(snapshots[0]).replace('"revision":1,', '"revision":100,'), 200);
console.log(
  `a committed run's snapshot, memory store, p50: before ${ms(cost.before)} ms (JSON.parse + checkSnapshot + save(document)); ` +
    `after ${ms(cost.after)} ms end to end (feed ${ms(cost.parts.feed)} + saveText ${ms(cost.parts.save)} + answer ${ms(cost.parts.answer)})`,
);

await pool.end();
await server.dispose();
rmSync(scratch, { recursive: true, force: true });
