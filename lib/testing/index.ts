/**
 * `@agentlanejs/process-bridge-native/testing`: backends for an
 * application's own tests, without Python.
 *
 * - `scriptedBackend(script)`: a real tiny child process that answers each
 *   prompt with the next scripted run (text, reasoning, tool calls with
 *   approval requests, plans, failures) and the other commands as the real
 *   backend does.
 * - `replayBackend(transcript)`: writes a recorded transcript's events and
 *   checks each command the application sends against the recording.
 *
 * - `fakeBackendChild()`: an in-memory process for `attachAgentSession`,
 *   driven byte by byte by the test (`fake-child.ts`).
 *
 * The first two give a `backend` spec for `createAgentSession` (or
 * `spawnBridgeProcess`), `commands()` (what the application sent) and
 * `dispose()`; a replay also gives `mismatches()`.
 */
import { existsSync, mkdtempSync, readFileSync, rmdirSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { BridgeCommand, JsonObject, JsonValue } from "../protocol";
import type { BridgeProcessOptions } from "../process";
import type { FlightRecord } from "../session/flight-recorder";

export { fakeBackendChild, FakeBackendChild, type FakeBackendChildOptions, type FakeKillBehaviour } from "./fake-child";

/** One step of a scripted run, in order. */
export type ScriptedStep =
  /** A streamed text delta (`model_stream` / `text_delta`). */
  | { text: string; delayMs?: number }
  /** A reasoning delta. */
  | { reasoning: string; delayMs?: number }
  /**
   * A tool call: `tool_start`, then, with `approval`, a pending approval
   * record the run waits on until the application answers; then
   * `tool_end` with `result` (allowed) or the denial.
   */
  | { tool: string; args?: JsonObject; result?: JsonValue; approval?: boolean | { reason?: string; operation?: string; path?: string }; delayMs?: number }
  /**
   * A call of one of the application's own tools (the session's `tools`):
   * `tool_start`, the call over the host channel (the session's handler
   * runs, its arguments checked against its schema), then `tool_end` with
   * the handler's result, or its failure (`error.kind`: `tool-error`,
   * `invalid-arguments`, `timeout`, …). The backend lists the host's tools
   * before `ready`, as a factory with `host.tools()` does.
   */
  | { hostTool: string; args?: JsonObject; delayMs?: number }
  /** A plan update. */
  | { plan: { step: string; status: string }[]; delayMs?: number }
  /** Any native record, as is (`{ type, payload }`). */
  | { record: JsonObject; delayMs?: number }
  /** Any bridge event, as is (envelope fields are added). */
  | { event: JsonObject; delayMs?: number }
  /** The run fails with this message (a run-scoped `error`). */
  | { fail: string; delayMs?: number }
  /** Only waits. */
  | { delayMs: number };

export interface ScriptedRun {
  steps: ScriptedStep[];
  /**
   * `run_complete.final_output`. Default: the text after the last tool or
   * plan step, as a real agent's final output is its last model turn's text.
   */
  final?: JsonValue;
}

export interface BackendScript {
  /** What `ready` says (`config` also makes the backend answer `configure` with a merged document). */
  ready?: { version?: string; metadata?: JsonObject; config?: JsonObject };
  /** One run per prompt, in order; the last repeats. */
  runs?: ScriptedRun[];
  /** `"reject"` refuses every `configure` (code `rejected`). Default `"accept"`. */
  configure?: "accept" | "reject";
}

/** A backend for tests: its spec, and what the application sent it. */
export interface TestBackend {
  /** Give it as `createAgentSession({ backend })` (any spawn option can be added). */
  backend: BridgeProcessOptions;
  /** Every command the backend has received so far, in order. */
  commands(): BridgeCommand[];
  /** Removes its temporary files (the process ends with the session). */
  dispose(): void;
}

export interface ReplayBackend extends TestBackend {
  /** Where the commands the application sent differ from the recording. Empty when they all matched. */
  mismatches(): string[];
}

/** The child's program: beside this module once built (dist/testing/); from the sources, the built one. */
const child = existsSync(join(__dirname, "backend.js")) ? join(__dirname, "backend.js") : join(__dirname, "..", "..", "dist", "testing", "backend.js");

function start(mode: "scripted" | "replay", content: string): { backend: BridgeProcessOptions; read: () => { commands: BridgeCommand[]; mismatches: string[] }; dispose: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "bridge-testing-"));
  const source = join(dir, mode === "scripted" ? "script.json" : "transcript.ndjson");
  const log = join(dir, "log.json");
  try {
    writeFileSync(source, content);
    writeFileSync(log, JSON.stringify({ commands: [], mismatches: [] }));
  } catch (error) {
    // Out of descriptors or of disk: nothing is left behind, and the error
    // is the write's. Removed file by file: a recursive rmSync opens the
    // directory, and with no descriptor left it fails (on Node 24 with an
    // empty `code`) and would hide the write's EMFILE.
    for (const file of [source, log]) {
      try {
        unlinkSync(file);
      } catch {
        // Never written.
      }
    }
    try {
      rmdirSync(dir);
    } catch {
      // Already gone.
    }
    throw error;
  }
  return {
    backend: { command: process.execPath, args: [child, mode, source, log] },
    read: () => JSON.parse(readFileSync(log, "utf8")) as { commands: BridgeCommand[]; mismatches: string[] },
    dispose: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** A scripted backend (see the module's notes). */
export function scriptedBackend(script: BackendScript = {}): TestBackend {
  const { backend, read, dispose } = start("scripted", JSON.stringify(script));
  return { backend, commands: () => read().commands, dispose };
}

/**
 * A replay of a transcript: NDJSON lines `{"out": "<a line the backend
 * wrote>"}` and `{"in": <a command the host sent>}`, in order (what
 * `transcriptOf(flightRecord)` makes of a session's flight recorder). Each
 * `out` line is written when the commands before it have come; each command
 * is checked against the next `in` (its fields but the version).
 */
export function replayBackend(transcript: string): ReplayBackend {
  const { backend, read, dispose } = start("replay", transcript);
  return { backend, commands: () => read().commands, mismatches: () => read().mismatches, dispose };
}

/**
 * A transcript for `replayBackend` from a session's flight record
 * (`session.flightRecord`, `SessionClosedError.flightRecord`, or a protocol
 * diagnostic's): its stdout lines and commands, in order (stderr lines are
 * left out). The recorder must have kept the whole conversation, uncut:
 * record with `flightRecorder: { lines: Infinity, bytes: Infinity,
 * maxLineBytes: Infinity }` (its defaults keep the last 200 lines of at
 * most 4 Ki each); a record that was cut or lost its `ready` line throws a
 * `TypeError` that says which.
 */
export function transcriptOf(flightRecord: readonly FlightRecord[]): string {
  const cut = flightRecord.findIndex((record) => record.cut && record.stream !== "stderr");
  if (cut >= 0) {
    throw new TypeError(`transcriptOf: flight record ${cut} was cut to the recorder's maxLineBytes; record with flightRecorder: { maxLineBytes: Infinity }.`);
  }
  const first = flightRecord.find((record) => record.stream === "stdout");
  if (first === undefined || typeOf(first.line) !== "ready") {
    throw new TypeError("transcriptOf: the flight record does not start with the backend's ready line; record with flightRecorder: { lines: Infinity, bytes: Infinity }.");
  }
  return flightRecord
    .filter((record) => record.stream !== "stderr")
    .map((record) => JSON.stringify(record.stream === "stdout" ? { out: record.line } : { in: JSON.parse(record.line) }))
    .join("\n");
}

/** A line's `type`, or undefined when it is not a JSON object. */
function typeOf(line: string): unknown {
  try {
    return (JSON.parse(line) as { type?: unknown }).type;
  } catch {
    return undefined;
  }
}
