/**
 * Pure-TypeScript zod 4 baseline decoder for AgentLane process-bridge event lines.
 *
 * Written from docs/protocol.md only (§3.3, §5, §6, §7). It serves as
 *   1. the "what users would pick instead" baseline in the benchmarks, and
 *   2. an independent oracle for differential tests against the native decoder.
 *
 * Issue collection follows §7.3: zod walks each object in its declared key
 * order, so the schemas below list their keys exactly in the spec's order.
 * Closed bridge events use z.strictObject (one `unrecognized_keys` issue at the
 * object's own path, after all declared keys); every native object uses
 * z.looseObject. The decoder returns the object produced by JSON.parse, never
 * zod's output copy, so no key is stripped or reordered.
 *
 * Where zod 4.6.7 differs from the reference semantics (see
 * `ONLY_WHEN_CLEAN` below), the rule is enforced explicitly.
 */
import { z } from "zod";

// ---------------------------------------------------------------------------
// Error type
// ---------------------------------------------------------------------------

export class ZodBridgeDecodeError extends Error {
  readonly fields: readonly string[];

  constructor(message: string, fields: readonly string[] = []) {
    super(message);
    this.name = "BridgeDecodeError";
    this.fields = Object.freeze([...fields]);
  }
}

// ---------------------------------------------------------------------------
// Constants (§3.3, §5, §6.2, §6.5)
// ---------------------------------------------------------------------------

const PROTOCOL_MAJOR = 1;

/** §3.3: major part (before the first '.') converted with JS Number() must equal 1. */
function isSupportedProtocolVersion(version: string): boolean {
  const dot = version.indexOf(".");
  const major = dot === -1 ? version : version.slice(0, dot);
  return Number(major) === PROTOCOL_MAJOR;
}

const KNOWN_MODEL_KINDS: ReadonlySet<string> = new Set([
  "provider",
  "text_delta",
  "tool_call_arguments_delta",
  "reasoning",
  "completed",
  "error",
]);

// ---------------------------------------------------------------------------
// Refinement plumbing
// ---------------------------------------------------------------------------

/**
 * §7.3: a refinement runs only if the object it is attached to had no issue at
 * all (nested ones and unknown keys included), except the `config` event's,
 * which unknown keys do not hold back (zod's default, which the reference has).
 *
 * zod 4.6.7 differs here: its `unrecognized_keys` issue is marked
 * `continue: true` ("never aborts"), so a default superRefine on a strictObject
 * would still run when the only problem is an unknown key (on the object itself
 * or inside a nested strict object such as `config.error`). The reference
 * behaviour is restored with an explicit `when` predicate: run only when this
 * object's parse produced no issue whatsoever. (The payload handed to `when`
 * contains only the issues of this object and its descendants; zod starts each
 * property/element with a fresh issue list.)
 */
const ONLY_WHEN_CLEAN = {
  when: (payload: { issues: readonly unknown[] }): boolean => payload.issues.length === 0,
};

type RefineCtx = z.core.$RefinementCtx<unknown>;

/** Re-emit the issues of a nested safeParse under `prefix` (relative to the refined object). */
function forwardIssues(
  result: { success: boolean; error?: z.ZodError | undefined },
  ctx: RefineCtx,
  prefix: readonly PropertyKey[],
): void {
  if (result.success || result.error === undefined) return;
  for (const issue of result.error.issues) {
    ctx.addIssue({ code: "custom", message: issue.message, path: [...prefix, ...issue.path] });
  }
}

// ---------------------------------------------------------------------------
// Primitive building blocks
// ---------------------------------------------------------------------------

/** "number" = finite JSON number. zod 4's z.number() already rejects ±Infinity and NaN. */
const FiniteNumber = z.number();

/**
 * "any JSON" field whose key is required but whose value may be anything, null included.
 * In zod 4.6.7 an absent key under a non-optional z.unknown() already yields an
 * `invalid_type` issue at that key (verified in __test__/zod-baseline.test.ts: I21, I39).
 */
const AnyJson = z.unknown();

/** Open JSON object (arrays are not objects); keys and values unchecked. */
const OpenObject = z.looseObject({});

// ---------------------------------------------------------------------------
// Native shapes (§6.3), all open
// ---------------------------------------------------------------------------

const Lineage = {
  task_name: z.string(),
  task_id: z.string(),
  parent_task_id: z.string().nullable(),
  is_root: z.boolean(),
};

