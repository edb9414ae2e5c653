// Many conversations in one agentlane-bridge (issue 22), measured for
// bench/bridge.mjs (its measurements 5–7; each returns markdown lines):
//
// 5. CreateConversation → its answer (which comes once the backend's
//    `ready` line did), warm and cold, interleaved (rounds alternate which
//    goes first), each conversation closed before the next: the real demo
//    backend (examples/backend), one bridge with --warm whose prefork
//    server is up before the first round.
// 6. 100 conversations created at once on that bridge (warm): the time
//    until the last answer, the bridge's RSS, and each backend's USS
//    (Private_Clean + Private_Dirty) and PSS from /proc/<pid>/smaps_rollup,
//    summed over its process group (the fork's supervisor and the Python
//    process).
// 7. Measurements 1 and 2 of bench/bridge.mjs (100,000 small events through
//    Subscribe; Prompt → first item) per conversation, with 1 and with 20
//    conversations active at once, rounds alternating: the node backend of
//    bench/bridge/backend.mjs, cold (it starts in ~50 ms and answers from
//    files, so the bridge and this client are what is measured). This one
//    process reads every stream (one Node thread, as one client would).
import { readdirSync, readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join } from "node:path";
import { median } from "../harness.mjs";
import { startBridge } from "../../examples/clients/node/bridge.mjs";
import { AgentService, ConversationService, StartMode } from "../../examples/clients/node/gen/agentlane/bridge/v1/bridge_pb.js";

const now = () => process.hrtime.bigint();
const ms = (ns) => Number(ns) / 1e6;
const fmt = (x, digits = 1) => x.toFixed(digits);
const mb = (kb) => fmt(kb / 1024);
/** Nearest rank: of 30 samples the p99 is the largest. */
const percentile = (values, p) => [...values].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * values.length) - 1)];
const load = () => fmt(loadavg()[0], 2);

function safeRead(path) {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/** kB fields of /proc/<pid>/smaps_rollup (Rss, Pss, Private_*). */
function rollup(pid) {
  const text = safeRead(`/proc/${pid}/smaps_rollup`);
  const field = (name) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(text)?.[1] ?? 0);
  return { rss: field("Rss"), pss: field("Pss"), uss: field("Private_Clean") + field("Private_Dirty") };
}

/** The live members of a process group. */
function groupMembers(pgid) {
  const members = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const fields = statFields(name);
    if (Number(fields[2]) === pgid && fields[0] !== "Z") members.push(Number(name));
  }
  return members;
}

function statFields(pid) {
  const stat = safeRead(`/proc/${pid}/stat`);
  return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
}
const parentOf = (pid) => Number(statFields(pid)[1]);

/** `process-bridge-supervisor --adopt <pid>`: the supervisor of one warm fork. */
function isForkSupervisor(pid) {
  const args = safeRead(`/proc/${pid}/cmdline`).split("\0");
  return args[0].endsWith("process-bridge-supervisor") && args.includes("--adopt");
}

function vmRssKb(pid) {
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(safeRead(`/proc/${pid}/status`))?.[1] ?? 0);
}

/** Bridge arguments for the demo backend. */
function demoArgs(root, ...extra) {
  return ["--app", "demo_app:create_backend", "--project-dir", join(root, "examples/backend"), "--python", join(root, ".venv/bin/python"), ...extra];
}

