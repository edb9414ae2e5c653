/**
 * Judging a snapshot document before anything uses it: a resume from a
 * corrupted document, another agent's, or one of a schema this package does
 * not know would otherwise start a backend that fails later (or, for
 * another agent's, continue someone else's conversation).
 *
 * What is checked is agentlane 0.22.0's `AgentSnapshot` (`harness/_snapshot.py`)
 * with JSON's own types and no coercion (agentlane's pydantic also takes
 * `"3"` for a revision; agentlane never writes one): every field of the
 * document and of `state`, each history message's `role`, and each
 * response's fields that agentlane requires (`id`, `object`, `created`,
 * `model`, `choices` with their `index`, `finish_reason` and assistant
 * `message`). Deeper provider fields are agentlane's to judge when the
 * backend loads the snapshot. `__test__/stores/snapshot.test.ts` compares
 * the verdicts with agentlane's own.
 */
import { SnapshotError, type SnapshotErrorCode } from "../errors";
import type { Snapshot, SnapshotAgentId } from "./types";

/** The one `schema_version` agentlane 0.22.0 writes and reads. */
export const SNAPSHOT_SCHEMA_VERSION = 1;

/** What `checkSnapshot` compares besides the document's own shape. */
export interface SnapshotCheckOptions {
  /**
   * The agent the snapshot must belong to: its `type` (the agent
   * descriptor's name) and, when given, its `key`. A mismatch is
   * `snapshot-agent-mismatch`.
   */
  agentId?: { type: string; key?: string };
}

/** agentlane's `finish_reason` values (OpenAI's chat completion choice). */
const FINISH_REASONS = new Set(["stop", "length", "tool_calls", "content_filter", "function_call"]);

/** An aware ISO 8601 date-time as agentlane's pydantic reads one (`T`, `t` or a space; `Z` or an offset). */
const DATE_TIME = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,]\d+)?)?(?:[Zz]|[+-](\d{2})(?::?(\d{2}))?)$/;

type Json = Record<string, unknown>;

function fail(code: SnapshotErrorCode, field: string, why: string, cause?: unknown): never {
  const where = field === "" ? "the document" : field;
  throw new SnapshotError(`Snapshot refused (${code}): ${where} ${why}.`, code, field, cause === undefined ? undefined : { cause });
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return value.length > 40 ? "a string" : JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return typeof value === "object" ? "an object" : typeof value;
}

function isObject(value: unknown): value is Json {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function object(value: unknown, field: string): Json {
  if (!isObject(value)) fail("snapshot-corrupted", field, `must be an object, not ${describe(value)}`);
  return value;
}

function array(value: unknown, field: string): unknown[] {
  if (!Array.isArray(value)) fail("snapshot-corrupted", field, `must be an array, not ${describe(value)}`);
  return value;
}

function string(value: unknown, field: string, { nonEmpty = false } = {}): string {
  if (typeof value !== "string") fail("snapshot-corrupted", field, `must be a string, not ${describe(value)}`);
  if (nonEmpty && value === "") fail("snapshot-corrupted", field, "must not be empty");
  return value;
}

function count(value: unknown, field: string): number {
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < 0) {
    fail("snapshot-corrupted", field, `must be a whole number of at least 0, not ${describe(value)}`);
  }
  return value;
}

function dateTime(value: unknown, field: string): void {
  const text = string(value, field);
  const parts = DATE_TIME.exec(text);
  const [year, month, day, hour, minute, second = "0", offsetHours = "0", offsetMinutes = "0"] = (parts ?? []).slice(1);
  const valid =
    parts !== null &&
    Number(month) >= 1 &&
    Number(month) <= 12 &&
    Number(day) >= 1 &&
    Number(day) <= new Date(Date.UTC(Number(year), Number(month), 0)).getUTCDate() &&
    Number(hour) <= 23 &&
    Number(minute) <= 59 &&
    Number(second) <= 59 &&
    Number(offsetHours) <= 23 &&
    Number(offsetMinutes) <= 59;
  if (!valid) fail("snapshot-corrupted", field, `must be an ISO 8601 date and time with a time zone, not ${describe(text)}`);
}

function checkResponse(value: unknown, field: string): void {
  const response = object(value, field);
  string(response.id, `${field}.id`);
  if (response.object !== "chat.completion") fail("snapshot-corrupted", `${field}.object`, `must be "chat.completion", not ${describe(response.object)}`);
  if (typeof response.created !== "number" || !Number.isSafeInteger(response.created)) {
    fail("snapshot-corrupted", `${field}.created`, `must be a whole number, not ${describe(response.created)}`);
  }
  string(response.model, `${field}.model`);
  array(response.choices, `${field}.choices`).forEach((entry, index) => {
    const at = `${field}.choices.${index}`;
    const choice = object(entry, at);
    if (typeof choice.index !== "number" || !Number.isSafeInteger(choice.index)) fail("snapshot-corrupted", `${at}.index`, `must be a whole number, not ${describe(choice.index)}`);
    if (!FINISH_REASONS.has(choice.finish_reason as string)) {
      fail("snapshot-corrupted", `${at}.finish_reason`, `must be one of ${[...FINISH_REASONS].join(", ")}, not ${describe(choice.finish_reason)}`);
    }
    const message = object(choice.message, `${at}.message`);
    if (message.role !== "assistant") fail("snapshot-corrupted", `${at}.message.role`, `must be "assistant", not ${describe(message.role)}`);
  });
}

