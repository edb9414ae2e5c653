/**
 * The host's end of one conversation's host channel (docs/host-channel.md
 * §8): bytes from the backend's socket go to the native core
 * (`src/host_channel.rs`, the same judge as the bridge's), and what it
 * says goes out: lines to the socket, requests to the application's tool
 * handlers and store, aborts to their signals, diagnostics to the session.
 * The core answers what it can by itself (the tool list, unknown tools,
 * invalid arguments, hostile lines); deadlines are its, this side only
 * wakes it at the next one.
 */
import type { HostChannelConfig, HostChannelOutput } from "../../index";
import { StoreConflictError } from "../errors";
import { native } from "../native";
import { checkedSnapshotText, refusalError, snapshotText, type SnapshotText } from "../store/snapshot-text";
import type { ConversationStore } from "../store/types";
import { resultText, ToolResultError } from "./result";
import type { HostTool, HostToolContext, HostTools } from "./types";

/** What the socket end must offer (a `net.Socket` does). */
export interface HostChannelEnd {
  write(chunk: Uint8Array): unknown;
  end(): unknown;
  destroy(): unknown;
  readonly destroyed?: boolean;
  on(event: "data", listener: (chunk: Buffer | string) => void): unknown;
  on(event: "end" | "close", listener: () => void): unknown;
  on(event: "error", listener: (error: Error) => void): unknown;
}

/** A line of the backend the core did not take (the backend was answered when its id could be read). */
export interface HostChannelDiagnostic {
  kind: "host-channel";
  code: string;
  message: string;
  fields: string[];
  id: string | null;
}

/** What the server needs from its session. */
export interface HostChannelHooks {
  tools: HostTools;
  store: ConversationStore | undefined;
  /** The session's approval path, for a tool with `needsApproval`. */
  approve(tool: string, args: unknown, context: HostToolContext): Promise<{ allowed: boolean; reason: string | null }>;
  diagnostic(diagnostic: HostChannelDiagnostic): void;
  /** The store's snapshot as loaded, or a save or delete it committed (`null`: none, deleted). */
  committed(snapshot: SnapshotText | null): void;
}

/** Why a handler's signal aborted, as its `reason`. */
export class HostToolAbortError extends Error {
  constructor(readonly code: "cancelled" | "timeout" | "lost" | "closed") {
    super(ABORT_MESSAGES[code]);
    this.name = "HostToolAbortError";
  }
}

const ABORT_MESSAGES = {
  cancelled: "The run was cancelled (or the backend gave the call up).",
  timeout: "The tool call passed its deadline.",
  lost: "The host channel to the backend was lost.",
  closed: "The session is closing.",
} as const;

export class HostChannelServer {
  private readonly core: InstanceType<typeof native.HostChannel>;
  private end: HostChannelEnd | undefined;
  private readonly aborts = new Map<number, AbortController>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private ended = false;
  /** The backend asked for the stored snapshot (its factory built the agent with the host's store). */
  loadedStore = false;

  /** Throws when a tool's schema cannot be used or a name repeats (the core's message). */
  constructor(
    config: HostChannelConfig,
    private readonly hooks: HostChannelHooks,
  ) {
    this.core = new native.HostChannel(config);
  }

  /** Whether tools were declared, and the backend's factory asked for them. */
  get toolsDeclared(): boolean {
    return Object.keys(this.hooks.tools).length > 0;
  }

  get listedTools(): boolean {
    return this.core.listedTools();
  }

  /** The backend's `hello` version, once it came (a factory that used the module at all). */
  get helloVersion(): string | null {
    return this.core.helloVersion();
  }

  /** Reads and writes `end` from now on (the backend may write before `ready`). */
  serve(end: HostChannelEnd): void {
    if (this.ended || this.end !== undefined) {
      // The session has already ended (or has its channel): nothing will read this one.
      end.destroy();
      return;
    }
    this.end = end;
    end.on("data", (chunk) => this.handle(this.core.feed(typeof chunk === "string" ? Buffer.from(chunk) : chunk)));
    end.on("error", () => this.lost());
    end.on("end", () => this.lost());
    end.on("close", () => this.lost());
  }

  /** The session closes: pending calls are answered `host-unavailable` and aborted, then the socket ends. */
  close(): void {
    if (this.ended) return;
    this.handle(this.core.close());
    this.ended = true;
    clearTimeout(this.timer);
    try {
      this.end?.end();
    } catch {
      // Already closed.
    }
  }

