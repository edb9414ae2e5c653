// `@agentlanejs/process-bridge-native/testing` on the runtime: the scripted
// backend (a real child, run by the runtime's own executable), a replay of
// the transcript a scripted session's flight recorder made, and the
// in-memory fake child for attachAgentSession.
import assert from "node:assert/strict";
import { attachAgentSession, createAgentSession } from "@agentlanejs/process-bridge-native";
import { fakeBackendChild, replayBackend, scriptedBackend, transcriptOf } from "@agentlanejs/process-bridge-native/testing";
import { test } from "./harness.mjs";

const script = {
  runs: [
    {
      steps: [
        { text: "Saving your note. " },
        { tool: "save_note", args: { path: "todo.txt" }, approval: { reason: "Writes a file." }, result: "saved" },
        { text: "Done." },
      ],
    },
  ],
};
const unbounded = { lines: Infinity, bytes: Infinity, maxLineBytes: Infinity };
let transcript;

test("testing: scriptedBackend runs a scripted conversation, the approval asked and answered", async () => {
  const fake = scriptedBackend(script);
  try {
    const asked = [];
    const session = await createAgentSession({
      backend: fake.backend,
      flightRecorder: unbounded,
      approvals: ({ request, reason }) => (asked.push(`${request.tool_name}: ${reason}`), true),
    });
    try {
      const result = await session.run("Save a note");
      assert.equal(result.status, "completed");
      assert.equal(result.finalOutput, "Done.");
      assert.deepEqual(asked, ["save_note: Writes a file."]);
      assert.deepEqual(fake.commands().map((command) => command.type), ["prompt", "approve"]);
    } finally {
      await session.close();
    }
    transcript = transcriptOf(session.flightRecord);
  } finally {
    fake.dispose();
  }
});

test("testing: replayBackend replays the recorded transcript with no mismatch", async () => {
  assert.ok(transcript, "no transcript recorded");
  const replay = replayBackend(transcript);
  try {
    const session = await createAgentSession({ backend: replay.backend, approvals: () => true });
    try {
      const result = await session.run("Save a note");
      assert.equal(result.finalOutput, "Done.");
    } finally {
      await session.close();
    }
    assert.deepEqual(replay.mismatches(), []);
    assert.deepEqual(replay.commands().map((command) => command.type), ["prompt", "approve", "shutdown"]);
  } finally {
    replay.dispose();
  }
});

test("testing: fakeBackendChild drives attachAgentSession byte by byte", async () => {
  const child = fakeBackendChild({ onStdinEnd: "exit" });
  const starting = attachAgentSession(child, { approvals: () => true });
  child.emitEvent({ type: "ready", version: "0.22.0", package: "agentlane-process-bridge", metadata: {} });
  const session = await starting;
  const running = session.run("hi");
  const prompt = await child.nextCommand();
  assert.equal(prompt.type, "prompt");
  assert.equal(prompt.text, "hi");
  child.emitEvent({ type: "run_start", prompt: "hi" });
  child.emitEvent({ type: "run_complete", final_output: "hello", turn_count: 1, response_count: 1, shim_state: {} });
  const result = await running;
  assert.equal(result.status, "completed");
  assert.equal(result.finalOutput, "hello");
  const closing = session.close();
  assert.equal((await child.nextCommand()).type, "shutdown");
  child.exit(0);
  await closing;
  assert.equal(child.exitCode, 0);
});
