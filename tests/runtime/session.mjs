// The session with the real backend (examples/backend's demo app, a
// scripted model, started as `.venv/bin/python -m agentlane_process_bridge`
// under the supervisor): ready, run() and stream() with the approval the
// agent asks for answered by the policy, close() leaving no process, and
// the typed errors of a start that cannot happen and of a closed session.
import assert from "node:assert/strict";
import { createAgentSession, SessionClosedError, SessionStartError } from "@agentlanejs/process-bridge-native";
import { join } from "node:path";
import { runtime, test, waitGone } from "./harness.mjs";

const backend = {
  command: process.env.PBN_PYTHON,
  args: ["-m", "agentlane_process_bridge", "--app", "demo_app:create_backend"],
  cwd: process.env.PBN_BACKEND_DIR,
};

let session;
const asked = [];
const text = [];
const diagnostics = [];

test(
  "session: createAgentSession starts the real backend, supervised",
  async () => {
    session = await createAgentSession({
      backend,
      readyTimeoutMs: 60_000,
      approvals: ({ request }) => (asked.push(request.tool_name), request.tool_name === "save_note"),
      onAssistantText: (chunk) => text.push(chunk.delta),
      onDiagnostic: (diagnostic) => diagnostics.push(diagnostic.kind),
    });
    assert.equal(typeof session.ready.version, "string");
    assert.equal(session.process?.mode, "supervised", `diagnostics: ${JSON.stringify(diagnostics)}`);
    assert.ok(session.process.pid > 0 && session.process.supervisorPid > 0);
  },
  { timeoutMs: 70_000 },
);

test("session: run() completes, the save_note approval answered by the policy", async () => {
  assert.ok(session, "no session");
  const result = await session.run("Please save a note about the bridge.");
  assert.equal(result.status, "completed", JSON.stringify(result));
  assert.match(String(result.finalOutput), /Saved note/);
  assert.deepEqual(asked, ["save_note"]);
  assert.ok(text.join("").length > 0, "no assistant text came through onAssistantText");
});

test("session: stream() yields text, the tool, the approval and last the result", async () => {
  assert.ok(session, "no session");
  const types = [];
  let result;
  for await (const update of session.stream("Please save a note about the stream.")) {
    types.push(update.type);
    if (update.type === "result") result = update.result;
  }
  assert.equal(types.at(-1), "result");
  for (const type of ["text", "tool", "approval"]) assert.ok(types.includes(type), `no ${type} update in ${types.join(",")}`);
  assert.equal(result.status, "completed", JSON.stringify(result));
  assert.match(String(result.finalOutput), /Saved note/);
  assert.deepEqual(asked, ["save_note", "save_note"]);
});

test("session: close() ends the backend and its supervisor; a run after it is SessionClosedError", async () => {
  assert.ok(session, "no session");
  const { pid, supervisorPid } = session.process;
  await session.close();
  await waitGone([pid, supervisorPid], 5_000, "the session's processes");
  await assert.rejects(session.run("again"), (error) => {
    assert.ok(error instanceof SessionClosedError, String(error));
    assert.equal(error.code, "session-closed");
    return true;
  });
});

test(
  "session: a tool of the application's own, over the host channel (the demo agent calls lookup beside save_note); on Bun, refused no-host-channel",
  async () => {
    const topics = [];
    const starting = createAgentSession({
      // The host channel's module from the repository (the demo host puts it on PYTHONPATH too).
      backend: { ...backend, env: { ...process.env, PYTHONPATH: join(process.env.PBN_REPO, "python", "src") } },
      readyTimeoutMs: 60_000,
      approvals: () => true,
      tools: {
        lookup: {
          description: "Looks a topic up in the host's notes.",
          inputSchema: { type: "object", properties: { topic: { type: "string" } }, required: ["topic"] },
          handler: ({ topic }) => (topics.push(topic), `the host's notes on ${topic}`),
        },
      },
    });
    if (runtime === "bun") {
      await assert.rejects(starting, (error) => {
        assert.ok(error instanceof SessionStartError, String(error));
        assert.equal(error.code, "no-host-channel");
        assert.match(error.message, /Bun/);
        return true;
      });
      return;
    }
    const own = await starting;
    try {
      const result = await own.run("Please save a note about the host channel.");
      assert.equal(result.status, "completed", JSON.stringify(result));
      assert.deepEqual(topics, ["process bridge"]);
      assert.match(String(result.finalOutput), /the host's notes on process bridge/);
    } finally {
      await own.close();
    }
  },
  { timeoutMs: 90_000 },
);

test("session: a backend that cannot start is SessionStartError spawn-failed", async () => {
  await assert.rejects(createAgentSession({ backend: { command: "/nonexistent/python" } }), (error) => {
    assert.ok(error instanceof SessionStartError, String(error));
    assert.equal(error.code, "spawn-failed");
    return true;
  });
});
