/**
 * The check's last step (issue 31 item 5): a real conversation in which the
 * agent calls one tool of the host's own, and that tool's result reaches
 * the final answer: the only proof that the reverse direction (agent →
 * application) works. The tool, `lookup`, answers with a token made for
 * this check; the step passes when the handler ran and the token is in the
 * final answer, and says which part failed otherwise.
 */
import { randomBytes } from "node:crypto";
import { AgentSessionError, SessionStartError } from "./errors";
import type { BackendSpec } from "./process";
import { createAgentSession } from "./session/index";

/** What the host tool step reports. */
export interface HostToolCheck {
  ok: boolean;
  ms: number;
  /** The agent called the host's tool (its handler ran). */
  called: boolean;
  finalOutput?: unknown;
  error?: { code: string; message: string };
}

/** The prompt of the step: a real model is asked plainly; the demo's scripted model calls `lookup` for any prompt. */
export const HOST_TOOL_PROMPT = "Use the lookup tool to look up the topic 'process-bridge-native check', then answer with exactly what it returned.";

export async function checkHostTool(backend: BackendSpec, options: { prompt?: string; readyTimeoutMs?: number; runTimeoutMs?: number }): Promise<HostToolCheck> {
  const started = Date.now();
  const token = `check-token-${randomBytes(6).toString("hex")}`;
  let called = false;
  const fail = (code: string, message: string, extra: Partial<HostToolCheck> = {}): HostToolCheck => ({ ok: false, ms: Date.now() - started, called, ...extra, error: { code, message } });
  let session;
  try {
    session = await createAgentSession({
      backend,
      readyTimeoutMs: options.readyTimeoutMs ?? 30_000,
      approvals: () => true,
      onDiagnostic: () => {},
      tools: {
        lookup: {
          description: "Looks a topic up in the host's notes. Answer with exactly what it returns.",
          inputSchema: { type: "object", properties: { topic: { type: "string" } } },
          handler: () => ((called = true), token),
        },
      },
    });
  } catch (error) {
    const start = error instanceof SessionStartError ? error : undefined;
    return fail(start?.code ?? "start-failed", error instanceof Error ? error.message : String(error));
  }
  try {
    const result = await session.run(options.prompt ?? HOST_TOOL_PROMPT, { signal: AbortSignal.timeout(options.runTimeoutMs ?? 60_000) });
    if (result.status !== "completed") return fail("run-timeout", "The run did not end in time.");
    const finalOutput = result.finalOutput;
    if (!called) return fail("tool-not-called", "The agent did not call the host's lookup tool.", { finalOutput });
    if (!JSON.stringify(finalOutput).includes(token)) return fail("result-not-in-answer", "The agent called the host's tool, but its result did not reach the final answer.", { finalOutput });
    return { ok: true, ms: Date.now() - started, called, finalOutput };
  } catch (error) {
    return fail(error instanceof AgentSessionError ? error.code : "unknown", error instanceof Error ? error.message : String(error));
  } finally {
    await session.close();
  }
}
