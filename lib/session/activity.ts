/**
 * A run's activity (docs/protocol.md §9.5.4): native records become tool,
 * agent and plan activity and approval requests, for the application's
 * callbacks and the run's stream; text deltas go to the segmenter. It
 * remembers the open tool calls and agents, so that a terminal event can
 * report them cancelled.
 */
import { isNativeEvent } from "../codec";
import type { NativeRunEvent } from "../protocol";
import type { Approvals } from "./approvals";
import type { Notifier } from "./notify";
import { agentInfo, approvalRecord, planUpdate, toolCallInfo } from "./records";
import type { UpdateStream } from "./stream";
import type { TextSegmenter } from "./text";
import type { AgentActivity, AgentInfo, AgentSessionOptions, ToolActivity, ToolCallInfo } from "./types";

/** What the activity needs from its session. */
export interface ActivityHost {
  /** The application's callbacks (called with `this` the options object). */
  options: Pick<AgentSessionOptions, "onPlan" | "onToolActivity" | "onAgentActivity">;
  notify: Notifier;
  text: TextSegmenter;
  approvals: Approvals;
  /** The stream of the run, while one is streamed. */
  updates(): UpdateStream | undefined;
}

export class RunActivity {
  private readonly tools = new Map<string, ToolCallInfo>();
  private readonly agents = new Map<string, AgentInfo>();

  constructor(private readonly host: ActivityHost) {}

  /** A native record (§6), in wire order. */
  onRecord(record: NativeRunEvent): void {
    if (isNativeEvent(record, "model_stream")) return this.onModelEvent(record.payload.event);
    if (isNativeEvent(record, "tool_start")) {
      this.host.text.close();
      const call = toolCallInfo(record.payload);
      this.tools.set(call.callId, call);
      return this.emitTool({ phase: "start", call });
    }
    if (isNativeEvent(record, "tool_end")) {
      this.host.text.close();
      const payload = record.payload;
      const id = payload.tool_call.id;
      const call = this.tools.get(id) ?? toolCallInfo(payload);
      this.tools.delete(id);
      return this.emitTool({ phase: "end", call, ok: payload.ok, result: payload.result, error: payload.error });
    }
    this.host.text.flush();
    if (isNativeEvent(record, "agent_start")) {
      const info = agentInfo(record.payload);
      this.agents.set(info.taskId, info);
      return this.emitAgent({ phase: "start", info });
    }
    if (isNativeEvent(record, "agent_end")) {
      const payload = record.payload;
      const info = this.agents.get(payload.task_id) ?? agentInfo(payload);
      this.agents.delete(payload.task_id);
      return this.emitAgent({ phase: "end", info, finalOutput: payload.result === null ? undefined : payload.result.final_output });
    }
    if (isNativeEvent(record, "plan_updated")) {
      const update = planUpdate(record.payload);
      this.host.notify.guard("onPlan", this.host.options.onPlan, update, this.host.options);
      this.host.updates()?.push({ type: "plan", plan: update });
      return;
    }
    const approval = approvalRecord(record);
    if (approval?.status === "pending") {
      this.host.updates()?.push({
        type: "approval-request",
        requestId: approval.request_id,
        request: approval.request,
        reason: approval.approval_required_decision.reason,
      });
      this.host.approvals.request(approval);
    } else if (approval) {
      this.host.approvals.resolve(approval);
    }
  }

  private onModelEvent(event: { kind: string; [key: string]: unknown }): void {
    if (event.kind === "text_delta" && typeof event.text === "string") {
      this.host.text.append("assistant", event.text);
    } else if (event.kind === "reasoning") {
      const value = event.text !== null ? event.text : event.reasoning;
      if (typeof value === "string") this.host.text.append("reasoning", value);
    } else {
      this.host.text.flush();
    }
  }

  private emitTool(activity: ToolActivity): void {
    this.host.notify.guard("onToolActivity", this.host.options.onToolActivity, activity, this.host.options);
    this.host.updates()?.push({ type: "tool", activity });
  }

  private emitAgent(activity: AgentActivity): void {
    this.host.notify.guard("onAgentActivity", this.host.options.onAgentActivity, activity, this.host.options);
    this.host.updates()?.push({ type: "agent", activity });
  }

  /** Terminal events: close text, cancel open tools and agents, close approvals. */
  sweep(): void {
    this.host.text.close();
    for (const call of this.tools.values()) this.emitTool({ phase: "cancelled", call });
    this.tools.clear();
    for (const info of this.agents.values()) this.emitAgent({ phase: "cancelled", info });
    this.agents.clear();
    this.host.approvals.closeAll();
  }
}
