// A scripted backend for the session benchmark: `ready`, then for each
// prompt a long run written as fast as the pipe takes it, then `shutdown`
// on request. The run: `turns` model turns, each with `deltas` text deltas,
// a tool call with an automatically resolved approval, and a state snapshot.
//   node conversation-backend.mjs <turns> <deltas>
import { createInterface } from "node:readline";

const [turns, deltas] = process.argv.slice(2).map(Number);
const lineage = { task_name: "Assistant", task_id: "task-1", parent_task_id: null, is_root: true };
const line = (type, fields) => JSON.stringify({ protocol_version: "1.0", type, ts: 1767225600.5, ...fields }) + "\n";
const record = (kind, payload) => line("run_event", { event: { type: kind, payload: { ...payload, kind } } });
const modelEvent = (kind, fields) => ({
  kind, raw: null, provider_event_type: null, item_index: null, item_type: null, text: null, tool_call_id: null,
  tool_call_index: null, arguments_delta: null, reasoning: null, reasoning_signature: null, response: null, error: null,
  continuation: null, async_tool_call: null, required_tool_call_ids: [], input_messages: null, steering: null, ...fields,
});
const approval = (status, n) => ({
  request_id: `tool-approval-${n}`,
  request: { tool_name: "write", operation: "create_file", cwd: "/srv", path: `/srv/f${n}.txt`, command: null, skill_name: null, reason: null, run_id: null, agent_name: "Assistant", tool_call_id: `call-${n}`, metadata: {} },
  approval_required_decision: { outcome: "allow", reason: "auto" },
  status,
  final_decision: status === "resolved" ? { outcome: "allow", reason: null } : null,
});

/** The whole run as one string (built once, before the prompt arrives). */
function conversation(prompt) {
  let out = line("run_start", { prompt }) + record("agent_start", lineage);
  let text = "";
  for (let turn = 0; turn < turns; turn++) {
    out += record("llm_start", { ...lineage, messages: [{ role: "user", content: prompt }] });
    for (let d = 0; d < deltas; d++) {
      const delta = d % 9 === 8 ? "end. " : `word${d} `;
      text += delta;
      out += record("model_stream", { event: modelEvent("text_delta", { text: delta }) });
    }
    const call = { id: `call-${turn}`, function: { name: "write", arguments: `{"path":"f${turn}.txt"}` }, type: "function" };
    out += record("tool_start", { ...lineage, tool_call: call, is_delegation: false });
    out += record("tool_approval", { event: { record: approval("pending", turn) } });
    out += record("tool_approval", { event: { record: approval("resolved", turn) } });
    out += record("tool_end", { ...lineage, tool_call: call, is_delegation: false, result: `wrote f${turn}.txt`, ok: true, error: null });
    out += record("state_snapshot", { boundary: "tool_round_end", snapshot: { turn_count: turn + 1, history_length: 3, response_count: turn + 1, shim_state: {} } });
  }
  out += record("agent_end", { ...lineage, result: null });
  out += line("run_complete", { final_output: text, turn_count: turns, response_count: turns, shim_state: {} });
  return out;
}

process.stdout.write(line("ready", { version: "0.0.0", package: "bench", metadata: {} }));
const prepared = conversation("go");
for await (const input of createInterface({ input: process.stdin })) {
  const command = JSON.parse(input);
  if (command.type === "prompt") {
    if (!process.stdout.write(prepared)) await new Promise((resolve) => process.stdout.once("drain", resolve));
  } else if (command.type === "shutdown") {
    process.stdout.write(line("shutdown", {}), () => process.exit(0));
  }
}
