/**
 * Pure mapping from native run-event records (docs/protocol.md §6) to the
 * session's value types (§9.5.3): tool and agent activity, plans, approval
 * records. No state, no callbacks; records are narrowed with the package's
 * own `isNativeEvent`, so every field read here is one the decoder checked.
 */
import { isNativeEvent } from "../codec";
import type { NativeApprovalRecord, NativePayload, NativeRunEvent } from "../protocol";
import type { AgentInfo, PlanStepStatus, PlanUpdate, ToolCallInfo } from "./types";

/** Payloads that carry a tool call and its caller. */
type ToolPayload = NativePayload<"tool_start"> | NativePayload<"tool_end">;
/** Payloads that carry an agent's lineage. */
type AgentPayload = NativePayload<"agent_start"> | NativePayload<"agent_end">;

/** The tool call of a `tool_start` or `tool_end` payload. */
export function toolCallInfo(payload: ToolPayload): ToolCallInfo {
  const call = payload.tool_call;
  let args: unknown;
  try {
    args = JSON.parse(call.function.arguments);
  } catch {
    args = call.function.arguments;
  }
  return {
    callId: call.id,
    tool: call.function.name,
    agent: payload.task_name,
    taskId: payload.task_id,
    arguments: args,
    isPlan: call.function.name === "write_plan",
    isDelegation: payload.is_delegation,
  };
}

/** The agent of an `agent_start` or `agent_end` payload. */
export function agentInfo(payload: AgentPayload): AgentInfo {
  return {
    agent: payload.task_name,
    taskId: payload.task_id,
    parentTaskId: payload.parent_task_id,
    isRoot: payload.is_root,
  };
}

/** Wire plan statuses the session names; any other is `pending` (a Map: no prototype names). */
const PLAN_STATUS = new Map<string, PlanStepStatus>([
  ["completed", "completed"],
  ["blocked", "blocked"],
  ["in_progress", "active"],
  ["active", "active"],
]);

/** A `plan_updated` payload as the session reports it. */
export function planUpdate(payload: NativePayload<"plan_updated">): PlanUpdate {
  return {
    agent: payload.task_name,
    taskId: payload.task_id,
    explanation: payload.explanation,
    steps: payload.plan.map((s) => ({ text: s.step, status: PLAN_STATUS.get(s.status) ?? "pending", rawStatus: s.status })),
  };
}

/** The approval record of a `tool_approval` record; `undefined` for other kinds. */
export function approvalRecord(record: NativeRunEvent): NativeApprovalRecord | undefined {
  return isNativeEvent(record, "tool_approval") ? record.payload.event.record : undefined;
}