  private lost(): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.timer);
    this.handle(this.core.lost());
    try {
      this.end?.destroy();
    } catch {
      // Already closed.
    }
  }

  private handle(outputs: HostChannelOutput[] | null): void {
    if (outputs === null) return;
    for (const output of outputs) {
      switch (output.kind) {
        case "send":
          this.write(output.line!);
          break;
        case "request":
          this.request(output);
          break;
        case "abort":
          this.aborts.get(output.call!)?.abort(new HostToolAbortError(output.what as HostToolAbortError["code"]));
          this.aborts.delete(output.call!);
          break;
        case "diagnostic":
          this.hooks.diagnostic({ kind: "host-channel", code: output.what!, message: output.name!, fields: output.fields ?? [], id: output.id ?? null });
          break;
      }
    }
    this.schedule();
  }

  private write(line: Uint8Array): void {
    const end = this.end;
    if (end === undefined || end.destroyed) return;
    try {
      end.write(line);
    } catch {
      // The socket closed under us: its `close` ends the calls.
    }
  }

  /** Wakes the core at its next deadline. */
  private schedule(): void {
    clearTimeout(this.timer);
    if (this.ended) return;
    const ms = this.core.nextDeadlineMs();
    if (ms === null) return;
    this.timer = setTimeout(() => this.handle(this.core.expire()), Math.ceil(ms) + 1);
    this.timer.unref?.();
  }

  private request(output: HostChannelOutput): void {
    const call = output.call!;
    if (output.what === "store_load") this.loadedStore = true;
    const controller = new AbortController();
    this.aborts.set(call, controller);
    const work = output.what === "call_tool" ? this.callTool(output, controller.signal) : this.storeRequest(output, controller.signal);
    void work.then(
      (json) => this.answer(call, () => this.core.answerValue(call, json)),
      (failure: { kind: string; message: string }) => this.answer(call, () => this.core.answerError(call, failure.kind, failure.message)),
    );
  }

  private answer(call: number, send: () => HostChannelOutput[] | null): void {
    this.aborts.delete(call);
    if (this.ended) return;
    this.handle(send());
  }

  /** A tool call: approval if asked, the handler, its result as JSON text; a failure as `{ kind, message }`. */
  private async callTool(output: HostChannelOutput, signal: AbortSignal): Promise<string> {
    const name = output.name!;
    const tool: HostTool = this.hooks.tools[name]!;
    const context: HostToolContext = { signal, toolCallId: output.toolCallId ?? null, runId: output.runId ?? null };
    try {
      const args: unknown = JSON.parse(output.json!);
      if (tool.needsApproval) {
        const decision = await this.hooks.approve(name, args, context);
        if (!decision.allowed) throw failure("tool-error", `The application did not approve this call of ${name}${decision.reason ? `: ${decision.reason}` : "."}`);
      }
      return resultText(await tool.handler(args, context));
    } catch (error) {
      if (isFailure(error)) throw error;
      if (error instanceof ToolResultError) throw failure("invalid-result", error.message);
      throw failure("tool-error", messageOf(error));
    }
  }

  /** A store operation on the session's store (the core answers `no-store` without one). */
  private async storeRequest(output: HostChannelOutput, signal: AbortSignal): Promise<string> {
    const store = this.hooks.store!;
    const expectedRevision = output.expectedRevision ?? null;
    try {
      switch (output.what) {
        case "store_load": {
          const snapshot = await store.load({ signal });
          if (snapshot === null) {
            this.hooks.committed(null);
            return `{"snapshot":null}`;
          }
          // Checked here whatever store loaded it (an application's own may return anything; a
          // shipped one's document passes in microseconds) and encoded `revision` first, as every
          // SnapshotText: what is not a snapshot fails the load with the check's words.
          const checked = snapshotText(snapshot);
          this.hooks.committed(checked);
          return `{"snapshot":${checked.text}}`;
        }
        case "store_save": {
          // Checked in Rust as the core read the request (checkSnapshot's checks and words): the text as it is.
          if (output.refused != null) throw refusalError(output.refused);
          const snapshot = checkedSnapshotText(output.json!, output.revision!, { type: output.agentType!, key: output.agentKey! });
          const options = { expectedRevision, signal };
          await (store.saveText === undefined ? store.save(snapshot.document, options) : store.saveText(snapshot, options));
          this.hooks.committed(snapshot);
          return "{}";
        }
        default:
          await store.delete({ expectedRevision, signal });
          this.hooks.committed(null);
          return "{}";
      }
    } catch (error) {
      if (error instanceof StoreConflictError || (error as { code?: unknown } | null)?.code === "revision-conflict") throw failure("revision-conflict", messageOf(error));
      throw failure("store-error", messageOf(error));
    }
  }
}

function failure(kind: string, message: string): { kind: string; message: string; failure: true } {
  return { kind, message, failure: true };
}

function isFailure(value: unknown): value is { kind: string; message: string } {
  return typeof value === "object" && value !== null && (value as { failure?: unknown }).failure === true;
}

/** An error's message, for the model: what the handler threw. */
function messageOf(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  if (typeof error === "string") return error;
  try {
    return `The tool failed: ${JSON.stringify(error) ?? String(error)}`;
  } catch {
    return "The tool failed.";
  }
}
