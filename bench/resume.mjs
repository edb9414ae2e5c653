// Resume (issue 33): how long a resumed conversation takes until `ready`,
// cold and warm, with a history of 10, 100 and 1,000 turns, beside a fresh
// start of the same backend; the size of a snapshot per turn; and the
// host's own cost of a committed run's snapshot at 100 turns, before and
// after issue 33's text path, side by side (bench/snapshot-cost.cjs).
// The backend is tests/e2e/backends/host_tools_app.py with the host's store
// (HOST_TOOLS_APP_STORE=1); the snapshots are a real one of that agent grown
// to N exchanges of a 300-character question and a 1,200-character answer
// (as bench/stores.mjs grows its fixture). Each resumed session answers
// `history`, checked to list all N earlier user messages.
//
//   npm run bench:resume [-- <starts per figure> [--warm]]      (needs npm run build:quick)
//
// `--warm`: the warm rows only (the cold ones take seconds each and swing
// with the machine's load; the warm target is what issue 33 measures).
import { createRequire } from "node:module";
import { loadavg } from "node:os";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const { createAgentSession, memoryStore, checkSnapshot, closeWarmServers } = require("../dist/index.js");
const { snapshotCost } = require("./snapshot-cost.cjs");
const root = join(import.meta.dirname, "..");
const args = process.argv.slice(2);
const WARM_ONLY = args.includes("--warm");
const STARTS = Number(args.find((arg) => arg !== "--warm") ?? 5);

const backend = (warm) => ({
  command: join(root, ".venv", "bin", "python"),
  args: ["-m", "agentlane_process_bridge", "--app", "host_tools_app:create_backend"],
  cwd: join(root, "tests", "e2e", "backends"),
  env: { ...process.env, PYTHONPATH: join(root, "python", "src"), HOST_TOOLS_APP_STORE: "1" },
  ...(warm ? { warm: { fallback: "error" } } : {}),
});
const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

/** A real snapshot of this agent after one run. */
async function seed() {
  const session = await createAgentSession({ backend: backend(false), store: memoryStore().conversation("seed") });
  await session.run("seed");
  const snapshot = session.snapshot();
  await session.close();
  return snapshot;
}

function grown(seedSnapshot, turns) {
  const snapshot = structuredClone(seedSnapshot);
  const history = [];
  const responses = [];
  const template = seedSnapshot.state.responses[0];
  for (let turn = 0; turn < turns; turn += 1) {
    const answer = `Turn ${turn}: ${"an answer of the model, ".repeat(50)}`.slice(0, 1200);
    history.push({ role: "user", content: `Question ${turn}: ${"what the user asks about, ".repeat(12)}`.slice(0, 300) });
    history.push({ role: "assistant", content: answer });
    const response = structuredClone(template);
    response.id = `resp-${turn}`;
    response.choices[0].message.content = answer;
    responses.push(response);
  }
  snapshot.state.history = history;
  snapshot.state.responses = responses;
  snapshot.state.turn_count = turns;
  snapshot.revision = turns;
  return checkSnapshot(snapshot);
}

/** ms until ready, median of STARTS; with `resume`, the conversation is checked to hold all turns. */
async function readyTime(warm, resume, turns) {
  const times = [];
  for (let i = 0; i < STARTS + 1; i++) {
    const t0 = performance.now();
    const session = await createAgentSession({ backend: backend(warm), ...(resume ? { resume } : { store: memoryStore().conversation("fresh") }) });
    const ms = performance.now() - t0;
    if (i > 0) times.push(ms); // the first start of each figure warms caches (and the warm server)
    if (resume && i === 0) {
      // agentlane 0.22 applies its run loop's max_turns (128) to the conversation's turn_count, not the
      // run's: a conversation past 127 model turns cannot run again. Below that, the model's answer shows
      // the whole history; above it, the loaded snapshot does.
      if (turns < 128) {
        const answer = (await session.run("history")).finalOutput;
        if (!String(answer).startsWith(`Seen ${turns + 1} user messages`)) throw new Error(`the resumed conversation lost turns: ${String(answer).slice(0, 80)}`);
      } else if (session.snapshot()?.state.history.length !== 2 * turns) {
        throw new Error("the resumed conversation's snapshot lost turns");
      }
    }
    await session.close();
  }
  return median(times);
}

const seedSnapshot = await seed();
const rows = [];
for (const warm of WARM_ONLY ? [true] : [false, true]) {
  const fresh = await readyTime(warm, undefined, 0);
  rows.push(`| ${warm ? "warm" : "cold"} | fresh start | ${fresh.toFixed(1)} ms | 1.00 |`);
  for (const turns of [10, 100, 1000]) {
    const ms = await readyTime(warm, grown(seedSnapshot, turns), turns);
    rows.push(`| ${warm ? "warm" : "cold"} | resumed, ${turns} turns | ${ms.toFixed(1)} ms | ${(ms / fresh).toFixed(2)} |`);
  }
}
await closeWarmServers();

const sizes = [10, 100, 1000].map((turns) => [turns, JSON.stringify(grown(seedSnapshot, turns)).length]);
const hundred = JSON.stringify(grown(seedSnapshot, 100));
const { before, after, parts } = snapshotCost(hundred, 200);
console.log(`${STARTS} starts per figure (median), load average ${loadavg()[0].toFixed(1)}`);
console.log("| start | conversation | until ready | × fresh |\n| --- | --- | ---: | ---: |");
for (const row of rows) console.log(row);
console.log("\n| turns | snapshot | per turn |\n| ---: | ---: | ---: |");
for (const [turns, bytes] of sizes) console.log(`| ${turns} | ${(bytes / 1024).toFixed(0)} KiB | ${(bytes / turns).toFixed(0)} B |`);
console.log(`\nhost's cost of a committed run's snapshot, 100 turns, p50 of 200, interleaved:`);
console.log(`  before (JSON.parse + checkSnapshot + memory save(document), as issue 33 measured it): ${before.toFixed(3)} ms`);
console.log(`  after, end to end (the request's bytes fed to the core: decode, Rust check, text to JS; SnapshotText; memory saveText; the answer): ${after.toFixed(3)} ms`);
console.log(`    of which: feed ${parts.feed.toFixed(3)} ms, saveText ${parts.save.toFixed(3)} ms, answer ${parts.answer.toFixed(3)} ms`);
