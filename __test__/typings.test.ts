/**
 * The published typings compile and say what the API does: this file is
 * type-checked by `tsc --noEmit` (run below, over the whole project), and
 * the `@ts-expect-error` lines fail the check if a wrong use ever compiles.
 */
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  createAgentSession,
  decodeBridgeEventLine,
  encodeBridgeCommand,
  isKnownModelEvent,
  isNativeEvent,
  memoryStore,
  snapshotText,
  type AgentSessionOptions,
  type BridgeCommand,
  type BridgeEvent,
  type ConversationStore,
  type NativePayload,
  type RunResult,
  type Snapshot,
  type SnapshotText,
} from "../lib/index";
import { repoRoot } from "./helpers";

/** Compile-time checks only: never called. */
export function typeUsage(line: string): void {
  const event: BridgeEvent = decodeBridgeEventLine(line);
  if (event.type === "run_event") {
    const record = event.event;
    if (isNativeEvent(record, "tool_end")) {
      const payload: NativePayload<"tool_end"> = record.payload;
      const ok: boolean = payload.ok;
      const id: string = payload.tool_call.id;
      void ok;
      void id;
    }
    if (isNativeEvent(record, "model_stream") && isKnownModelEvent(record.payload.event)) {
      const text: string | null = record.payload.event.text;
      void text;
    }
  } else if (event.type === "config") {
    const code: "invalid" | "unsupported" | "rejected" | "internal" | undefined = event.error?.code;
    void code;
  }
  const commands: BridgeCommand[] = [
    { type: "prompt", text: "hi" },
    { type: "approve", id: "tool-approval-1", allowed: true, reason: "ok" },
    { type: "configure", patch: { model: "m" } },
    { type: "cancel" },
  ];
  // @ts-expect-error approve needs a boolean
  commands.push({ type: "approve", id: "x", allowed: "true" });
  // @ts-expect-error unknown command type
  commands.push({ type: "bogus" });
  void encodeBridgeCommand(commands[0]);

  type Config = { model: string };
  const options: AgentSessionOptions<Config> = {
    backend: { app: "my_app:create_backend" },
    approvals: async ({ request, signal }) => (signal.aborted ? false : { allowed: request.operation === "read_file" }),
    decodeConfig: (raw) => ({ model: String(raw.model) }),
    onAssistantText: (chunk) => void chunk.delta.length,
  };
  void createAgentSession(options).then(async (session) => {
    const result: RunResult = await session.run("x");
    if (result.status === "completed") void result.turnCount;
    const config: Config = await session.configure({ model: "other" });
    void config;
    // @ts-expect-error the patch is checked against the config type
    await session.configure({ model: 5 });
  });
}

/** Stores (issue 33): a store of documents only still fits; `saveText` is optional and takes a `SnapshotText`. */
export function storeTypeUsage(document: Snapshot): void {
  const documentsOnly: ConversationStore = {
    load: async () => null,
    save: async (snapshot: Snapshot) => void snapshot.state.history.length,
    delete: async () => {},
  };
  const text: SnapshotText = snapshotText(document);
  const revision: number = text.revision;
  const json: string = text.text;
  const parsed: Snapshot = text.document;
  void [revision, json, parsed];
  // @ts-expect-error a SnapshotText is read-only
  text.revision = 3;
  const withText: ConversationStore = { ...documentsOnly, saveText: async (snapshot: SnapshotText) => void snapshot.text.length };
  void withText.saveText?.(text, { expectedRevision: null });
  // @ts-expect-error saveText takes a SnapshotText, not a document
  void withText.saveText?.(document, { expectedRevision: null });
  void memoryStore().conversation("a").saveText?.(snapshotText(JSON.stringify(document)), { expectedRevision: 1 });
  void createAgentSession({ backend: { app: "my_app:create_backend" }, store: documentsOnly, resume: text });
}

describe("typings", () => {
  it("the whole project type-checks under tsc --noEmit (strict)", () => {
    const tsc = join(repoRoot, "node_modules", "typescript", "bin", "tsc");
    const output = (() => {
      try {
        return execFileSync(process.execPath, [tsc, "-p", join(repoRoot, "tsconfig.json"), "--noEmit"], { encoding: "utf8" });
      } catch (error) {
        return (error as { stdout?: string }).stdout ?? String(error);
      }
    })();
    expect(output).toBe("");
  }, 120_000);
});