function checkState(value: unknown): void {
  const state = object(value, "state");
  if (!("instructions" in state)) fail("snapshot-corrupted", "state.instructions", "is missing");
  if (state.instructions !== null) string(state.instructions, "state.instructions");
  array(state.history, "state.history").forEach((entry, index) => {
    const message = object(entry, `state.history.${index}`);
    string(message.role, `state.history.${index}.role`);
  });
  array(state.responses, "state.responses").forEach((entry, index) => checkResponse(entry, `state.responses.${index}`));
  object(state.shim_state, "state.shim_state");
  count(state.turn_count, "state.turn_count");
}

/**
 * Checks that `document` is a snapshot agentlane 0.22.0 can resume from
 * (and, with `agentId`, that it is that agent's), and returns it typed.
 * Throws `SnapshotError`: `snapshot-version-unsupported` for another
 * `schema_version` (checked first: another version's shape is not this
 * one's), `snapshot-corrupted` for anything else that is wrong, then
 * `snapshot-agent-mismatch`; `field` names the failing field.
 */
export function checkSnapshot(document: unknown, options: SnapshotCheckOptions = {}): Snapshot {
  const snapshot = object(document, "");
  if (!("schema_version" in snapshot)) fail("snapshot-corrupted", "schema_version", "is missing");
  if (snapshot.schema_version !== SNAPSHOT_SCHEMA_VERSION) {
    fail("snapshot-version-unsupported", "schema_version", `is ${describe(snapshot.schema_version)}; this package reads version ${SNAPSHOT_SCHEMA_VERSION} (agentlane 0.22.0)`);
  }
  const agent = object(snapshot.agent_id, "agent_id");
  string(agent.type, "agent_id.type", { nonEmpty: true });
  string(agent.key, "agent_id.key", { nonEmpty: true });
  count(snapshot.revision, "revision");
  dateTime(snapshot.created_at, "created_at");
  checkState(snapshot.state);
  const expected = options.agentId;
  if (expected !== undefined) {
    if (agent.type !== expected.type) {
      fail("snapshot-agent-mismatch", "agent_id.type", `is ${describe(agent.type)}, another agent's: this one is ${describe(expected.type)}`);
    }
    if (expected.key !== undefined && agent.key !== expected.key) {
      fail("snapshot-agent-mismatch", "agent_id.key", `is ${describe(agent.key)}, another agent instance's: this one is ${describe(expected.key)}`);
    }
  }
  return snapshot as unknown as Snapshot;
}

/** Parses snapshot JSON text and checks it (`snapshot-corrupted` with the parser's error as `cause` for text that is not JSON). */
export function parseSnapshot(text: string, options: SnapshotCheckOptions = {}): Snapshot {
  let document: unknown;
  try {
    document = JSON.parse(text);
  } catch (cause) {
    fail("snapshot-corrupted", "", "is not JSON", cause);
  }
  return checkSnapshot(document, options);
}

/** The committed revision a snapshot carries (what the next `save` expects). */
export function snapshotRevision(snapshot: Snapshot): number {
  return snapshot.revision;
}

/** How many model turns the conversation has had (agentlane's runner stops at its `max_turns`). */
export function snapshotTurnCount(snapshot: Snapshot): number {
  return snapshot.state.turn_count;
}

/** Whose conversation it is. */
export function snapshotAgentId(snapshot: Snapshot): SnapshotAgentId {
  return { type: snapshot.agent_id.type, key: snapshot.agent_id.key };
}

/**
 * The text a store keeps for a snapshot: its JSON with `revision` first,
 * so that a store reads a stored revision from the text's first bytes
 * (`storedRevision`) without parsing the conversation. Still agentlane's
 * document: agentlane's own `JsonFileStateStore` loads it. A value JSON
 * cannot hold (a `BigInt`, a cycle) is `snapshot-corrupted`.
 */
export function encodeSnapshot(snapshot: Snapshot): string {
  try {
    // Object.assign keeps `revision` as the first key (its value is the same).
    return JSON.stringify(Object.assign({ revision: snapshot.revision }, snapshot));
  } catch (cause) {
    fail("snapshot-corrupted", "", "holds a value JSON cannot represent", cause);
  }
}

const LEADING_REVISION = /^\{"revision":(\d{1,15})[,}]/;

/** How many leading characters of stored text `leadingRevision` needs. */
export const LEADING_REVISION_CHARS = 32;

/**
 * The revision at the start of text `encodeSnapshot` wrote, or `undefined`
 * (other text, such as a file agentlane's own store wrote: parse it then).
 */
export function leadingRevision(text: string): number | undefined {
  const leading = LEADING_REVISION.exec(text.slice(0, LEADING_REVISION_CHARS));
  return leading === null ? undefined : Number(leading[1]);
}
