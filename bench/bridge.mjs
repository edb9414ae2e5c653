// agentlane-bridge against this package's direct path, side by side in one
// process: the same backend (bench/bridge/backend.mjs, answering from
// prebuilt files) hosted twice, once by `spawnBridgeProcess` in this
// process (direct) and once by agentlane-bridge, whose events this process
// receives over Connect with @connectrpc/connect-node (binary proto unless
// said otherwise). Both hosts stay up for the whole run; rounds alternate
// which goes first; tables give medians and the median of per-round ratios.
//
//   npm run bench:bridge        (cargo build --release -p bridge-server, then
//                                node --expose-gc bench/bridge.mjs; needs npm run build)
//   node --expose-gc bench/bridge.mjs 2 4        (only some measurements)
//
// 1. 100,000 small events (bench/lines.mjs smallStream, ~470 B each): from
//    the trigger (direct: a `configure` command written; bridge: the
//    Configure call) to the last event received and JSON.parsed (direct:
//    onEvent; bridge: a Subscribe stream, each item's `json` parsed), once
//    with one event per stream message and once with `batched: true`.
// 2. First-event latency: a prompt written / the Prompt call made, to its
//    run_start received (and parsed), 300 times each.
// 3. A 20 MB event (a tool_end with a 20 MB string result): request to the
//    event received and parsed; the bridge over proto and over JSON.
// 4. The bridge's peak RSS (VmHWM) after all of the above, and its RSS idle.
// 5.–8. Many conversations in one bridge (bench/bridge/conversations.mjs):
//    CreateConversation → ready warm and cold; 100 created at once; 1 and 2
//    per conversation with 1 and with 20 conversations active; 20 cold
//    creates at once with the start slots and without.
// 9. A host tool's round trip beside an approval's (bench/bridge/tools.mjs):
//    the real host-tools backend; request item in → answer → the backend's
//    proof (tool_end / resolved approval) back, p50 and p99, and a 1 MB result.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { median } from "./harness.mjs";
import { smallStream, toolEnd } from "./lines.mjs";
import { loadavg } from "node:os";
import { startBridge } from "../examples/clients/node/bridge.mjs";
import { coldBurst, createAndMany, perConversation } from "./bridge/conversations.mjs";
import { hostToolRoundTrip } from "./bridge/tools.mjs";
import { AgentService } from "../examples/clients/node/gen/agentlane/bridge/v1/bridge_pb.js";

const require = createRequire(import.meta.url);
const { spawnBridgeProcess, createBridgeChannel } = require("../dist/index.js");
const root = fileURLToPath(new URL("..", import.meta.url));
const BACKEND = join(root, "bench/bridge/backend.mjs");
const BRIDGE = process.env.AGENTLANE_BRIDGE ?? join(root, "target/release/agentlane-bridge");
const EVENTS = 100_000;
const BIG = 20_000_000;
const only = new Set(process.argv.slice(2).map(Number));
const wanted = (n) => only.size === 0 || only.has(n);
const now = () => process.hrtime.bigint();
const ms = (ns) => Number(ns) / 1e6;
const fmt = (x, digits = 1) => x.toFixed(digits);

// ---- the input, prebuilt -----------------------------------------------------

const dir = mkdtempSync(join(tmpdir(), "bench-bridge-"));
writeFileSync(join(dir, "burst.ndjson"), `${smallStream(EVENTS).join("\n")}\n`);
writeFileSync(join(dir, "big.ndjson"), `${toolEnd("0123456789abcdef".repeat(BIG / 16))}\n`);

// ---- the direct host: spawnBridgeProcess in this process ----------------------

/** Resolves when `count` more events matching `test` have been received. */
function waiter() {
  let wanted = null;
  return {
    expect(count, test = () => true) {
      return new Promise((resolve) => (wanted = { count, test, resolve }));
    },
    seen(event) {
      if (wanted && wanted.test(event) && --wanted.count === 0) {
        const { resolve } = wanted;
        wanted = null;
        resolve(now());
      }
    },
  };
}

