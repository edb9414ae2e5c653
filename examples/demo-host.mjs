// The demo host: a real conversation with a real AgentLane backend (the
// scripted demo agent in examples/backend, no network), through this
// package's public API only. Run it with `npm run demo`, which sets up
// everything first.
//
// It checks the control path first (the backend starts and its `ready`
// reports a supported protocol version), then: streams the assistant's
// text, approves the tool call the agent asks approval for (the `approve`
// command: host -> backend), shows the tool result and the final answer,
// shuts the backend down cleanly and prints a timing summary.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const { spawnBridgeProcess, createBridgeChannel, isNativeEvent, PROTOCOL_VERSION } = require("../dist/index.js");

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
// DEMO_PYTHON and DEMO_BACKEND_DIR override where the backend comes from.
const python = process.env.DEMO_PYTHON ?? join(root, ".venv", "bin", "python");
const prompt = process.argv[2] ?? "Please save a note about the process bridge.";
const READY_TIMEOUT_MS = 30_000;

const started = performance.now();
const marks = {};
const mark = (name) => (marks[name] ??= performance.now() - started);
const stderrTail = [];
let eventCount = 0;
let ready = false;
let failure = null;

/** Records the first failure (printed after the summary) and shuts down. */
function fail(message) {
  if (failure) return;
  failure = message;
  channel.shutdown();
}

const child = spawnBridgeProcess(
  { command: python, args: ["-m", "agentlane_process_bridge", "--app", "demo_app:create_backend"], cwd: process.env.DEMO_BACKEND_DIR ?? join(root, "examples", "backend") },
  {
    onEvent(event) {
      eventCount += 1;
      if (!ready) {
        if (event.type !== "ready") return fail(`the backend's first event was "${event.type}", not "ready".`);
        ready = true;
        clearTimeout(readyTimer);
        mark("ready");
        console.log(`backend ready: agentlane ${event.version}, protocol ${event.protocol_version} (host ${PROTOCOL_VERSION}), config ${JSON.stringify(event.config)}`);
        console.log(`\nyou: ${prompt}\nassistant: `);
        channel.send({ type: "prompt", text: prompt });
        return;
      }
      switch (event.type) {
        case "run_event":
          return onRecord(event.event);
        case "run_complete":
          mark("complete");
          console.log(`\n\nfinal answer: ${JSON.stringify(event.final_output)}`);
          console.log(`(${event.turn_count} model turns)`);
          return channel.shutdown();
        case "error":
          return fail(`the backend reported an error (${event.scope}): ${event.message}`);
        case "shutdown":
          return mark("shutdown");
      }
    },
    onDecodeError(error, line) {
      if (!ready && error.fields.includes("protocol_version")) {
        fail(`the backend speaks an unsupported protocol version: ${error.message}`);
      } else {
        fail(`the backend sent an invalid line: ${error.message}\n  ${line.slice(0, 200)}`);
      }
    },
    onStderr(line) {
      stderrTail.push(line);
      if (stderrTail.length > 20) stderrTail.shift();
    },
    onSpawnError(error) {
      fail(
        error.code === "ENOENT"
          ? `cannot start Python at ${python}. Run \`npm run demo\` (it creates .venv), or set DEMO_PYTHON.`
          : `cannot start the backend: ${error.message}`,
      );
    },
    onExit(code, signal) {
      clearTimeout(readyTimer);
      mark("exit");
      if (!ready && !failure) {
        const reason = stderrTail.filter((l) => l.startsWith("agentlane_process_bridge:")).at(-1) ?? stderrTail.at(-1) ?? "no output";
        failure = `the backend exited before it was ready (status ${code ?? signal}): ${reason}`;
      }
      summary(code, signal);
      if (failure) console.error(`\ndemo: ${failure}`);
      process.exitCode = failure ? 1 : 0;
    },
  },
);

const channel = createBridgeChannel(child, { onSendError: (message) => fail(`cannot write to the backend: ${message}`) });
const readyTimer = setTimeout(() => fail(`no ready event within ${READY_TIMEOUT_MS / 1000} s.`), READY_TIMEOUT_MS);

function onRecord(record) {
  if (isNativeEvent(record, "model_stream")) {
    const delta = record.payload.event;
    if (delta.kind === "text_delta" && typeof delta.text === "string") {
      mark("first token");
      process.stdout.write(delta.text);
    }
  } else if (isNativeEvent(record, "tool_start")) {
    const call = record.payload.tool_call;
    console.log(`\n\n[tool call] ${call.function.name}(${call.function.arguments})`);
  } else if (isNativeEvent(record, "tool_approval")) {
    const approval = record.payload.event.record;
    if (approval.status === "pending") {
      const request = approval.request;
      console.log(`[approval needed] ${request.tool_name}: ${request.operation} ${request.path ?? ""} (${approval.approval_required_decision.reason ?? "no reason given"})`);
      console.log(`[host] approving ${approval.request_id}`);
      mark("approval asked");
      channel.send({ type: "approve", id: approval.request_id, allowed: true });
    } else {
      console.log(`[approval resolved] ${approval.final_decision.outcome}`);
    }
  } else if (isNativeEvent(record, "tool_end")) {
    console.log(`[tool result] ${JSON.stringify(record.payload.result)}\nassistant: `);
  }
}

function summary(code, signal) {
  const ms = (name) => (marks[name] === undefined ? "-" : `${marks[name].toFixed(0)} ms`);
  console.log("\ntiming (from spawn):");
  console.log(`  backend ready      ${ms("ready")}`);
  console.log(`  first token        ${ms("first token")}`);
  console.log(`  approval asked     ${ms("approval asked")}`);
  console.log(`  run complete       ${ms("complete")}`);
  console.log(`  shutdown event     ${ms("shutdown")}`);
  console.log(`  backend exited     ${ms("exit")} (status ${code ?? signal})`);
  console.log(`  events decoded     ${eventCount}`);
}
