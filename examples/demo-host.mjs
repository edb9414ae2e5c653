// The demo host: a real conversation with a real AgentLane backend (the
// scripted demo agent in examples/backend, no network), through the
// session layer, which is what applications use. Run it with
// `npm run demo`, which sets up everything first.
//
// It checks the control path first (the backend starts and its `ready`
// reports a supported protocol version, else it says what is wrong), then:
// streams the assistant's text, approves the tool call the agent asks
// approval for (the approval policy answers with an `approve` command:
// host -> backend), answers the agent's call of the host's own `lookup`
// tool (the host channel: the handler below runs in this process, the
// result reaches the final answer), shows the tool results and the final
// answer, closes the session cleanly and prints a timing summary.
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const { createAgentSession, SessionStartError, PROTOCOL_VERSION } = require("../dist/index.js");

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
// DEMO_PYTHON and DEMO_BACKEND_DIR override where the backend comes from;
// DEMO_WARM=1 forks it from a prefork server (a warm start, docs/prefork.md).
const python = process.env.DEMO_PYTHON ?? join(root, ".venv", "bin", "python");
const backendDir = process.env.DEMO_BACKEND_DIR ?? join(root, "examples", "backend");
const warm = process.env.DEMO_WARM === "1" ? { warm: { fallback: "error" } } : {};
const prompt = process.argv[2] ?? "Please save a note about the process bridge.";

const started = performance.now();
const marks = {};
const mark = (name) => (marks[name] ??= performance.now() - started);
const stderrTail = [];
const problems = [];
let events = 0;

let session;
try {
  session = await createAgentSession({
    // PYTHONPATH: the host channel's module as this package ships it (python/);
    // an application installs it: pip install ./node_modules/@agentlanejs/process-bridge-native/python
    backend: {
      command: python,
      args: ["-m", "agentlane_process_bridge", "--app", "demo_app:create_backend"],
      cwd: backendDir,
      env: { ...process.env, PYTHONPATH: [join(root, "python", "src"), process.env.PYTHONPATH].filter(Boolean).join(":") },
      ...warm,
    },
    tools: {
      lookup: {
        description: "Looks a topic up in the host's own notes.",
        inputSchema: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
        handler: ({ topic }) => {
          mark("host tool called");
          console.log(`\n[host tool] lookup(${JSON.stringify(topic)}): answered by this process`);
          return `The host's notes on ${topic}: it hosts AgentLane agents from Node.`;
        },
      },
    },
    readyTimeoutMs: 30_000,
    textDelivery: "immediate",
    approvals: ({ request, reason }) => {
      mark("approval asked");
      console.log(`\n[approval needed] ${request.tool_name}: ${request.operation} ${request.path ?? ""} (${reason ?? "no reason given"})`);
      console.log("[host] approving");
      return true;
    },
    onEvent: () => {
      events += 1;
    },
    onAssistantText: (chunk) => {
      mark("first token");
      process.stdout.write(chunk.delta);
      if (chunk.done) process.stdout.write("\n");
    },
    onToolActivity: (activity) => {
      if (activity.phase === "start") console.log(`\n[tool call] ${activity.call.tool}(${JSON.stringify(activity.call.arguments)})`);
      if (activity.phase === "end") console.log(`[tool result] ${JSON.stringify(activity.result)}\n`);
    },
    onApprovalResolved: (resolution) => console.log(`[approval resolved] ${resolution.allowed ? "allow" : "deny"}`),
    onDiagnostic: (diagnostic) => {
      if (diagnostic.kind === "stderr") {
        stderrTail.push(diagnostic.line);
        if (stderrTail.length > 20) stderrTail.shift();
      } else if (diagnostic.kind === "protocol") {
        problems.push(
          diagnostic.error.fields.includes("protocol_version")
            ? `the backend speaks an unsupported protocol version: ${diagnostic.error.message}`
            : `the backend sent an invalid line: ${diagnostic.error.message}`,
        );
      } else {
        problems.push(`${diagnostic.kind}: ${diagnostic.message ?? diagnostic.error?.message ?? ""}`);
      }
    },
  });
} catch (error) {
  if (!(error instanceof SessionStartError)) throw error;
  console.error(`demo: ${startFailure(error.message)}`);
  process.exit(1);
}

mark("ready");
console.log(`backend ready: agentlane ${session.ready.version}, protocol ${PROTOCOL_VERSION}, config ${JSON.stringify(session.config)}, started ${session.process?.start}`);
console.log(`\nyou: ${prompt}\nassistant: `);
let exitCode = 0;
try {
  const result = await session.run(prompt);
  mark("complete");
  console.log(`\nfinal answer: ${JSON.stringify(result.finalOutput)}`);
  console.log(`(${result.turnCount} model turns)`);
} catch (error) {
  console.error(`demo: the run failed: ${error.message}`);
  exitCode = 1;
}
await session.close();
mark("closed");
summary();
for (const problem of problems) console.error(`demo: ${problem}`);
process.exitCode = exitCode || (problems.length > 0 ? 1 : 0);

/** Explains why the session could not start. */
function startFailure(message) {
  if (message.includes("ENOENT")) return `cannot start Python at ${python}. Run \`npm run demo\` (it creates .venv), or set DEMO_PYTHON.`;
  if (problems.length > 0) return problems[0];
  const reason = stderrTail.filter((l) => l.startsWith("agentlane_process_bridge:")).at(-1) ?? stderrTail.at(-1);
  if (message === "Backend exited before ready event.") return `the backend exited before it was ready: ${reason ?? "no output"}`;
  return `${message}${reason ? ` (${reason})` : ""}`;
}

function summary() {
  const ms = (name) => (marks[name] === undefined ? "-" : `${marks[name].toFixed(0)} ms`);
  console.log("\ntiming (from start):");
  console.log(`  backend ready      ${ms("ready")}`);
  console.log(`  first token        ${ms("first token")}`);
  console.log(`  approval asked     ${ms("approval asked")}`);
  console.log(`  host tool called   ${ms("host tool called")}`);
  console.log(`  run complete       ${ms("complete")}`);
  console.log(`  session closed     ${ms("closed")}`);
  console.log(`  events decoded     ${events}`);
}
