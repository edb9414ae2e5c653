// The session layer's own JS cost per event, measured in process: the
// session runs on a stand-in for spawnBridgeProcess that hands it the
// conversation's events (decoded once, beforehand) in batches of the size
// the native reader delivers, one batch per event-loop turn, and answers
// its commands on a stand-in stdin. No child, no pipe, no decoding: the
// time from the prompt to the run's result is the session's alone, less
// the same loop handing the events to a counting onEvent.
import { EventEmitter } from "node:events";
import { createRequire } from "node:module";
import { Writable } from "node:stream";

const require = createRequire(import.meta.url);

/** A build's modules: this tree's `dist/` by default, or another (the build before a change). */
export function buildAt(dist = new URL("../../dist/", import.meta.url).pathname) {
  return { processModule: require(`${dist}/process.js`), ...require(`${dist}/index.js`) };
}
const current = buildAt();

/** Events per batch, as the native reader delivered this conversation (6,364 events in 51 batches). */
const BATCH = 125;

/** The stand-in child and its callbacks, for one session. */
function standIn(events, ready, shutdown) {
  let callbacks;
  const child = new EventEmitter();
  child.pid = 1;
  child.exitCode = null;
  child.signalCode = null;
  child.kill = () => true;
  const exit = () => {
    child.exitCode = 0;
    callbacks.onExit(0, null);
    child.emit("exit", 0, null);
  };
  let pending = "";
  child.stdin = new Writable({
    write(chunk, _encoding, done) {
      pending += chunk.toString();
      for (let end = pending.indexOf("\n"); end >= 0; end = pending.indexOf("\n")) {
        const command = JSON.parse(pending.slice(0, end));
        pending = pending.slice(end + 1);
        if (command.type === "prompt") deliver(0);
        else if (command.type === "shutdown") setImmediate(() => (callbacks.onEvent(shutdown), exit()));
      }
      done();
    },
  });
  const deliver = (from) => {
    const to = Math.min(from + BATCH, events.length);
    for (let i = from; i < to; i++) callbacks.onEvent(events[i]);
    if (to < events.length) setImmediate(() => deliver(to));
  };
  const spawn = (_spec, given) => {
    callbacks = given;
    setImmediate(() => callbacks.onEvent(ready));
    return child;
  };
  return { spawn, deliver: (onEvent) => ((callbacks = { onEvent }), deliver(0)) };
}

/** The conversation's events, decoded, from the benchmark's own backend script. */
export async function conversationEvents(backendArgs) {
  const { spawnSync } = await import("node:child_process");
  const out = spawnSync(process.execPath, backendArgs, { input: `${JSON.stringify({ type: "prompt", text: "go" })}\n${JSON.stringify({ type: "shutdown" })}\n`, encoding: "utf8", maxBuffer: 1 << 30 });
  const lines = out.stdout.split("\n").filter(Boolean).map((line) => current.decodeBridgeEventLine(line));
  return { ready: lines[0], events: lines.slice(1, -1), shutdown: lines.at(-1) };
}

/** One run through a session on the stand-in: ms from the prompt to the result. */
export async function sessionInProcess({ ready, events, shutdown }, mode, build = current) {
  const { processModule, createAgentSession } = build;
  const { spawn } = standIn(events, ready, shutdown);
  const original = processModule.spawnBridgeProcess;
  processModule.spawnBridgeProcess = spawn;
  let session;
  try {
    const callbacks = mode === "callbacks" ? { onAssistantText: () => {}, onToolActivity: () => {}, onAgentActivity: () => {}, onApprovalResolved: () => {} } : {};
    session = await createAgentSession({ backend: { command: "stand-in" }, approvals: () => true, onDiagnostic: () => {}, ...callbacks });
  } finally {
    processModule.spawnBridgeProcess = original;
  }
  const t0 = performance.now();
  let result;
  if (mode === "callbacks") result = await session.run("go");
  else for await (const update of session.stream("go")) if (update.type === "result") result = update.result;
  const ms = performance.now() - t0;
  await session.close();
  if (result?.status !== "completed") throw new Error(`in-process run: ${JSON.stringify(result)}`);
  return ms;
}

/** The same batches and turns handed to a counting onEvent: the loop's own cost. */
export async function loopInProcess({ ready, events, shutdown }) {
  const { deliver } = standIn(events, ready, shutdown);
  const t0 = performance.now();
  await new Promise((resolve) => {
    let count = 0;
    deliver(() => {
      if (++count === events.length) resolve();
    });
  });
  return performance.now() - t0;
}