const direct = waiter();
const directReady = new Promise((resolve) => {
  const child = spawnBridgeProcess(
    { command: process.execPath, args: [BACKEND, dir] },
    {
      onEvent: (event) => (event.type === "ready" ? resolve(child) : direct.seen(event)),
      onDecodeError: (error) => console.error("direct: decode error", error.message),
      onStderr: (line) => console.error("direct backend:", line),
    },
  );
});
const directChild = await directReady;
const channel = createBridgeChannel(directChild);

// ---- the bridge host -------------------------------------------------------------

const bridge = await startBridge(["--app", "bench:none", "--", process.execPath, BACKEND, dir], { bridge: BRIDGE });
const agent = bridge.client(AgentService);
const agentJson = bridge.client(AgentService, { json: true });
// The bridge's events reach this process through a Subscribe stream: one
// event per message, or batches (`batched: true`). One subscription at a
// time: a subscriber that falls behind a burst is cut off by design.
const viaBridge = waiter();
function subscribe(batched) {
  const controller = new AbortController();
  const done = (async () => {
    for await (const { item } of agent.subscribe({ batched }, { signal: controller.signal })) {
      if (item.case === "batch") for (const event of JSON.parse(item.value.json)) viaBridge.seen(event);
      else if (item.case === "event") viaBridge.seen(JSON.parse(item.value.json));
    }
  })().catch((error) => {
    if (!controller.signal.aborted) throw error;
  });
  return { close: () => (controller.abort(), done) };
}
let subscription = subscribe(false);

function vmKb(field) {
  const status = readFileSync(`/proc/${bridge.info.pid}/status`, "utf8");
  return Number(new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(status)[1]);
}

/** Runs `a` and `b` once per round, alternating which goes first. */
async function sideBySide(rounds, a, b) {
  const times = [[], []];
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 ? [1, 0] : [0, 1];
    for (const i of order) {
      globalThis.gc?.();
      times[i].push(await [a, b][i]());
    }
  }
  return times;
}

const report = [`Node ${process.version}, ${new Date().toISOString()}; load average at the start ${loadavg().map((x) => x.toFixed(2)).join(" ")}`, ""];

// 1. Throughput.
if (wanted(1)) {
  const burst = (host, trigger) => async () => {
    const done = host.expect(EVENTS + 1); // the config answer + the burst
    const start = now();
    await trigger();
    return ms((await done) - start);
  };
  const configure = () => agent.configure({ patchJson: "{}" });
  const rows = [];
  for (const [name, batched] of [
    ["bridge: Configure → Subscribe (proto, one event per message) → JSON.parse", false],
    ["bridge: Configure → Subscribe (proto, `batched`) → JSON.parse", true],
  ]) {
    await subscription.close();
    subscription = subscribe(batched);
    await agent.configure({ patchJson: "{}" }); // the new subscription is in place
    await new Promise((resolve) => setTimeout(resolve, 2000)); // and the burst is drained
    const [d, b] = await sideBySide(9, burst(direct, () => channel.send({ type: "configure", patch: {} })), burst(viaBridge, configure));
    rows.push([name, median(d), median(b), median(d.map((t, i) => t / b[i]))]);
  }
  const rate = (t) => Math.round(EVENTS / (t / 1000)).toLocaleString("en");
  report.push(
    "### 1. 100,000 small events",
    "",
    "| path | median time | events/s | throughput vs direct (same rounds) |",
    "| --- | ---: | ---: | ---: |",
    ...rows.flatMap(([name, d, b, ratio]) => [
      `| direct: spawnBridgeProcess → onEvent | ${fmt(d)} ms | ${rate(d)} | 1 |`,
      `| ${name} | ${fmt(b)} ms | ${rate(b)} | ${fmt(ratio, 2)} |`,
    ]),
    "",
  );
}

