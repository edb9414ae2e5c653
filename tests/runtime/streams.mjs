// Streams over real children: spawnBridgeProcess (native reader threads on
// the addon's socket pairs, the runtime's child_process, its event loop)
// and wireBridgeProcess (the runtime's own pipes), a bad line in the middle
// never poisoning what follows.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createBridgeChannel, spawnBridgeProcess, wireBridgeProcess, BridgeDecodeError } from "@agentlanejs/process-bridge-native";
import { test, waitFor } from "./harness.mjs";

const ready = JSON.stringify({ protocol_version: "1.0", type: "ready", ts: 1, version: "0.22.0", package: "agentlane-process-bridge", metadata: {} });
const runStart = JSON.stringify({ protocol_version: "1.0", type: "run_start", ts: 2, prompt: "after the bad lines" });
const unknownType = JSON.stringify({ protocol_version: "1.0", type: "launch", ts: 3 });
/** A child writing: ready, a line that is not JSON, one of an unknown type, run_start; a stderr line; exit 3. */
const script = 'printf "%s\\n" "$L1" "not json" "$L3" "$L2"; echo "to stderr" >&2; exit 3';
const env = { ...process.env, L1: ready, L2: runStart, L3: unknownType };

/** Collects everything spawnBridgeProcess reports, and the order of it. */
function collector() {
  const seen = { events: [], decodeErrors: [], invalid: [], stderr: [], order: [], exit: undefined, started: undefined };
  const callbacks = {
    onEvent: (event) => (seen.events.push(event), seen.order.push(`event ${event.type}`)),
    onDecodeError: (error, line) => (seen.decodeErrors.push({ error, line }), seen.order.push(`error ${error.code}`)),
    onInvalidLine: (line) => seen.invalid.push(line),
    onStderr: (line) => seen.stderr.push(line),
    onStarted: (info) => (seen.started = info),
    onExit: (code, signal) => ((seen.exit = { code, signal }), seen.order.push("exit")),
    onSpawnError: (error) => seen.order.push(`spawn-error ${error.code}`),
  };
  return { seen, callbacks };
}

function checkDelivered(seen) {
  const expected = ["event ready", "error invalid-json", "error unknown-type", "event run_start"];
  assert.deepEqual(seen.order, seen.exit === undefined ? expected : [...expected, "exit"]);
  assert.deepEqual(seen.events[1], JSON.parse(runStart));
  assert.ok(seen.decodeErrors.every(({ error }) => error instanceof BridgeDecodeError));
  assert.deepEqual(seen.invalid, ["not json", unknownType]);
  assert.deepEqual(seen.stderr, ["to stderr"]);
}

for (const supervise of [true, false]) {
  const mode = supervise ? "supervised" : "grouped";
  test(`streams: spawnBridgeProcess (${mode}) delivers events in order past bad lines, stderr, then the exit code`, async () => {
    const { seen, callbacks } = collector();
    const child = spawnBridgeProcess({ command: "/bin/sh", args: ["-c", script], env, supervise }, callbacks);
    assert.equal(child.stdout, null);
    await waitFor(() => seen.exit !== undefined, 10_000, `no exit; saw ${JSON.stringify(seen.order)}`);
    checkDelivered(seen);
    assert.deepEqual(seen.exit, { code: 3, signal: null });
    assert.equal(seen.started?.mode, mode);
    assert.ok(seen.started.pid > 0);
  });
}

test("streams: a command written through createBridgeChannel reaches the child's stdin", async () => {
  const { seen, callbacks } = collector();
  // Echoes its first stdin line back as the prompt of a run_start.
  const echo = 'read line; printf \'{"protocol_version":"1.0","type":"run_start","ts":1,"prompt":%s}\\n\' "$(printf %s "$line" | sed \'s/.*"text":\\("[^"]*"\\).*/\\1/\')"';
  const child = spawnBridgeProcess({ command: "/bin/sh", args: ["-c", echo] }, callbacks);
  const channel = createBridgeChannel(child);
  assert.equal(channel.trySend({ type: "prompt", text: "over the socket" }), "sent");
  await waitFor(() => seen.exit !== undefined, 10_000, `no exit; saw ${JSON.stringify(seen.order)}`);
  assert.deepEqual(seen.order, ["event run_start", "exit"]);
  assert.equal(seen.events[0].prompt, "over the socket");
  assert.deepEqual(seen.exit, { code: 0, signal: null });
});

test("streams: a missing command is an onSpawnError with its errno code, then onExit with -errno, never a throw", async () => {
  // Ten times: the supervisor's report and its exit race (under Bun the
  // report was once read after the exit, which then said 127).
  for (let attempt = 0; attempt < 10; attempt += 1) {
    const { seen, callbacks } = collector();
    spawnBridgeProcess({ command: "/nonexistent/backend", supervise: true }, callbacks);
    await waitFor(() => seen.exit !== undefined, 10_000, `no exit; saw ${JSON.stringify(seen.order)}`);
    assert.deepEqual(seen.order, ["spawn-error ENOENT", "exit"]);
    assert.deepEqual(seen.exit, { code: -2, signal: null }, `attempt ${attempt}`);
  }
});

test("streams: wireBridgeProcess over the runtime's own child pipes", async () => {
  const { seen, callbacks } = collector();
  const child = spawn("/bin/sh", ["-c", script], { env, stdio: ["ignore", "pipe", "pipe"] });
  const wiring = wireBridgeProcess(child, callbacks);
  const closed = new Promise((resolve) => child.on("close", (code) => resolve(code)));
  assert.equal(await closed, 3);
  // The last data can come in the turn after `close` on some runtimes.
  await waitFor(() => seen.events.length === 2 && seen.stderr.length === 1, 2_000, `saw ${JSON.stringify(seen.order)}`);
  wiring.dispose();
  checkDelivered(seen);
});
