/**
 * Broken (and unusual but valid) snapshot documents, each made from the
 * one-turn fixture: judged against agentlane's own verdicts
 * (snapshot.test.ts) and by the Rust check against `checkSnapshot`
 * (snapshot-text.test.ts).
 */
import type { SnapshotErrorCode } from "../../lib/index";
import { fixture } from "./snapshots";

export type Doc = Record<string, any>;
export interface Case {
  name: string;
  change: (document: Doc) => unknown;
  /** `null`: accepted. */
  code: SnapshotErrorCode | null;
  field?: string;
  /** agentlane accepts it (pydantic coerces), this package does not: JSON's own types only. */
  stricter?: true;
}

/** Broken (and unusual but valid) documents, each made from the one-turn fixture. */
export const cases: Case[] = [
  { name: "an array", change: () => [], code: "snapshot-corrupted", field: "" },
  { name: "null", change: () => null, code: "snapshot-corrupted", field: "" },
  { name: "no schema_version", change: (d) => void delete d.schema_version, code: "snapshot-corrupted", field: "schema_version" },
  { name: "schema_version 2", change: (d) => void (d.schema_version = 2), code: "snapshot-version-unsupported", field: "schema_version" },
  { name: 'schema_version "1"', change: (d) => void (d.schema_version = "1"), code: "snapshot-version-unsupported", field: "schema_version" },
  { name: "schema_version true", change: (d) => void (d.schema_version = true), code: "snapshot-version-unsupported", field: "schema_version", stricter: true },
  { name: "no agent_id", change: (d) => void delete d.agent_id, code: "snapshot-corrupted", field: "agent_id" },
  { name: "agent_id a string", change: (d) => void (d.agent_id = "Scenario:fixture"), code: "snapshot-corrupted", field: "agent_id" },
  { name: "agent_id.type empty", change: (d) => void (d.agent_id.type = ""), code: "snapshot-corrupted", field: "agent_id.type" },
  { name: "agent_id.key a number", change: (d) => void (d.agent_id.key = 7), code: "snapshot-corrupted", field: "agent_id.key" },
  { name: "revision -1", change: (d) => void (d.revision = -1), code: "snapshot-corrupted", field: "revision" },
  { name: "revision 1.5", change: (d) => void (d.revision = 1.5), code: "snapshot-corrupted", field: "revision" },
  { name: 'revision "3"', change: (d) => void (d.revision = "3"), code: "snapshot-corrupted", field: "revision", stricter: true },
  { name: "no revision", change: (d) => void delete d.revision, code: "snapshot-corrupted", field: "revision", stricter: true },
  { name: "created_at without a time zone", change: (d) => void (d.created_at = "2026-01-01T00:00:00"), code: "snapshot-corrupted", field: "created_at" },
  { name: "created_at a date", change: (d) => void (d.created_at = "2026-01-01"), code: "snapshot-corrupted", field: "created_at" },
  { name: "created_at 30 February", change: (d) => void (d.created_at = "2026-02-30T10:00:00Z"), code: "snapshot-corrupted", field: "created_at" },
  { name: "created_at words", change: (d) => void (d.created_at = "yesterday"), code: "snapshot-corrupted", field: "created_at" },
  { name: "created_at a Unix time", change: (d) => void (d.created_at = 1767225600), code: "snapshot-corrupted", field: "created_at", stricter: true },
  { name: "no state", change: (d) => void delete d.state, code: "snapshot-corrupted", field: "state" },
  { name: "no instructions", change: (d) => void delete d.state.instructions, code: "snapshot-corrupted", field: "state.instructions" },
  { name: "instructions a number", change: (d) => void (d.state.instructions = 3), code: "snapshot-corrupted", field: "state.instructions" },
  { name: "history an object", change: (d) => void (d.state.history = {}), code: "snapshot-corrupted", field: "state.history" },
  { name: "a history entry a string", change: (d) => void d.state.history.push("hi"), code: "snapshot-corrupted", field: "state.history.2" },
  { name: "a message without role", change: (d) => void delete d.state.history[0].role, code: "snapshot-corrupted", field: "state.history.0.role" },
  { name: "a response without id", change: (d) => void delete d.state.responses[0].id, code: "snapshot-corrupted", field: "state.responses.0.id" },
  { name: "a response of another object", change: (d) => void (d.state.responses[0].object = "response"), code: "snapshot-corrupted", field: "state.responses.0.object" },
  { name: "a response without choices", change: (d) => void delete d.state.responses[0].choices, code: "snapshot-corrupted", field: "state.responses.0.choices" },
  { name: "an unknown finish_reason", change: (d) => void (d.state.responses[0].choices[0].finish_reason = "bogus"), code: "snapshot-corrupted", field: "state.responses.0.choices.0.finish_reason" },
  { name: "a choice by the user", change: (d) => void (d.state.responses[0].choices[0].message.role = "user"), code: "snapshot-corrupted", field: "state.responses.0.choices.0.message.role" },
  { name: 'a response created "5"', change: (d) => void (d.state.responses[0].created = "5"), code: "snapshot-corrupted", field: "state.responses.0.created", stricter: true },
  { name: "shim_state an array", change: (d) => void (d.state.shim_state = []), code: "snapshot-corrupted", field: "state.shim_state" },
  { name: "turn_count -1", change: (d) => void (d.state.turn_count = -1), code: "snapshot-corrupted", field: "state.turn_count" },
  { name: 'turn_count "3"', change: (d) => void (d.state.turn_count = "3"), code: "snapshot-corrupted", field: "state.turn_count", stricter: true },
  // Valid, if unusual.
  { name: "an unknown top-level field", change: (d) => void (d.extra = { any: 1 }), code: null },
  { name: "an unknown agent_id field", change: (d) => void (d.agent_id.extra = 1), code: null },
  { name: "created_at with an offset and a space", change: (d) => void (d.created_at = "2026-01-01 10:00:00.5+02:00"), code: null },
  { name: "created_at without seconds", change: (d) => void (d.created_at = "2026-01-01T10:00Z"), code: null },
  { name: "instructions null", change: (d) => void (d.state.instructions = null), code: null },
  { name: "message content an object", change: (d) => void (d.state.history[0].content = { parts: [1, 2] }), code: null },
  { name: "a response without usage", change: (d) => void delete d.state.responses[0].usage, code: null },
  { name: "an empty conversation", change: (d) => void Object.assign(d.state, { history: [], responses: [], turn_count: 0 }), code: null },
];

export function documentOf(testCase: Case): unknown {
  const document = fixture("one-turn") as unknown as Doc;
  const replaced = testCase.change(document);
  return replaced === undefined ? document : replaced;
}