// 2. First-event latency.
if (wanted(2)) {
  const samples = [[], []];
  for (let i = 0; i < 300; i++) {
    for (const which of i % 2 ? [1, 0] : [0, 1]) {
      if (which === 0) {
        const first = direct.expect(1, (e) => e.type === "run_start");
        const start = now();
        channel.send({ type: "prompt", text: "latency" });
        samples[0].push(ms((await first) - start));
        await new Promise((resolve) => setTimeout(resolve, 1)); // its run_complete
      } else {
        const start = now();
        let t = null;
        for await (const { item } of agent.prompt({ text: "latency" })) {
          if (t === null && item.case === "event") {
            JSON.parse(item.value.json);
            t = now();
          }
        }
        samples[1].push(ms(t - start));
      }
    }
  }
  const p90 = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length * 0.9)];
  const [d, b] = samples;
  report.push(
    "### 2. First-event latency (request → run_start)",
    "",
    "| path | median | p90 |",
    "| --- | ---: | ---: |",
    `| direct: prompt written → onEvent(run_start) | ${fmt(median(d), 3)} ms | ${fmt(p90(d), 3)} ms |`,
    `| bridge: Prompt call → first item (proto) | ${fmt(median(b), 3)} ms | ${fmt(p90(b), 3)} ms |`,
    `| difference | ${fmt(median(b) - median(d), 3)} ms | |`,
    "",
  );
}

// 3. A 20 MB event.
if (wanted(3)) {
  const bigDirect = async () => {
    const got = direct.expect(1, (e) => e.type === "run_event" && e.event.type === "tool_end");
    const start = now();
    channel.send({ type: "prompt", text: "big" });
    const t = ms((await got) - start);
    await new Promise((resolve) => setTimeout(resolve, 20));
    return t;
  };
  const bigBridge = (client) => async () => {
    const start = now();
    let t = null;
    for await (const { item } of client.prompt({ text: "big" })) {
      if (item.case === "event" && item.value.json.length > BIG) {
        if (JSON.parse(item.value.json).event.payload.result.length !== BIG) throw new Error("the 20 MB result arrived damaged");
        t = ms(now() - start);
      }
    }
    return t;
  };
  const [d, b] = await sideBySide(5, bigDirect, bigBridge(agent));
  const [, j] = await sideBySide(5, bigDirect, bigBridge(agentJson));
  report.push(
    "### 3. One 20 MB event (request → the event received and parsed)",
    "",
    "| path | median | vs direct |",
    "| --- | ---: | ---: |",
    `| direct | ${fmt(median(d))} ms | 1 |`,
    `| bridge, proto | ${fmt(median(b))} ms | ${fmt(median(b.map((t, i) => t / d[i])), 2)} |`,
    `| bridge, JSON | ${fmt(median(j))} ms | ${fmt(median(j.map((t, i) => t / d[i])), 2)} |`,
    "",
  );
}

// 4. Memory.
if (wanted(4)) {
  report.push(
    "### 4. The bridge's memory",
    "",
    `peak RSS (VmHWM) after the runs above: ${(vmKb("VmHWM") / 1024).toFixed(1)} MiB; RSS now, idle: ${(vmKb("VmRSS") / 1024).toFixed(1)} MiB`,
    "",
  );
}

channel.shutdown();
await bridge.stop();
await subscription.close();

// 5.–8. On bridges of their own, one at a time.
if (wanted(5) || wanted(6)) report.push(...(await createAndMany({ root, bridgeBinary: BRIDGE, create: wanted(5), burst: wanted(6) })));
if (wanted(7)) report.push(...(await perConversation({ root, bridgeBinary: BRIDGE, dir, events: EVENTS })));
if (wanted(8)) report.push(...(await coldBurst({ root, bridgeBinary: BRIDGE })));
if (wanted(9)) report.push(...(await hostToolRoundTrip({ root, bridgeBinary: BRIDGE })));
report.push(`load average at the end ${loadavg().map((x) => x.toFixed(2)).join(" ")}`);
console.log(report.join("\n"));
rmSync(dir, { recursive: true, force: true });
