// The main thread's CPU time (Linux: /proc/self/task/<pid>/schedstat) and
// its time runnable but waiting for a core, from the prompt to the result,
// for the session (callbacks and stream()) against the wiring alone and the
// wiring that also answers each approval (a hand-written host); 24
// rounds, each in another order, medians.
// Where the end-to-end difference of bench:session goes.
//   node --expose-gc bench/session/thread-cpu.mjs
import { createRequire } from "node:module";
import { join } from "node:path";
import { readFileSync } from "node:fs";
const require = createRequire(import.meta.url);
const { createAgentSession, spawnBridgeProcess, createBridgeChannel } = require("../../dist/index.js");
const backend = { command: process.execPath, args: [join(import.meta.dirname, "conversation-backend.mjs"), "60", "100"] };
const st = () => readFileSync(`/proc/self/task/${process.pid}/schedstat`, "latin1").split(" ").map(Number);
/** The session, consuming the run with callbacks, or with `streaming` through session.stream(). */
async function sess(streaming = false) {
  const session = await createAgentSession({ backend, approvals: () => true, onAssistantText: () => {}, onToolActivity: () => {}, onDiagnostic: () => {} });
  globalThis.gc(); await new Promise(r => setTimeout(r, 10));
  const a = st(); const s = performance.eventLoopUtilization();
  if (streaming) for await (const update of session.stream("go")) { if (update.type === "result" && update.result.status !== "completed") throw new Error("run failed"); }
  else await session.run("go");
  const u = performance.eventLoopUtilization(s).active; const b = st();
  await session.close();
  return [u, (b[0] - a[0]) / 1e6, (b[1] - a[1]) / 1e6];
}
/** The wiring alone; with `answer`, it also answers each pending approval as the session does (one `approve` written to stdin). */
async function wire(answer = false) {
  let channel, res;
  const done = new Promise((resolve) => (res = resolve));
  const ready = new Promise((resolve) => {
    const child = spawnBridgeProcess(backend, { onEvent(e) {
      if (e.type === "ready") resolve();
      else if (e.type === "run_complete") res();
      else if (answer && e.type === "run_event" && e.event.type === "tool_approval" && e.event.payload.event.record.status === "pending") channel.send({ type: "approve", id: e.event.payload.event.record.request_id, allowed: true });
    }, onExit() {} });
    channel = createBridgeChannel(child);
  });
  await ready; globalThis.gc(); await new Promise(r => setTimeout(r, 10));
  const a = st(); const s = performance.eventLoopUtilization();
  channel.send({ type: "prompt", text: "go" }); await done;
  const u = performance.eventLoopUtilization(s).active; const b = st();
  channel.shutdown(); await new Promise(r => setTimeout(r, 30));
  return [u, (b[0] - a[0]) / 1e6, (b[1] - a[1]) / 1e6];
}
const S = [], T = [], W = [], A = [];
// Each round in another order: what runs after what does not favour one contender.
const contenders = [[S, () => sess()], [T, () => sess(true)], [W, () => wire()], [A, () => wire(true)]];
for (let i = 0; i < 24; i++) {
  for (let k = 0; k < contenders.length; k++) {
    const [into, run] = contenders[(i + k) % contenders.length];
    into.push(await run());
  }
}
const med = (a, k) => a.map(x => x[k]).sort((p, q) => p - q)[a.length >> 1];
for (const [n, X] of [["session, callbacks", S], ["session, stream()", T], ["wiring", W], ["wiring + approvals answered", A]]) console.log(n, "elu", med(X, 0).toFixed(1), "thread cpu", med(X, 1).toFixed(1), "runnable-waiting", med(X, 2).toFixed(1));
const per = (X, Y, k) => ((med(X, k) - med(Y, k)) * 1e6 / 6364).toFixed(0);
console.log("callbacks over the wiring that answers the approvals: cpu diff per event ns", per(S, A, 1), "elu diff per event ns", per(S, A, 0));
console.log("stream() over the wiring that answers the approvals: cpu diff per event ns", per(T, A, 1), "elu diff per event ns", per(T, A, 0));
console.log("over the wiring alone: cpu diff per event ns", per(S, W, 1), "elu diff per event ns", per(S, W, 0));
