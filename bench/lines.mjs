// Representative event lines, shaped like what agentlane==0.22.0 writes
// (see tests/fixtures/recorded). Deterministic: no randomness, no clock.

const envelope = (type, ts, fields) => JSON.stringify({ protocol_version: "1.0", type, ts, ...fields });
const lineage = { task_name: "Assistant", task_id: "task-1", parent_task_id: null, is_root: true };
const toolCall = { id: "call-7", function: { arguments: '{"path":"notes.txt"}', name: "write" }, type: "function" };

/** A text_delta run_event of about 420 bytes, as the backend writes it. */
export function textDelta(i = 0) {
  return envelope("run_event", 1767225601.1 + i / 1000, {
    event: {
      type: "model_stream",
      payload: {
        event: {
          kind: "text_delta", raw: null, provider_event_type: null, item_index: null, item_type: null,
          text: `word${i % 97} `, tool_call_id: null, tool_call_index: null, arguments_delta: null,
          reasoning: null, reasoning_signature: null, response: null, error: null, continuation: null,
          async_tool_call: null, required_tool_call_ids: [], input_messages: null, steering: null,
        },
        kind: "model_stream",
      },
    },
  });
}

/** An llm_start carrying `count` chat messages. */
export function llmStart(count = 200) {
  const messages = [{ role: "system", content: "You are a careful assistant. Answer briefly and cite files." }];
  for (let i = 1; i < count; i++) {
    messages.push(
      i % 3 === 0
        ? { role: "tool", tool_call_id: `call-${i}`, content: `result ${i}: ${"lorem ipsum ".repeat(8)}` }
        : { role: i % 2 ? "user" : "assistant", content: `message ${i} ${"dolor sit amet ".repeat(10)}` },
    );
  }
  return envelope("run_event", 1767225601.02, { event: { type: "llm_start", payload: { ...lineage, messages, kind: "llm_start" } } });
}

/** A nested JSON structure of roughly `bytes` bytes (a file listing). */
export function nestedResult(bytes) {
  const files = [];
  let size = 0;
  for (let i = 0; size < bytes; i++) {
    const entry = { path: `src/module_${i}/file_${i}.ts`, size: i * 37, tags: ["ts", "src", i % 2 ? "odd" : "even"], meta: { owner: `user${i % 13}`, mtime: 1767225600 + i, hidden: false, lines: [i, i + 1, i + 2] } };
    size += JSON.stringify(entry).length + 1;
    files.push(entry);
  }
  return { files, total: files.length };
}

/** A tool_end whose raw result is `result`. */
export function toolEnd(result) {
  return envelope("run_event", 1767225603.2, {
    event: { type: "tool_end", payload: { ...lineage, tool_call: toolCall, result, ok: true, error: null, is_delegation: false, kind: "tool_end" } },
  });
}

/** A stream of `count` small events in a realistic mix. */
export function smallStream(count = 100_000) {
  const out = [];
  for (let i = 0; i < count; i++) {
    const r = i % 50;
    if (r < 44) out.push(textDelta(i));
    else if (r === 44) out.push(envelope("run_event", 1767225602, { event: { type: "tool_start", payload: { ...lineage, tool_call: toolCall, is_delegation: false, kind: "tool_start" } } }));
    else if (r === 45) out.push(toolEnd("wrote 12 bytes"));
    else if (r === 46) out.push(envelope("run_event", 1767225604.5, { event: { type: "state_snapshot", payload: { boundary: "tool_round_end", snapshot: { turn_count: 2, history_length: 5, response_count: 1, shim_state: {} }, kind: "state_snapshot" } } }));
    else if (r === 47) out.push(envelope("run_start", 1767225601, { prompt: `prompt ${i}` }));
    else if (r === 48) out.push(envelope("run_event", 1767225601.01, { event: { type: "agent_start", payload: { ...lineage, kind: "agent_start" } } }));
    else out.push(envelope("run_complete", 1767225605.5, { final_output: `answer ${i}`, turn_count: 2, response_count: 2, shim_state: {} }));
  }
  return out;
}
