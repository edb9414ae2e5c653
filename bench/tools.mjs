// Host tools through the Node session (issue 31): a host tool's round trip
// beside an approval's, in one session on the real backend
// (tests/e2e/backends/host_tools_app.py with HOST_TOOLS_APP_APPROVALS=1: the
// module's host tools and the scenario backend's `write_note`, whose
// approval the session's policy allows at once). Each measure is the host's
// wall time from the backend's `tool_start` to its `tool_end`
// (onToolActivity). Beside them, the same 1 MiB result from a tool of the
// backend's own (the scenario app's `make_blob`, no channel): what agentlane
// and the stdout path cost for a 1 MiB tool_end whoever made the result; and
// the host's own synchronous share of a 1 MiB answer (the result's JSON and
// the native core's reply line), measured on a core alone. Kinds run
// interleaved, one run each, 10 warm-up rounds not counted, the
// conversation reset every 10 rounds.
//
//   npm run bench:tools [-- <rounds>]        (needs npm run build:quick)
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const { attachAgentSession } = require("../dist/index.js");
const { HostChannel } = require("../index.js");
const root = join(import.meta.dirname, "..");
const ROUNDS = Number(process.argv[2] ?? 200);
const WARMUP = 10;
const MIB = "x".repeat(1024 * 1024 - 2); // a 1 MiB JSON string result

function backend() {
  return spawn(join(root, ".venv", "bin", "python"), ["-m", "agentlane_process_bridge", "--app", "host_tools_app:create_backend"], {
    cwd: join(root, "tests", "e2e", "backends"),
    stdio: ["pipe", "pipe", "pipe", "ignore", "pipe"],
    env: { ...process.env, PYTHONPATH: join(root, "python", "src"), AGENTLANE_HOST_CHANNEL_FD: "4", HOST_TOOLS_APP_APPROVALS: "1" },
  });
}

const starts = new Map();
let last;
const child = backend();
const session = await attachAgentSession(child, {
  hostChannel: child.stdio[4],
  approvals: () => true,
  onToolActivity: (activity) => {
    const now = performance.now();
    if (activity.phase === "start") starts.set(activity.call.callId, now);
    else if (activity.phase === "end") last = { tool: activity.call.tool, id: activity.call.callId, total: now - starts.get(activity.call.callId), ok: activity.ok };
  },
  tools: {
    lookup: { description: "Looks a customer up.", inputSchema: { type: "object", properties: { customer_id: { type: "string" } }, required: ["customer_id"] }, handler: () => ({ name: "Ada" }) },
    blob: { description: "A 1 MiB result.", inputSchema: { type: "object" }, handler: () => MIB },
  },
});

const prompt = (name, args) => `calls ${JSON.stringify([{ name, arguments: args }])}`;
const kinds = {
  "host tool, small result": prompt("lookup", { customer_id: "c-42" }),
  "host tool, 1 MiB result": prompt("blob", {}),
  "app tool (Python), 1 MiB result": prompt("make_blob", { size: 1024 * 1024 }),
  approval: prompt("write_note", { path: "bench.txt", content: "hi" }),
};
const figures = Object.fromEntries(Object.keys(kinds).map((k) => [k, { total: [] }]));
const ratios = [];
for (let round = 0; round < ROUNDS + WARMUP; round++) {
  if (round % 10 === 0) await session.reset();
  const roundTotals = {};
  for (const [kind, text] of Object.entries(kinds)) {
    last = undefined;
    await session.run(text);
    if (!last?.ok) throw new Error(`${kind}: the tool failed`);
    roundTotals[kind] = last.total;
    if (round >= WARMUP) figures[kind].total.push(last.total);
  }
  if (round >= WARMUP) ratios.push(roundTotals["host tool, small result"] / roundTotals.approval);
}
await session.close();

const pct = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};
const ms = (v) => (v === undefined ? "" : `${v.toFixed(2)} ms`);
console.log(`${ROUNDS} rounds, load average ${(await import("node:os")).loadavg()[0].toFixed(1)}`);
console.log("| | p50 | p99 |\n| --- | ---: | ---: |");
for (const [kind, f] of Object.entries(figures)) console.log(`| ${kind} | ${ms(pct(f.total, 50))} | ${ms(pct(f.total, 99))} |`);
console.log(`| host tool / approval, median of the per-round ratios | ${pct(ratios, 50).toFixed(2)} | |`);
console.log(`| host's own share of a 1 MiB answer (JSON + the core's reply line), p50 | ${ms(hostShare())} | |`);

/** The host's synchronous work for a 1 MiB answer, on a core fed a hello and a call by hand. */
function hostShare() {
  const core = new HostChannel({ tools: [{ name: "blob", description: "", inputSchema: '{"type":"object"}' }], store: false });
  core.feed(Buffer.from('{"type":"hello","version":"1.0"}\n'));
  const times = [];
  for (let i = 0; i < 50; i++) {
    const [request] = core.feed(Buffer.from(`{"type":"call_tool","id":"${i}","name":"blob","arguments":{},"tool_call_id":null,"run_id":null}\n`));
    const t0 = performance.now();
    core.answerValue(request.call, JSON.stringify(MIB));
    times.push(performance.now() - t0);
  }
  return pct(times, 50);
}