/** 5 and 6 (one bridge with --warm, the demo backend). */
export async function createAndMany({ root, bridgeBinary, rounds = 30, many = 100, create = true, burst = true }) {
  const report = [];
  const bridge = await startBridge(demoArgs(root, "--warm", "--no-default-conversation", "--max-conversations", String(many + 1)), {
    bridge: bridgeBinary,
    timeoutMs: 60_000,
  });
  const conversations = bridge.client(ConversationService);
  try {
    // 5. One of each first, not counted (the first fork maps the server's pages in).
    if (create) {
      const modes = [StartMode.WARM, StartMode.COLD];
      const times = { [StartMode.WARM]: [], [StartMode.COLD]: [] };
      const loads = [load()];
      for (let round = -1; round < rounds; round++) {
        for (const mode of round % 2 ? [...modes].reverse() : modes) {
          globalThis.gc?.();
          const start = now();
          const { conversation } = await conversations.createConversation({ startMode: mode });
          const took = ms(now() - start);
          if (conversation.startMode !== mode) throw new Error(`asked for start mode ${mode}, got ${conversation.startMode}`);
          await conversations.closeConversation({ id: conversation.id });
          if (round >= 0) times[mode].push(took);
        }
        if (round % 10 === 9) loads.push(load());
      }
      const [warm, cold] = [times[StartMode.WARM], times[StartMode.COLD]];
      report.push(
        `### 5. CreateConversation → ready (the demo backend; ${rounds} of each, interleaved, each closed before the next)`,
        "",
        `| start | p50 | p99 (nearest rank: of ${rounds}, the largest) | min |`,
        "| --- | ---: | ---: | ---: |",
        `| warm (--warm, forked from the prefork server) | ${fmt(median(warm))} ms | ${fmt(percentile(warm, 99))} ms | ${fmt(Math.min(...warm))} ms |`,
        `| cold (a new Python process importing the app) | ${fmt(median(cold))} ms | ${fmt(percentile(cold, 99))} ms | ${fmt(Math.min(...cold))} ms |`,
        `| warm/cold, median of per-round ratios | ${fmt(median(warm.map((w, i) => w / cold[i])), 3)} | | |`,
        "",
        `load average (1 min) during it: ${loads.join(", ")}`,
        "",
      );
    }

    // 6. Many at once.
    if (burst) {
      const before = load();
      const idleRss = vmRssKb(bridge.info.pid);
      const start = now();
      const readyAt = [];
      const created = await Promise.all(
        Array.from({ length: many }, () =>
          conversations.createConversation({}).then(({ conversation }) => {
            readyAt.push(ms(now() - start));
            return conversation;
          }),
        ),
      );
      const allReady = ms(now() - start);
      await new Promise((resolve) => setTimeout(resolve, 1000)); // settled
      const bridgeRss = vmRssKb(bridge.info.pid);
      // A warm backend: the Python fork (the leader of its own process
      // group) and, as its parent, the fork's `process-bridge-supervisor
      // --adopt` (in the prefork server's group).
      const backends = created.map((c) => {
        const python = groupMembers(c.backendPid).map(rollup);
        const parent = parentOf(c.backendPid);
        const supervisor = isForkSupervisor(parent) ? [rollup(parent)] : [];
        const sum = (list, key) => list.reduce((total, m) => total + m[key], 0);
        return {
          processes: python.length + supervisor.length,
          uss: sum(python, "uss"),
          pss: sum(python, "pss"),
          rss: sum(python, "rss"),
          withSupervisorUss: sum([...python, ...supervisor], "uss"),
          withSupervisorPss: sum([...python, ...supervisor], "pss"),
        };
      });
      // The prefork server: its Python process (the forks' grandparent) and its supervisor.
      const server = parentOf(parentOf(created[0].backendPid));
      const prefork = [server, parentOf(server)]
        .map(rollup)
        .reduce((total, m) => ({ uss: total.uss + m.uss, pss: total.pss + m.pss }), { uss: 0, pss: 0 });
      const listed = (await conversations.listConversations({})).conversations.length;
      const closeStart = now();
      await Promise.all(created.map((c) => conversations.closeConversation({ id: c.id })));
      const closed = ms(now() - closeStart);
      const m = (key) => median(backends.map((b) => b[key]));
      report.push(
        `### 6. ${many} conversations created at once (--warm, the demo backend)`,
        "",
        `- all ${many} ready (${listed} listed) after **${fmt(allReady)} ms** (the first after ${fmt(Math.min(...readyAt))} ms, the median after ${fmt(median(readyAt))} ms)`,
        `- the bridge's RSS: ${mb(idleRss)} MiB with none, **${mb(bridgeRss)} MiB** with ${many}`,
        `- per backend, median of ${many}: the Python fork **USS ${mb(m("uss"))} MiB, PSS ${mb(m("pss"))} MiB** (RSS ${mb(m("rss"))} MiB); with its supervisor (${median(backends.map((b) => b.processes))} processes) USS ${mb(m("withSupervisorUss"))} MiB, PSS ${mb(m("withSupervisorPss"))} MiB`,
        `- the prefork server (its supervisor and Python, shared by all): USS ${mb(prefork.uss)} MiB, PSS ${mb(prefork.pss)} MiB`,
        `- all ${many} closed at once (CloseConversation each, answered once its backend exited): ${fmt(closed)} ms`,
        "",
        `load average (1 min): ${before} before, ${load()} after`,
        "",
      );
    }
  } finally {
    await bridge.stop();
  }
  return report;
}

