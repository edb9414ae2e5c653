// The codec as a user's program calls it: the protocol's worked examples
// (tests/fixtures/protocol-examples.json, docs/protocol.md §10) decoded and
// refused exactly as on Node, and commands encoded. The addon does the work,
// so this is N-API (values, errors made by the registered factory, external
// strings for large lines) on the runtime under test.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import * as api from "@agentlanejs/process-bridge-native";
import { test } from "./harness.mjs";

const examples = JSON.parse(readFileSync(join(process.env.PBN_REPO, "tests", "fixtures", "protocol-examples.json"), "utf8"));

test("codec: every valid worked example decodes to what JSON.parse gives", () => {
  assert.ok(examples.valid.length > 30);
  for (const { name, line } of examples.valid) {
    assert.deepEqual(api.decodeBridgeEventLine(line), JSON.parse(line), name);
    assert.deepEqual(api.tryDecodeBridgeEventLine(line), JSON.parse(line), name);
  }
});

test("codec: every invalid worked example throws BridgeDecodeError with its code, message and field paths", () => {
  assert.ok(examples.invalid.length > 40);
  for (const example of examples.invalid) {
    const label = `${example.id} ${example.name}`;
    let thrown;
    try {
      api.decodeBridgeEventLine(example.line);
    } catch (error) {
      thrown = error;
    }
    assert.ok(thrown instanceof api.BridgeDecodeError, `${label}: threw ${thrown}`);
    assert.ok(thrown instanceof Error, label);
    assert.equal(thrown.name, "BridgeDecodeError", label);
    assert.equal(thrown.code, example.code, label);
    assert.deepEqual([...thrown.fields], example.fields, label);
    assert.ok(Object.isFrozen(thrown.fields), label);
    if (example.messageIsPrefix) assert.ok(thrown.message.startsWith(example.message), `${label}: ${thrown.message}`);
    else assert.equal(thrown.message, example.message, label);
    assert.equal(api.tryDecodeBridgeEventLine(example.line), null, label);
  }
});

test("codec: a missing nested field names its path (the README's example)", () => {
  const record = {
    type: "tool_end",
    payload: {
      kind: "tool_end", task_name: "Assistant", task_id: "t1", parent_task_id: null, is_root: true,
      tool_call: { id: "call-1", type: "function", function: { name: "save_note", arguments: "{}" } },
      is_delegation: false, result: "saved", ok: true, error: null,
    },
  };
  const line = JSON.stringify({ protocol_version: "1.0", type: "run_event", ts: 1767225600.1, event: record });
  const event = api.decodeBridgeEventLine(line);
  assert.ok(event.type === "run_event" && api.isNativeEvent(event.event, "tool_end"));
  assert.equal(event.event.payload.result, "saved");
  assert.throws(() => api.decodeBridgeEventLine(line.replace('"id":"call-1",', "")), (error) => {
    assert.ok(error instanceof api.BridgeDecodeError);
    assert.equal(error.code, "invalid-payload");
    assert.deepEqual([...error.fields], ["event.payload.tool_call.id"]);
    return true;
  });
});

test("codec: a 2 MB line and non-ASCII text decode intact (external strings)", () => {
  const text = `${"é".repeat(1 << 20)}\u{1F600}`;
  const line = JSON.stringify({ protocol_version: "1.0", type: "run_start", ts: 1, prompt: text });
  const event = api.decodeBridgeEventLine(line);
  assert.equal(event.prompt.length, text.length);
  assert.equal(event.prompt, text);
});

test("codec: encodeBridgeCommand frames the worked examples' commands; BridgeCommandError codes", () => {
  for (const frame of examples.encodedCommands) {
    const { protocol_version: _version, ...command } = JSON.parse(frame);
    assert.equal(api.encodeBridgeCommand(command), `${frame}\n`);
  }
  const cases = [
    [null, "not-a-command-object"],
    [{ type: "launch" }, "unknown-type"],
    [{ type: "prompt", text: 5 }, "invalid-field"],
    [{ type: "prompt", text: "\ud800" }, "unpaired-surrogate"],
  ];
  for (const [command, code] of cases) {
    assert.throws(() => api.encodeBridgeCommand(command), (error) => {
      assert.ok(error instanceof api.BridgeCommandError, `${JSON.stringify(command)}: ${error}`);
      assert.ok(error instanceof TypeError);
      assert.equal(error.code, code, JSON.stringify(command));
      return true;
    });
  }
});

test("codec: import and require share one BridgeDecodeError class and one addon", () => {
  const required = createRequire(import.meta.url)("@agentlanejs/process-bridge-native");
  assert.equal(required.BridgeDecodeError, api.BridgeDecodeError);
  assert.equal(required.decodeBridgeEventLine, api.decodeBridgeEventLine);
  assert.equal(api.PROTOCOL_VERSION, "1.0");
  assert.ok(Object.isFrozen(api.KNOWN_EVENT_TYPES) && api.KNOWN_EVENT_TYPES.includes("ready"));
  assert.equal(api.isSupportedProtocolVersion("1.7"), true);
  assert.equal(api.isSupportedProtocolVersion("2.0"), false);
});
