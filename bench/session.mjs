// Session layer benchmark: a long conversation (thousands of text deltas,
// many tool calls with approvals) from a scripted backend in a real child
// process. JS-thread time (event-loop utilization, main thread only) during
// the run, with the session layer (createAgentSession + run with callbacks,
// and the same run consumed through session.stream()) against the process
// wiring alone (spawnBridgeProcess + a counting onEvent) and against a
// hand-written host: the same wiring that also answers each pending approval
// with an `approve` command, the protocol work every host does. The
// difference from the hand-written host is what the session layer itself
// costs per event (writing a command to the child's stdin is not: about
// 33 µs of the JS thread's CPU per write here, the same for any host). That
// difference also carries the effects of sharing the machine's cores with
// the backend and the reader thread (session/thread-cpu.mjs separates CPU
// from waiting for a core), so the session's own JS cost is also measured
// in process (see session/in-process.mjs): the same events, no child, no
// decoding.
//
//   npm run bench:session          (node --expose-gc bench/session.mjs)
import { createRequire } from "node:module";
import { join } from "node:path";
import { median } from "./harness.mjs";
import { buildAt, conversationEvents, loopInProcess, sessionInProcess } from "./session/in-process.mjs";

const require = createRequire(import.meta.url);
const { createAgentSession, createBridgeChannel, spawnBridgeProcess } = require("../dist/index.js");

const TURNS = 60;
const DELTAS = 100;
const EVENTS = 2 + TURNS * (1 + DELTAS + 5) + 2; // run_start, agent_start, per turn, agent_end, run_complete
const backend = { command: process.execPath, args: [join(import.meta.dirname, "session", "conversation-backend.mjs"), String(TURNS), String(DELTAS)] };

async function withSession(build = { createAgentSession }) {
  let chunks = 0;
  let tools = 0;
  const session = await build.createAgentSession({
    backend,
    approvals: () => true,
    onAssistantText: () => chunks++,
    onToolActivity: () => tools++,
    onAgentActivity: () => {},
    onApprovalResolved: () => {},
    onDiagnostic: () => {},
  });
  globalThis.gc?.();
  const start = performance.eventLoopUtilization();
  const t0 = performance.now();
  const result = await session.run("go");
  const elu = performance.eventLoopUtilization(start);
  const wall = performance.now() - t0;
  await session.close();
  if (result.status !== "completed" || tools !== TURNS * 2) throw new Error(`session run incomplete: ${JSON.stringify(result).slice(0, 80)} tools=${tools}`);
  return { active: elu.active, wall, chunks };
}

async function withStream() {
  let chunks = 0;
  let tools = 0;
  let result;
  const session = await createAgentSession({ backend, approvals: () => true, onDiagnostic: () => {} });
  globalThis.gc?.();
  const start = performance.eventLoopUtilization();
  const t0 = performance.now();
  for await (const update of session.stream("go")) {
    if (update.type === "text") chunks++;
    else if (update.type === "tool") tools++;
    else if (update.type === "result") result = update.result;
  }
  const elu = performance.eventLoopUtilization(start);
  const wall = performance.now() - t0;
  await session.close();
  if (result?.status !== "completed" || tools !== TURNS * 2) throw new Error(`streamed run incomplete: ${JSON.stringify(result).slice(0, 80)} tools=${tools}`);
  return { active: elu.active, wall, chunks };
}

/** spawnBridgeProcess + a counting onEvent; with `answer`, the hand-written host: each pending approval answered with `approve`. */
async function wiringOnly(answer = false) {
  let events = 0;
  let resolveDone;
  const done = new Promise((resolve) => (resolveDone = resolve));
  let resolveReady;
  const ready = new Promise((resolve) => (resolveReady = resolve));
  const exited = new Promise((resolve) => {
    const child = spawnBridgeProcess(backend, {
      onEvent(event) {
        if (event.type === "ready") return resolveReady();
        events++;
        if (event.type === "run_complete") resolveDone(events);
        else if (answer && event.type === "run_event" && event.event.type === "tool_approval") {
          const { record } = event.event.payload.event;
          if (record.status === "pending") wiringOnly.channel.send({ type: "approve", id: record.request_id, allowed: true });
        }
      },
      onExit: resolve,
    });
    wiringOnly.channel = createBridgeChannel(child);
  });
  await ready;
  globalThis.gc?.();
  const start = performance.eventLoopUtilization();
  const t0 = performance.now();
  wiringOnly.channel.send({ type: "prompt", text: "go" });
  const delivered = await done;
  const elu = performance.eventLoopUtilization(start);
  const wall = performance.now() - t0;
  wiringOnly.channel.shutdown();
  await exited;
  if (delivered !== EVENTS) throw new Error(`expected ${EVENTS} events, got ${delivered}`);
  return { active: elu.active, wall };
}