const ToolCallFunction = z.looseObject({
  name: z.string(),
  arguments: z.string(),
});

const ToolCall = z.looseObject({
  id: z.string(),
  type: z.literal("function"),
  function: ToolCallFunction,
});

const Usage = z.looseObject({
  prompt_tokens: FiniteNumber,
  completion_tokens: FiniteNumber,
  total_tokens: FiniteNumber,
});

const Response = z.looseObject({
  id: z.string(),
  choices: z.array(OpenObject),
  created: FiniteNumber,
  model: z.string(),
  object: z.literal("chat.completion"),
  usage: Usage.nullable().optional(),
});

const Result = z.looseObject({
  final_output: AnyJson,
  responses: z.array(Response),
  turn_count: FiniteNumber,
  run_state: OpenObject.nullable(),
});

const ToolError = z.looseObject({
  message: z.string(),
  kind: z.string().nullable(),
});

const ApprovalRequest = z.looseObject({
  tool_name: z.string(),
  operation: z.string(),
  cwd: z.string(),
  path: z.string().nullable(),
  command: z.string().nullable(),
  skill_name: z.string().nullable(),
  reason: z.string().nullable(),
  run_id: z.string().nullable(),
  agent_name: z.string().nullable(),
  tool_call_id: z.string().nullable(),
  metadata: OpenObject,
});

const Decision = z.looseObject({
  outcome: z.enum(["allow", "deny", "require_approval"]),
  reason: z.string().nullable(),
});

const ApprovalRecord = z
  .looseObject({
    request_id: z.string(),
    request: ApprovalRequest,
    approval_required_decision: Decision,
    status: z.enum(["pending", "resolved"]),
    final_decision: Decision.nullable(),
  })
  .superRefine((record, ctx) => {
    // status "resolved" => final_decision non-null with outcome allow/deny.
    if (record.status !== "resolved") return;
    const decision = record.final_decision;
    if (decision === null || (decision.outcome !== "allow" && decision.outcome !== "deny")) {
      ctx.addIssue({
        code: "custom",
        message: "A resolved approval needs an allow/deny final_decision.",
        path: ["final_decision"],
      });
    }
  }, ONLY_WHEN_CLEAN);

const PlanStep = z.looseObject({
  step: z.string(),
  status: z.string(),
});

const Snapshot = z.looseObject({
  turn_count: FiniteNumber,
  history_length: FiniteNumber,
  response_count: FiniteNumber,
  shim_state: OpenObject,
});

// ---------------------------------------------------------------------------
// Model events (§6.5)
// ---------------------------------------------------------------------------

/** The 13 keys required for a known model kind, in check order. */
const KnownModelEvent = z.looseObject({
  kind: z.string(),
  raw: AnyJson,
  provider_event_type: z.string().nullable(),
  item_index: FiniteNumber.nullable(),
  item_type: z.string().nullable(),
  text: z.string().nullable(),
  tool_call_id: z.string().nullable(),
  tool_call_index: FiniteNumber.nullable(),
  arguments_delta: z.string().nullable(),
  reasoning: AnyJson,
  reasoning_signature: z.string().nullable(),
  response: Response.nullable(),
  error: OpenObject.nullable(),
});

/**
 * Any object with a string `kind`; a known model kind must additionally carry the
 * 13 keys above. The refinement runs exactly when `kind` is a string (the only
 * structural check here), independently of issues elsewhere in the payload.
 */
const ModelEvent = z.looseObject({ kind: z.string() }).superRefine((event, ctx) => {
  if (KNOWN_MODEL_KINDS.has(event.kind)) {
    forwardIssues(KnownModelEvent.safeParse(event), ctx, []);
  }
}, ONLY_WHEN_CLEAN);

// ---------------------------------------------------------------------------
// Native payloads per kind (§6.4): `kind` first, must equal the record type
// ---------------------------------------------------------------------------

const ModelStreamPayload = z.looseObject({
  kind: z.literal("model_stream"),
  event: ModelEvent,
});

const AgentStartPayload = z.looseObject({
  kind: z.literal("agent_start"),
  ...Lineage,
});

const AgentEndPayload = z.looseObject({
  kind: z.literal("agent_end"),
  ...Lineage,
  result: Result.nullable(),
});

const LlmStartPayload = z.looseObject({
  kind: z.literal("llm_start"),
  ...Lineage,
  messages: z.array(OpenObject),
});

const LlmEndPayload = z.looseObject({
  kind: z.literal("llm_end"),
  ...Lineage,
  response: Response,
});

