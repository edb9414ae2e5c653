/**
 * The application's own tools in Node (issue 31 item 2), end to end: the
 * real backend (tests/e2e/backends/host_tools_app.py, the module's one
 * line in its factory), a scripted model, real processes and sockets.
 */
import { afterEach, describe, expect, it } from "vitest";
import { SessionStartError, type ToolActivity } from "../../lib/index";
import { attachedSession, calls, killBackends } from "./host-tools-harness";

afterEach(killBackends);

const lookupSchema = {
  type: "object",
  properties: { customer_id: { type: "string" } },
  required: ["customer_id"],
  additionalProperties: false,
};

describe.runIf(process.platform !== "win32")("host tools, attached", () => {
  it("one tool: the model's call reaches the handler with its ids, and the result reaches the final answer", async () => {
    const seen: unknown[] = [];
    const activity: ToolActivity[] = [];
    const { session } = await attachedSession({
      onToolActivity: (a) => activity.push(a),
      tools: {
        lookup: {
          description: "Looks a customer up.",
          inputSchema: lookupSchema,
          handler: (args, { toolCallId, runId, signal }) => {
            seen.push({ args, toolCallId, runId, aborted: signal.aborted });
            return { name: "Ada", plan: "gold" };
          },
        },
      },
    });
    const result = await session.run(calls(["lookup", { customer_id: "c-42" }]));
    expect(result).toMatchObject({ status: "completed", finalOutput: 'Results: {"name": "Ada", "plan": "gold"}' });
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ args: { customer_id: "c-42" }, aborted: false });
    expect((seen[0] as { toolCallId: string }).toolCallId).toEqual(expect.any(String));
    expect((seen[0] as { runId: string }).runId).toEqual(expect.any(String));
    const end = activity.find((a) => a.phase === "end");
    expect(end).toMatchObject({ phase: "end", ok: true, call: { tool: "lookup" } });
    await session.close();
  });

  it("a factory without the module fails the start with tools-not-taken, saying what to add", async () => {
    const start = attachedSession({
      env: { HOST_TOOLS_APP_WITHOUT_MODULE: "1" },
      tools: { lookup: { description: "x", inputSchema: lookupSchema, handler: () => "x" } },
    });
    const error = await start.then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(SessionStartError);
    expect(error).toMatchObject({ code: "tools-not-taken" });
    expect((error as Error).message).toContain("shims=[host.tools()]");
  });
});
