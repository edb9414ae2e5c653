// The round trip of a host tool call through agentlane-bridge (issue 31),
// side by side with an approval's, for bench/bridge.mjs (its measurement 9;
// returns markdown lines). Runnable alone:
//
//   AGENTLANE_BRIDGE=target/quick/agentlane-bridge node bench/bridge/tools.mjs [rounds]
//
// The real host-tools backend (tests/e2e/backends/host_tools_app.py, with
// HOST_TOOLS_APP_APPROVALS=1: a real agentlane agent, a scripted model; one
// conversation, cold). Rounds alternate which goes first:
// - host tool: the run `calls [lookup]`; from the `ToolCall` item received
//   by this client, through `AnswerToolCall` (sent at once), to the
//   backend's `tool_end` of that call received on the run's stream (the
//   result is back in the backend and the agent went on);
// - 1 MB result: the same, the handler's result a 1 MB string;
// - approval: the run `calls [write_note]`, whose tool asks the host's
//   approval; from the pending `tool_approval` event received, through
//   `Approve` (sent at once), to the resolved `tool_approval` event
//   received on the run's stream.
// Both are what an adapter sees: the request in, its answer out, the
// backend's proof that it took the answer.
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startBridge } from "../../examples/clients/node/bridge.mjs";
import { AgentService, ConversationService } from "../../examples/clients/node/gen/agentlane/bridge/v1/bridge_pb.js";

const now = () => process.hrtime.bigint();
const ms = (ns) => Number(ns) / 1e6;
const fmt = (x, digits = 2) => x.toFixed(digits);
const percentile = (values, p) => [...values].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * values.length) - 1)];

const MEGABYTE = "0123456789abcdef".repeat(1024 * 1024 / 16);

function recordOf(json) {
  const event = JSON.parse(json);
  return event.type === "run_event" ? event.event : undefined;
}

/** One run; returns the round trip in ms (request item in → the backend's proof out). */
async function roundTrip(agent, conversationId, kind) {
  const prompt =
    kind === "approval"
      ? `calls ${JSON.stringify([{ name: "write_note", arguments: { path: "bench.txt", content: "x" } }])}`
      : `calls ${JSON.stringify([{ name: "lookup", arguments: { customer_id: "c-1" } }])}`;
  let asked;
  let took;
  const answers = [];
  for await (const { item } of agent.prompt({ text: prompt, conversationId })) {
    if (item.case === "toolCall") {
      asked = now();
      const resultJson = kind === "tool-1mb" ? JSON.stringify(MEGABYTE) : '"Ada Lovelace"';
      answers.push(agent.answerToolCall({ id: item.value.id, answer: { case: "resultJson", value: resultJson } }));
    } else if (item.case === "event") {
      const record = recordOf(item.value.json);
      if (record?.type === "tool_approval") {
        const status = record.payload.event.record.status;
        if (status === "pending") {
          asked = now();
          answers.push(agent.approve({ id: item.value.approvalId, allowed: true }));
        } else if (status === "resolved" && took === undefined) took = now();
      } else if (record?.type === "tool_end" && kind !== "approval" && took === undefined) took = now();
    }
  }
  await Promise.all(answers);
  // Each run starts from an empty conversation (the turn limit; a 1 MB
  // result in the history would slow every later model turn).
  await agent.reset({ conversationId });
  if (asked === undefined || took === undefined) throw new Error(`${kind}: the run did not ask or take its answer`);
  return ms(took - asked);
}

export async function hostToolRoundTrip({ root, bridgeBinary, rounds = 200 }) {
  const bridge = await startBridge(
    ["--app", "host_tools_app:create_backend", "--project-dir", join(root, "tests/e2e/backends"), "--python", join(root, ".venv/bin/python")],
    { bridge: bridgeBinary, env: { ...process.env, PYTHONPATH: join(root, "python/src"), HOST_TOOLS_APP_APPROVALS: "1" } },
  );
  try {
    const conversations = bridge.client(ConversationService);
    const agent = bridge.client(AgentService);
    const { conversation } = await conversations.createConversation({
      tools: [{ name: "lookup", description: "Looks a customer up.", inputSchemaJson: '{"type":"object","properties":{"customer_id":{"type":"string"}}}' }],
    });
    const kinds = ["tool", "tool-1mb", "approval"];
    const times = Object.fromEntries(kinds.map((k) => [k, []]));
    for (let i = 0; i < 10; i++) for (const kind of kinds) await roundTrip(agent, conversation.id, kind); // warm-up
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 ? [...kinds].reverse() : kinds;
      for (const kind of order) times[kind].push(await roundTrip(agent, conversation.id, kind));
    }
    const p = (kind, q) => percentile(times[kind], q);
    const lines = [
      `### 9. Host tool round trip vs approval round trip (${rounds} rounds each, one cold conversation, real backend)`,
      "",
      "| round trip | p50 ms | p99 ms | p50 ÷ approval p50 |",
      "| --- | --- | --- | --- |",
    ];
    for (const [kind, label] of [["approval", "approval (pending → Approve → resolved)"], ["tool", "host tool (ToolCall → AnswerToolCall → tool_end)"], ["tool-1mb", "host tool, 1 MB result"]]) {
      lines.push(`| ${label} | ${fmt(p(kind, 50))} | ${fmt(p(kind, 99))} | ${fmt(p(kind, 50) / p("approval", 50))} |`);
    }
    return lines;
  } finally {
    await bridge.stop();
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const root = fileURLToPath(new URL("../..", import.meta.url));
  const bridgeBinary = process.env.AGENTLANE_BRIDGE ?? join(root, "target/release/agentlane-bridge");
  const lines = await hostToolRoundTrip({ root, bridgeBinary, rounds: Number(process.argv[2] ?? 200) });
  console.log(lines.join("\n"));
}