const ToolStartPayload = z.looseObject({
  kind: z.literal("tool_start"),
  ...Lineage,
  tool_call: ToolCall,
  is_delegation: z.boolean(),
});

const ToolEndPayload = z.looseObject({
  kind: z.literal("tool_end"),
  ...Lineage,
  tool_call: ToolCall,
  is_delegation: z.boolean(),
  result: AnyJson,
  ok: z.boolean(),
  error: ToolError.nullable(),
});

const ToolApprovalPayload = z.looseObject({
  kind: z.literal("tool_approval"),
  event: z.looseObject({ record: ApprovalRecord }),
});

const HandoffStartPayload = z.looseObject({
  kind: z.literal("handoff_start"),
  ...Lineage,
  tool_call: ToolCall,
  target_name: z.string(),
});

const HandoffEndPayload = z.looseObject({
  kind: z.literal("handoff_end"),
  ...Lineage,
  tool_call: ToolCall,
  target_name: z.string(),
  result: Result,
});

const StateSnapshotPayload = z.looseObject({
  kind: z.literal("state_snapshot"),
  boundary: z.string(),
  snapshot: Snapshot,
});

const PlanUpdatedPayload = z.looseObject({
  kind: z.literal("plan_updated"),
  ...Lineage,
  tool_call: ToolCall,
  plan: z.array(PlanStep),
  explanation: z.string().nullable(),
});

/** Known native kinds in reference order. A Map gives exact, prototype-free membership. */
const NATIVE_PAYLOAD_SCHEMAS: ReadonlyMap<string, z.ZodType> = new Map<string, z.ZodType>([
  ["model_stream", ModelStreamPayload],
  ["agent_start", AgentStartPayload],
  ["agent_end", AgentEndPayload],
  ["llm_start", LlmStartPayload],
  ["llm_end", LlmEndPayload],
  ["tool_start", ToolStartPayload],
  ["tool_end", ToolEndPayload],
  ["tool_approval", ToolApprovalPayload],
  ["handoff_start", HandoffStartPayload],
  ["handoff_end", HandoffEndPayload],
  ["state_snapshot", StateSnapshotPayload],
  ["plan_updated", PlanUpdatedPayload],
]);

/**
 * Native record (§6.1/§6.2). Step 1 is structural (`type` string, `payload` object);
 * steps 2-3 (kind dispatch) are a refinement that runs only when step 1 passed.
 * A discriminated union cannot express the "unknown type accepted unless payload.kind
 * names a known kind" rule, so the dispatch is done by hand and the chosen payload
 * schema's issues are re-emitted under `payload`.
 */
const NativeRecord = z.looseObject({ type: z.string(), payload: OpenObject }).superRefine((record, ctx) => {
  const payloadSchema = NATIVE_PAYLOAD_SCHEMAS.get(record.type);
  if (payloadSchema !== undefined) {
    forwardIssues(payloadSchema.safeParse(record.payload), ctx, ["payload"]);
    return;
  }
  const kind = record.payload["kind"];
  if (typeof kind === "string" && NATIVE_PAYLOAD_SCHEMAS.has(kind)) {
    ctx.addIssue({
      code: "custom",
      message: `Unknown native type ${record.type} contradicts payload.kind ${kind}.`,
      path: ["payload", "kind"],
    });
  }
}, ONLY_WHEN_CLEAN);

// ---------------------------------------------------------------------------
// Bridge events (§5.1), all closed. Envelope order: protocol_version, ts, type.
// ---------------------------------------------------------------------------

function bridgeEvent<Type extends string, Shape extends z.ZodRawShape>(type: Type, shape: Shape) {
  return z.strictObject({
    protocol_version: z.string(),
    ts: FiniteNumber,
    type: z.literal(type),
    ...shape,
  });
}

const ReadyEvent = bridgeEvent("ready", {
  version: z.string(),
  package: z.string(),
  metadata: OpenObject.optional(),
  config: OpenObject.optional(),
});

const ConfigError = z.strictObject({
  code: z.enum(["invalid", "unsupported", "rejected", "internal"]),
  message: z.string(),
});

