/**
 * The host channel as a session part: built from the session's options
 * (`tools`, `store`) before anything starts, asked at `ready` whether the
 * backend's factory took what was offered, closed with the session. A tool
 * that `needsApproval` goes through the session's approval policy, as the
 * agent's own approvals do, and its outcome reaches `onApprovalResolved`.
 */
import type { ApprovalRequestPayload } from "../protocol";
import type { ConversationStore } from "../store/types";
import type { SnapshotText } from "../store/snapshot-text";
import type { ApprovalPolicy, ApprovalResolution, SessionStartErrorCode } from "../index";
import { declareTools, DEFAULT_STORE_TIMEOUT_MS } from "./declare";
import { HostChannelServer, type HostChannelDiagnostic } from "./server";
import type { HostChannelSessionOptions, HostToolContext } from "./types";
import { checkCount, checkMilliseconds } from "../options";
import { SessionStartError } from "../errors";

/** What the host channel needs from its session. */
export interface HostChannelSessionHooks {
  approvals: ApprovalPolicy | undefined;
  resolved(resolution: ApprovalResolution): void;
  diagnostic(diagnostic: HostChannelDiagnostic): void;
  committed(snapshot: SnapshotText | null): void;
}

/**
 * The session's host channel, or `undefined` when it offers neither tools
 * nor a store and has no channel to the backend. With a channel, it is
 * always served: a factory with `host.tools()` asks for the tools before
 * `ready` and must get its (empty) answer. Throws `TypeError`/`InvalidOptionError` for options that
 * cannot be served (before anything starts).
 */
export function hostChannelFor(options: HostChannelSessionOptions, hooks: HostChannelSessionHooks, channelGiven: boolean): HostChannelServer | undefined {
  try {
    return serverFor(options, hooks, channelGiven);
  } catch (error) {
    throw new SessionStartError((error as Error).message, "invalid-tools", { cause: error });
  }
}

function serverFor(options: HostChannelSessionOptions, hooks: HostChannelSessionHooks, channelGiven: boolean): HostChannelServer | undefined {
  const tools = declareTools(options.tools, options.toolTimeoutMs);
  const store = options.store;
  if (tools.length === 0 && store === undefined && !channelGiven) return undefined;
  checkStore(store);
  checkMilliseconds("storeTimeoutMs", options.storeTimeoutMs);
  checkCount("hostChannelMaxLineBytes", options.hostChannelMaxLineBytes);
  const storeTimeout = options.storeTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
  try {
    return new HostChannelServer(
      { tools, store: store !== undefined, storeTimeoutMs: storeTimeout === 0 ? undefined : storeTimeout, maxLineBytes: options.hostChannelMaxLineBytes },
      {
        tools: options.tools ?? {},
        store,
        approve: (tool, args, context) => approveHostTool(hooks, tool, args, context),
        diagnostic: hooks.diagnostic,
        committed: hooks.committed,
      },
    );
  } catch (error) {
    // The core refused a tool: its name repeats or its schema cannot be used.
    throw new TypeError(`The tools cannot be served: ${(error as Error).message}`, { cause: error });
  }
}

function checkStore(store: ConversationStore | undefined): void {
  if (store === undefined) return;
  const candidate = store as Partial<ConversationStore> | null;
  if (candidate === null || typeof candidate !== "object" || ["load", "save", "delete"].some((name) => typeof candidate[name as keyof ConversationStore] !== "function")) {
    throw new TypeError("The store option must be a conversation store: { load, save, delete } (e.g. memoryStore().conversation(id)).");
  }
}

/**
 * What `ready` shows of the host channel: a factory that did not take the
 * offered tools or store (the module asks for both before `ready`,
 * docs/host-channel.md §7), or `undefined` when all is well.
 */
export function missingAtReady(server: HostChannelServer | undefined, offersStore: boolean): { code: SessionStartErrorCode; message: string } | undefined {
  if (server === undefined) return undefined;
  if (server.toolsDeclared && !server.listedTools) {
    return {
      code: "tools-not-taken",
      message:
        "The session gives the agent tools, but the backend's factory did not take them: add `shims=[host.tools()]` to its AgentDescriptor " +
        "(`from agentlane_host_channel import host`; install it with `pip install ./node_modules/@agentlanejs/process-bridge-native/python`).",
    };
  }
  if (offersStore && !server.loadedStore) {
    return {
      code: "store-not-taken",
      message:
        "The session gives the agent a store (or a snapshot to resume), but the backend's factory did not use it: pass " +
        "`state_store=host.state_store()` to its DefaultAgent (`from agentlane_host_channel import host`); without it the conversation's state would be lost.",
    };
  }
  return undefined;
}

/** The session's policy on a host tool call; a denial is a tool failure the model reads. */
async function approveHostTool(hooks: HostChannelSessionHooks, tool: string, args: unknown, context: HostToolContext): Promise<{ allowed: boolean; reason: string | null }> {
  const request: ApprovalRequestPayload = {
    tool_name: tool,
    operation: "host_tool",
    cwd: process.cwd(),
    path: null,
    command: null,
    skill_name: null,
    reason: null,
    run_id: context.runId,
    agent_name: null,
    tool_call_id: context.toolCallId,
    metadata: { host_tool: true, arguments: args as never },
  };
  let decision: { allowed: boolean; reason: string | null };
  if (hooks.approvals === undefined) {
    decision = { allowed: false, reason: "No approval policy configured." };
  } else {
    try {
      const given = await hooks.approvals({ request, reason: "This tool of the application's own asks for approval.", signal: context.signal });
      decision = typeof given === "boolean" ? { allowed: given, reason: null } : { allowed: given?.allowed === true, reason: typeof given?.reason === "string" ? given.reason : null };
    } catch {
      decision = { allowed: false, reason: "Approval policy failed." };
    }
  }
  if (!context.signal.aborted) hooks.resolved({ request, allowed: decision.allowed, reason: decision.reason, decidedByApp: hooks.approvals !== undefined });
  return decision;
}