/** 7. Throughput and first-event latency per conversation, 1 and 20 active. */
export async function perConversation({ root, bridgeBinary, dir, events, active = 20, rounds = 3 }) {
  const backend = join(root, "bench/bridge/backend.mjs");
  const bridge = await startBridge(["--app", "bench:none", "--no-default-conversation", "--max-conversations", String(active), "--", process.execPath, backend, dir], {
    bridge: bridgeBinary,
  });
  const agent = bridge.client(AgentService);
  const conversations = bridge.client(ConversationService);
  const report = [];
  try {
    const ids = (await Promise.all(Array.from({ length: active }, () => conversations.createConversation({ startMode: StartMode.COLD })))).map(
      ({ conversation }) => conversation.id,
    );

    // Throughput: a Subscribe stream per conversation, counting parsed events.
    const rows = [];
    for (const batched of [false, true]) {
      const counters = ids.map(() => ({ wanted: null, any: false }));
      const controllers = ids.map(() => new AbortController());
      const streams = ids.map((conversationId, k) =>
        (async () => {
          const seen = () => {
            counters[k].any = true;
            const w = counters[k].wanted;
            if (w && --w.count === 0) {
              counters[k].wanted = null;
              w.resolve(now());
            }
          };
          for await (const { item } of agent.subscribe({ batched, conversationId }, { signal: controllers[k].signal })) {
            if (item.case === "batch") for (const _ of JSON.parse(item.value.json)) seen();
            else if (item.case === "event") (JSON.parse(item.value.json), seen());
          }
        })().catch((error) => {
          if (!controllers[k].signal.aborted) throw error;
        }),
      );
      // Every subscription in place (it has seen a run), and quiet again.
      await Promise.all(
        ids.map(async (conversationId, k) => {
          while (!counters[k].any) {
            for await (const _ of agent.prompt({ text: "latency", conversationId }));
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        }),
      );
      await new Promise((resolve) => setTimeout(resolve, 500));
      const burst = (k) => {
        const done = new Promise((resolve) => (counters[k].wanted = { count: events + 1, resolve }));
        const start = now();
        return agent.configure({ patchJson: "{}", conversationId: ids[k] }).then(() => done).then((end) => ms(end - start));
      };
      const one = [];
      const many = [];
      const loads = [load()];
      for (let round = 0; round < rounds; round++) {
        for (const which of round % 2 ? ["many", "one"] : ["one", "many"]) {
          globalThis.gc?.();
          if (which === "one") one.push(await burst(round % active));
          else {
            const start = now();
            const each = await Promise.all(ids.map((_, k) => burst(k)));
            many.push({ each, last: ms(now() - start) });
          }
          loads.push(load());
        }
      }
      controllers.forEach((c) => c.abort());
      await Promise.all(streams);
      const rate = (t, n = events) => Math.round(n / (t / 1000)).toLocaleString("en");
      const perConv = many.flatMap((r) => r.each);
      const last = median(many.map((r) => r.last));
      const name = batched ? "Subscribe{batched: true}" : "Subscribe (one event per message)";
      rows.push(
        `| ${name}, 1 active | ${fmt(median(one))} ms | ${rate(median(one))} | ${rate(median(one))} |`,
        `| ${name}, ${active} active at once | ${fmt(median(perConv))} ms (last: ${fmt(last)} ms) | ${rate(median(perConv))} | ${rate(last, events * active)} |`,
      );
      report.push(`(${name}: load average (1 min) during it: ${loads.join(", ")})`);
    }
    report.unshift(
      `### 7a. ${events.toLocaleString("en")} small events per conversation (Configure → Subscribe → JSON.parse), with 1 and with ${active} conversations active (${rounds} rounds each, alternating)`,
      "",
      "| stream, conversations bursting at once | median time per conversation | events/s per conversation | events/s, all together |",
      "| --- | ---: | ---: | ---: |",
      ...rows,
      "",
    );

    // First-event latency: Prompt → its first item (run_start), parsed.
    const latency = async (conversationId) => {
      const start = now();
      let t = null;
      for await (const { item } of agent.prompt({ text: "latency", conversationId })) {
        if (t === null && item.case === "event") {
          JSON.parse(item.value.json);
          t = now();
        }
      }
      return ms(t - start);
    };
    const one = [];
    const many = [];
    const loads = [load()];
    const perBlock = 20;
    for (let block = 0; block < 10; block++) {
      for (const which of block % 2 ? ["many", "one"] : ["one", "many"]) {
        if (which === "one") for (let i = 0; i < perBlock; i++) one.push(await latency(ids[block % active]));
        else
          await Promise.all(
            ids.map(async (id) => {
              for (let i = 0; i < perBlock; i++) many.push(await latency(id));
            }),
          );
      }
      if (block % 3 === 2) loads.push(load());
    }
    const p90 = (values) => percentile(values, 90);
    report.push(
      "",
      `### 7b. First-event latency (Prompt call → run_start), with 1 and with ${active} conversations prompting at once (10 blocks of ${perBlock} prompts per conversation, alternating)`,
      "",
      "| conversations prompting at once | samples | median | p90 |",
      "| --- | ---: | ---: | ---: |",
      `| 1 | ${one.length} | ${fmt(median(one), 3)} ms | ${fmt(p90(one), 3)} ms |`,
      `| ${active} (each prompting in turn) | ${many.length} | ${fmt(median(many), 3)} ms | ${fmt(p90(many), 3)} ms |`,
      "",
      `load average (1 min) during it: ${loads.join(", ")}`,
      "",
    );
  } finally {
    await bridge.stop();
  }
  return report;
}

/** When a process started, in ms since the epoch (/proc: boot time + its start in clock ticks). */
const bootMs = Number(/^btime (\d+)$/m.exec(safeRead("/proc/stat"))[1]) * 1000;
const startedAtMs = (pid) => bootMs + (Number(statFields(pid)[19]) * 1000) / 100; // USER_HZ: 100 on Linux

/**
 * 8. Cold creates at once (issue 30): the demo backend, `count`
 * `CreateConversation` calls in flight together on a bridge of their own,
 * with the start slots (`--max-concurrent-starts`, the default here) and
 * with no limit (`0`), rounds alternating which goes first. Per create:
 * when its answer came, and its backend's own spawn → ready (the answer's
 * time less the process's start time in /proc: what the ready timeout
 * bounds).
 */
export async function coldBurst({ root, bridgeBinary, count = 20, rounds = 2 }) {
  const modes = { slots: [], unlimited: [] };
  let slots;
  const loads = [load()];
  for (let round = 0; round < rounds; round++) {
    for (const mode of round % 2 ? ["unlimited", "slots"] : ["slots", "unlimited"]) {
      const extra = mode === "slots" ? [] : ["--max-concurrent-starts", "0"];
      const bridge = await startBridge(demoArgs(root, "--no-default-conversation", "--max-conversations", String(count), "--ready-timeout-ms", "300000", ...extra), {
        bridge: bridgeBinary,
      });
      if (mode === "slots") slots = bridge.info.conversations.maxConcurrentStarts;
      const conversations = bridge.client(ConversationService);
      try {
        const begun = Date.now();
        const created = await Promise.all(
          Array.from({ length: count }, async () => {
            const { conversation } = await conversations.createConversation({ startMode: StartMode.COLD });
            const at = Date.now();
            return { id: conversation.id, answered: at - begun, own: at - startedAtMs(conversation.backendPid) };
          }),
        );
        modes[mode].push(created);
        await Promise.all(created.map((c) => conversations.closeConversation({ id: c.id })));
      } finally {
        await bridge.stop();
      }
      loads.push(load());
    }
  }
  const row = (name, runs) => {
    const per = (pick) => median(runs.map(pick));
    const answered = (run) => run.map((c) => c.answered);
    const own = (run) => run.map((c) => c.own);
    return `| ${name} | ${fmt(per((r) => Math.min(...answered(r))))} ms | ${fmt(per((r) => median(answered(r))))} ms | ${fmt(per((r) => Math.max(...answered(r))))} ms | ${fmt(per((r) => median(own(r))))} ms | **${fmt(per((r) => Math.max(...own(r))))} ms** |`;
  };
  return [
    `### 8. ${count} cold CreateConversation calls at once (the demo backend; ${rounds} rounds, alternating; medians over the rounds)`,
    "",
    "| start slots | first answer | median answer | all answered | a backend's spawn → ready, median | longest spawn → ready |",
    "| --- | ---: | ---: | ---: | ---: | ---: |",
    row(`${slots} (the default: the cores, at least 2)`, modes.slots),
    row("no limit (`--max-concurrent-starts 0`)", modes.unlimited),
    "",
    `load average (1 min): ${loads.join(", ")}`,
    "",
  ];
}