const ConfigEvent = bridgeEvent("config", {
  ok: z.boolean(),
  config: OpenObject.nullable(),
  error: ConfigError.nullable(),
}).superRefine((event, ctx) => {
  if (event.ok) {
    if (event.config === null) {
      ctx.addIssue({ code: "custom", message: "ok: true requires a config.", path: ["config"] });
    }
    if (event.error !== null) {
      ctx.addIssue({ code: "custom", message: "ok: true requires error: null.", path: ["error"] });
    }
  } else if (event.error === null) {
    ctx.addIssue({ code: "custom", message: "ok: false requires an error.", path: ["error"] });
  }
  // zod's own rule here, as in the reference: unknown keys (on the event or
  // inside `error`) do not hold the settlement check back, so a config event
  // with both reports `event, error`.
});

const RunStartEvent = bridgeEvent("run_start", {
  prompt: z.string(),
});

const RunCompleteEvent = bridgeEvent("run_complete", {
  final_output: AnyJson,
  turn_count: FiniteNumber,
  response_count: FiniteNumber,
  shim_state: OpenObject,
});

const RunCancelledEvent = bridgeEvent("run_cancelled", {});

const ErrorEvent = bridgeEvent("error", {
  message: z.string(),
  scope: z.enum(["command", "run"]),
});

const ResetEvent = bridgeEvent("reset", {
  config: OpenObject.optional(),
});

const CancelRequestedEvent = bridgeEvent("cancel_requested", {});

const CancelIgnoredEvent = bridgeEvent("cancel_ignored", {
  reason: z.string(),
});

const ShutdownEvent = bridgeEvent("shutdown", {});

const RunEventEvent = bridgeEvent("run_event", {
  event: NativeRecord,
});

/** KNOWN_EVENT_TYPES in reference order. A Map gives exact, prototype-free membership. */
const BRIDGE_EVENT_SCHEMAS: ReadonlyMap<string, z.ZodType> = new Map<string, z.ZodType>([
  ["ready", ReadyEvent],
  ["config", ConfigEvent],
  ["run_start", RunStartEvent],
  ["run_complete", RunCompleteEvent],
  ["run_cancelled", RunCancelledEvent],
  ["error", ErrorEvent],
  ["reset", ResetEvent],
  ["cancel_requested", CancelRequestedEvent],
  ["cancel_ignored", CancelIgnoredEvent],
  ["shutdown", ShutdownEvent],
  ["run_event", RunEventEvent],
]);

// ---------------------------------------------------------------------------
// Issue paths -> fields (§7.3)
// ---------------------------------------------------------------------------

/** Keys/indices joined with '.', empty path -> "event", first occurrence kept. */
function issueFields(issues: readonly z.core.$ZodIssue[]): string[] {
  const seen = new Set<string>();
  const fields: string[] = [];
  for (const issue of issues) {
    const field = issue.path.length === 0 ? "event" : issue.path.map(String).join(".");
    if (!seen.has(field)) {
      seen.add(field);
      fields.push(field);
    }
  }
  return fields;
}

// ---------------------------------------------------------------------------
// Decoder (§7.2)
// ---------------------------------------------------------------------------

export function zodDecodeBridgeEventLine(line: string): unknown {
  // 1. JSON
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (error) {
    if (error instanceof SyntaxError) {
      throw new ZodBridgeDecodeError(`Invalid JSON bridge event: ${String(error)}`, []);
    }
    throw error;
  }

  // 2. JSON object
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ZodBridgeDecodeError("Bridge event must be a JSON object.", []);
  }
  const event = value as Record<string, unknown>;

  // 3. protocol_version is a string
  const version = event["protocol_version"];
  if (typeof version !== "string") {
    throw new ZodBridgeDecodeError("Bridge event protocol_version must be a string.", ["protocol_version"]);
  }

  // 4. version accepted
  if (!isSupportedProtocolVersion(version)) {
    throw new ZodBridgeDecodeError(`Unsupported bridge protocol version: ${version}.`, ["protocol_version"]);
  }

  // 5. type is a string
  const type = event["type"];
  if (typeof type !== "string") {
    throw new ZodBridgeDecodeError("Bridge event type must be a string.", ["type"]);
  }

  // 6. known event type
  const schema = BRIDGE_EVENT_SCHEMAS.get(type);
  if (schema === undefined) {
    throw new ZodBridgeDecodeError(`Unknown bridge event type: ${type}.`, ["type"]);
  }

  // 7. schema of that type
  const result = schema.safeParse(value);
  if (!result.success) {
    const fields = issueFields(result.error.issues);
    throw new ZodBridgeDecodeError(`Invalid bridge event payload: ${fields.join(", ")}.`, fields);
  }

  // Return JSON.parse's object itself, not zod's output copy.
  return value;
}
