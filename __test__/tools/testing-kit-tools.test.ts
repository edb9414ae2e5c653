/**
 * The testing kit scripts calls of the application's own tools (issue 31
 * item 2): its scripted backend (a real child process, no Python) lists
 * the host's tools before `ready` and calls them over the host channel.
 */
import { spawn, type ChildProcess } from "node:child_process";
import type { Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { attachAgentSession, createAgentSession, type ToolActivity } from "../../lib/index";
import { scriptedBackend, type BackendScript } from "../../lib/testing/index";

const started: Array<{ child: ChildProcess; dispose: () => void }> = [];
afterEach(() => {
  for (const { child, dispose } of started.splice(0)) child.kill("SIGKILL"), dispose();
});

function attachedScript(script: BackendScript, options: Parameters<typeof attachAgentSession>[1]) {
  const kit = scriptedBackend(script);
  const child = spawn(kit.backend.command, kit.backend.args ?? [], { stdio: ["pipe", "pipe", "pipe", "ignore", "pipe"], env: { ...process.env, AGENTLANE_HOST_CHANNEL_FD: "4" } });
  started.push({ child, dispose: kit.dispose });
  return attachAgentSession(child, { ...options, hostChannel: child.stdio[4] as Socket });
}

describe.runIf(process.platform !== "win32")("testing kit: scripted host tool calls", () => {
  it("a scripted hostTool step calls the session's handler; its result, a throw and invalid arguments reach tool_end", async () => {
    const activity: ToolActivity[] = [];
    const session = await attachedScript(
      { runs: [{ steps: [{ hostTool: "lookup", args: { id: "c-1" } }, { hostTool: "lookup", args: { id: "boom" } }, { hostTool: "lookup", args: { id: 3 } }, { text: "done" }] }] },
      {
        onToolActivity: (a) => activity.push(a),
        tools: {
          lookup: {
            description: "x",
            inputSchema: { type: "object", properties: { id: { type: "string" } }, required: ["id"] },
            handler: ({ id }: { id: string }) => {
              if (id === "boom") throw new Error("no such customer");
              return { id, name: "Ada" };
            },
          },
        },
      },
    );
    expect(await session.run("go")).toMatchObject({ finalOutput: "done" });
    const ends = activity.filter((a) => a.phase === "end") as Extract<ToolActivity, { phase: "end" }>[];
    expect(ends.map((e) => [e.ok, e.result, e.error?.kind ?? null])).toEqual([
      [true, { id: "c-1", name: "Ada" }, null],
      [false, null, "tool-error"],
      [false, null, "invalid-arguments"],
    ]);
    await session.close();
  });

  it("cancelling a run whose host tool is pending aborts the handler's signal", async () => {
    let abortedWith!: (reason: unknown) => void;
    const aborted = new Promise<unknown>((resolve) => (abortedWith = resolve));
    let started!: () => void;
    const pending = new Promise<void>((resolve) => (started = resolve));
    const session = await attachedScript(
      { runs: [{ steps: [{ hostTool: "wait" }] }] },
      { tools: { wait: { description: "x", inputSchema: { type: "object" }, handler: (_a, { signal }) => new Promise(() => (started(), signal.addEventListener("abort", () => abortedWith(signal.reason)))) } } },
    );
    const run = session.run("go");
    await pending;
    await session.cancel();
    expect(await run).toEqual({ status: "cancelled" });
    expect(await aborted).toMatchObject({ code: "cancelled" });
    await session.close();
  });

  it("through createAgentSession (cold): the kit's backend gets the channel the session declares for its tools", async () => {
    const kit = scriptedBackend({ runs: [{ steps: [{ hostTool: "lookup", args: { id: "c-9" } }], final: "done" }] });
    try {
      const results: unknown[] = [];
      const session = await createAgentSession({
        backend: kit.backend,
        onToolActivity: (a) => a.phase === "end" && results.push(a.result),
        tools: { lookup: { description: "x", inputSchema: { type: "object" }, handler: ({ id }: { id: string }) => `found ${id}` } },
      });
      expect(await session.run("go")).toMatchObject({ finalOutput: "done" });
      expect(results).toEqual(["found c-9"]);
      await session.close();
    } finally {
      kit.dispose();
    }
  });
});