// SESSION_BENCH_BEFORE=<another tree's dist/>: that build's session too, side by side (callbacks).
const before = process.env.SESSION_BENCH_BEFORE ? buildAt(process.env.SESSION_BENCH_BEFORE) : undefined;
const withSessionBefore = () => withSession(before);
const handWritten = () => wiringOnly(true);
const rounds = Number(process.env.ROUNDS) || 15;
const session = [];
const streamed = [];
const wiring = [];
const answering = [];
const earlierSession = [];
const orders = [
  [withSession, wiringOnly, withStream, handWritten],
  [wiringOnly, handWritten, withStream, withSession],
  [withStream, withSession, handWritten, wiringOnly],
  [handWritten, withStream, wiringOnly, withSession],
].map((order) => (before ? [...order, withSessionBefore] : order));
const resultsOf = new Map([[withSession, session], [withStream, streamed], [wiringOnly, wiring], [handWritten, answering], [withSessionBefore, earlierSession]]);
for (let round = -1; round < rounds; round++) {
  for (const run of orders[(round + 4) % 4]) {
    const result = await run();
    if (round >= 0) resultsOf.get(run).push(result);
  }
}
const s = median(session.map((r) => r.active));
const st = median(streamed.map((r) => r.active));
const w = median(wiring.map((r) => r.active));
const h = median(answering.map((r) => r.active));
const perEvent = (ms) => `${((ms * 1e6) / EVENTS).toFixed(0)} ns`;
console.log(`node ${process.version}; ${EVENTS} events per run (${TURNS} turns x ${DELTAS} text deltas + tool calls with approvals); ${rounds} interleaved rounds, medians`);
console.log("| | JS-thread time per run | per event | wall time per run |");
console.log("| --- | ---: | ---: | ---: |");
console.log(`| decoding alone (spawnBridgeProcess, counting onEvent) | ${w.toFixed(1)} ms | ${perEvent(w)} | ${median(wiring.map((r) => r.wall)).toFixed(1)} ms |`);
console.log(`| hand-written host (the same, answering each approval with \`approve\`) | ${h.toFixed(1)} ms | ${perEvent(h)} | ${median(answering.map((r) => r.wall)).toFixed(1)} ms |`);
console.log(`| session layer (createAgentSession, run) | ${s.toFixed(1)} ms | ${perEvent(s)} | ${median(session.map((r) => r.wall)).toFixed(1)} ms |`);
console.log(`| session layer (createAgentSession, session.stream) | ${st.toFixed(1)} ms | ${perEvent(st)} | ${median(streamed.map((r) => r.wall)).toFixed(1)} ms |`);
console.log(`| session layer's own share (over the hand-written host), callbacks | ${(s - h).toFixed(1)} ms | ${perEvent(s - h)} | |`);
console.log(`| session layer's own share (over the hand-written host), streaming | ${(st - h).toFixed(1)} ms | ${perEvent(st - h)} | |`);
console.log(`| session over decoding alone (its share + the approve commands' writes), callbacks | ${(s - w).toFixed(1)} ms | ${perEvent(s - w)} | |`);
console.log(`| session over decoding alone, streaming | ${(st - w).toFixed(1)} ms | ${perEvent(st - w)} | |`);
if (before) {
  const e = median(earlierSession.map((r) => r.active));
  console.log(`| the build in ${process.env.SESSION_BENCH_BEFORE}: session layer (run) | ${e.toFixed(1)} ms | ${perEvent(e)} | ${median(earlierSession.map((r) => r.wall)).toFixed(1)} ms |`);
  console.log(`| the build in ${process.env.SESSION_BENCH_BEFORE}: its own share (over the hand-written host) | ${(e - h).toFixed(1)} ms | ${perEvent(e - h)} | |`);
}
console.log(`\nsession / decoding alone: ${(s / w).toFixed(2)}x (callbacks), ${(st / w).toFixed(2)}x (streaming); text chunks delivered per run: ${session[0].chunks}`);

// The session's own JS cost, in process: the same events, decoded
// beforehand, handed over in the reader's batch size, one batch per turn.
const conversation = await conversationEvents(backend.args);
const inProcess = { callbacks: [], streaming: [], loop: [], before: [] };
for (let round = -5; round < 31; round++) {
  const callbacks = await sessionInProcess(conversation, "callbacks");
  const streaming = await sessionInProcess(conversation, "stream");
  const loop = await loopInProcess(conversation);
  const earlier = before ? await sessionInProcess(conversation, "callbacks", before) : 0;
  if (round < 0) continue;
  inProcess.callbacks.push(callbacks);
  inProcess.streaming.push(streaming);
  inProcess.loop.push(loop);
  inProcess.before.push(earlier);
}
const loop = median(inProcess.loop);
const ns = (ms) => ((ms * 1e6) / conversation.events.length).toFixed(0);
console.log(`\nIn process (no child, no decoding; ${conversation.events.length} events, batches of 125, one per turn; 31 rounds, medians):`);
console.log("| | per run | session's own cost per event |");
console.log("| --- | ---: | ---: |");
console.log(`| handing the events to a counting onEvent | ${loop.toFixed(2)} ms | |`);
console.log(`| session, callbacks (run) | ${median(inProcess.callbacks).toFixed(2)} ms | ${ns(median(inProcess.callbacks) - loop)} ns |`);
console.log(`| session, streaming API (stream) | ${median(inProcess.streaming).toFixed(2)} ms | ${ns(median(inProcess.streaming) - loop)} ns |`);
if (before) {
  const earlier = median(inProcess.before);
  console.log(`| the build in ${process.env.SESSION_BENCH_BEFORE}, callbacks | ${earlier.toFixed(2)} ms | ${ns(earlier - loop)} ns |`);
  console.log(`\nbefore / now, callbacks: ${(earlier / median(inProcess.callbacks)).toFixed(2)}x`);
}
