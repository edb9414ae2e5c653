/**
 * The application's own tools in Node (issue 31 item 2), end to end: the
 * real backend (tests/e2e/backends/host_tools_app.py, the module's one
 * line in its factory), a scripted model, real processes and sockets.
 */
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { SessionClosedError, SessionStartError, type ApprovalRequest, type SessionDiagnostic, type ToolActivity } from "../../lib/index";
import { calls, closeServers, killBackends, sessionIn, START_MODES, type StartMode } from "./host-tools-harness";

afterEach(killBackends);
afterAll(closeServers);

const lookupSchema = {
  type: "object",
  properties: { customer_id: { type: "string" } },
  required: ["customer_id"],
  additionalProperties: false,
};

describe.runIf(process.platform !== "win32").each(START_MODES)("host tools, %s", (mode: StartMode) => {
  // How the channel reaches the backend (the application's descriptor, the
  // spawn's layout, the fork's placement) and how a process with a call
  // pending ends differ by mode: those tests run in every mode. What goes
  // over the channel once it is placed is the same code whatever started
  // the backend: those run cold and warm (the modes the package starts
  // itself), not attached, where the test's own spawn gives the channel.
  const startedModes = it.runIf(mode !== "attached");
  it("one tool: the model's call reaches the handler with its ids, and the result reaches the final answer", async () => {
    const seen: unknown[] = [];
    const activity: ToolActivity[] = [];
    const { session } = await sessionIn(mode, {
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

  it("a session without tools on a factory with host.tools(): no host tools (an empty list over a given channel), the backend works as before", async () => {
    const { session } = await sessionIn(mode, {});
    expect(await session.run("hello")).toMatchObject({ finalOutput: "You said: hello" });
    await session.close();
  });

  it("tools that cannot be served are refused before the start (invalid-tools): a schema that is not JSON Schema, a remote $ref, a bad name, no handler", async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ t: { description: "x", inputSchema: { type: 12 }, handler: () => 1 } }, /tool "t": the input schema is not valid/],
      [{ t: { description: "x", inputSchema: { $ref: "https://example.com/s.json" }, handler: () => 1 } }, /example\.com/],
      [{ "bad name": { description: "x", inputSchema: {}, handler: () => 1 } }, /Tool name "bad name"/],
      [{ t: { description: "x", inputSchema: {} } }, /handler must be a function/],
    ];
    for (const [tools, message] of cases) {
      const error = await sessionIn(mode, { tools: tools as never }).then(() => undefined, (e: unknown) => e);
      expect(error).toBeInstanceOf(SessionStartError);
      expect(error).toMatchObject({ code: "invalid-tools" });
      expect((error as Error).message).toMatch(message);
    }
  });

  it.runIf(mode === "attached")("an attached session with tools and no hostChannel is refused (no-host-channel), saying what to pass", async () => {
    const { attachAgentSession } = await import("../../lib/index");
    const { spawnBackend } = await import("./host-tools-harness");
    const child = spawnBackend();
    const error = await attachAgentSession(child, { tools: { t: { description: "x", inputSchema: {}, handler: () => 1 } } }).then(() => undefined, (e: unknown) => e);
    expect(error).toMatchObject({ code: "no-host-channel" });
    expect((error as Error).message).toContain("child.stdio[4]");
  });

  it("a factory without the module fails the start with tools-not-taken, saying what to add", async () => {
    const start = sessionIn(mode, {
      env: { HOST_TOOLS_APP_WITHOUT_MODULE: "1" },
      tools: { lookup: { description: "x", inputSchema: lookupSchema, handler: () => "x" } },
    });
    const error = await start.then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(SessionStartError);
    expect(error).toMatchObject({ code: "tools-not-taken" });
    expect((error as Error).message).toContain("shims=[host.tools()]");
  });

  startedModes("two tools in one turn run in parallel and are answered out of order: each result goes to its own call", async () => {
    let releaseFirst!: () => void;
    const firstMayAnswer = new Promise<void>((resolve) => (releaseFirst = resolve));
    const order: string[] = [];
    const { session } = await sessionIn(mode, {
      tools: {
        slow: { description: "Answers second.", inputSchema: { type: "object" }, handler: async () => (await firstMayAnswer, order.push("slow"), "slow result") },
        fast: {
          description: "Answers first.",
          inputSchema: { type: "object" },
          handler: () => {
            order.push("fast");
            setTimeout(releaseFirst, 50);
            return "fast result";
          },
        },
      },
    });
    const result = await session.run(calls(["slow", {}], ["fast", {}]));
    expect(order).toEqual(["fast", "slow"]);
    expect(result).toMatchObject({ finalOutput: "Results: slow result | fast result" });
    await session.close();
  });

  startedModes("a handler that throws is a tool failure with its message; the run goes on", async () => {
    const activity: ToolActivity[] = [];
    const { session } = await sessionIn(mode, {
      onToolActivity: (a) => activity.push(a),
      tools: { lookup: { description: "x", inputSchema: lookupSchema, handler: () => { throw new Error("customer database is down"); } } },
    });
    const result = await session.run(calls(["lookup", { customer_id: "c-1" }]));
    expect(result).toMatchObject({ status: "completed", finalOutput: "Results: customer database is down" });
    expect(activity.find((a) => a.phase === "end")).toMatchObject({ ok: false, error: { kind: "tool-error", message: "customer database is down" } });
    await session.close();
  });

  startedModes("a handler that never answers: its timeout fails the call (signal aborted with timeout), the run goes on", async () => {
    let reason: unknown;
    const { session } = await sessionIn(mode, {
      tools: {
        hang: {
          description: "Never answers.",
          inputSchema: { type: "object" },
          timeoutMs: 300,
          handler: (_args, { signal }) => new Promise(() => signal.addEventListener("abort", () => (reason = signal.reason))),
        },
      },
    });
    const result = await session.run(calls(["hang", {}]));
    expect(result).toMatchObject({ status: "completed", finalOutput: "Results: The host did not answer in time." });
    expect(reason).toMatchObject({ code: "timeout" });
    // The session still works.
    expect(await session.run("hello")).toMatchObject({ finalOutput: "You said: hello" });
    await session.close();
  });

  startedModes("a handler that answers after its timeout: the late answer is dropped (nothing sent), the next call is answered", async () => {
    let late!: () => void;
    const answeredLate = new Promise<void>((resolve) => (late = resolve));
    let calls_ = 0;
    const { session, diagnostics } = await sessionIn(mode, {
      tools: {
        slow: {
          description: "Answers after its deadline the first time.",
          inputSchema: { type: "object" },
          timeoutMs: 200,
          handler: async () => {
            calls_ += 1;
            if (calls_ > 1) return "in time";
            await new Promise((resolve) => setTimeout(resolve, 600));
            setImmediate(late);
            return "too late";
          },
        },
      },
    });
    expect(await session.run(calls(["slow", {}]))).toMatchObject({ finalOutput: "Results: The host did not answer in time." });
    await answeredLate;
    expect(await session.run(calls(["slow", {}]))).toMatchObject({ finalOutput: "Results: in time" });
    expect(diagnostics.filter((d) => d.kind === "host-channel")).toEqual([]);
    await session.close();
  });

  startedModes("a cancel while a handler is pending: its signal aborts (cancelled), the run ends cancelled, nothing left waiting", async () => {
    let started!: () => void;
    const handlerStarted = new Promise<void>((resolve) => (started = resolve));
    let abortedWith!: (reason: unknown) => void;
    // The backend's cancel comes on the channel, beside run_cancelled on stdout: either may be read first.
    const aborted = new Promise<unknown>((resolve) => (abortedWith = resolve));
    const { session } = await sessionIn(mode, {
      tools: {
        hang: {
          description: "Waits for its signal.",
          inputSchema: { type: "object" },
          handler: (_args, { signal }) =>
            new Promise((_, reject) => {
              started();
              signal.addEventListener("abort", () => (abortedWith(signal.reason), reject(signal.reason)));
            }),
        },
      },
    });
    const run = session.run(calls(["hang", {}]));
    await handlerStarted;
    await session.cancel();
    expect(await run).toEqual({ status: "cancelled" });
    expect(await aborted).toMatchObject({ code: "cancelled" });
    expect(await session.run("again")).toMatchObject({ finalOutput: "You said: again" });
    await session.close();
  });

  it("close() with a call pending: the handler's signal aborts, the run settles, close resolves, nothing left pending", async () => {
    let started!: () => void;
    const handlerStarted = new Promise<void>((resolve) => (started = resolve));
    let reason: unknown;
    const { session } = await sessionIn(mode, {
      tools: {
        hang: {
          description: "Waits for its signal.",
          inputSchema: { type: "object" },
          handler: (_args, { signal }) => new Promise(() => (started(), signal.addEventListener("abort", () => (reason = signal.reason)))),
        },
      },
    });
    const run = session.run(calls(["hang", {}]));
    await handlerStarted;
    await session.close();
    // The backend's shutdown cancels the run (its cancel reaches the handler first) or the session's close ends the call.
    const settled = await run.then((r) => r, (e: unknown) => e);
    expect(settled instanceof SessionClosedError || (settled as { status?: string }).status === "cancelled").toBe(true);
    expect(["cancelled", "closed"]).toContain((reason as { code: string }).code);
  });

  startedModes("a 20 MB result reaches the backend whole", async () => {
    const big = "0123456789abcdef".repeat((20 * 1024 * 1024) / 16);
    const { session } = await sessionIn(mode, { tools: { blob: { description: "A big result.", inputSchema: { type: "object" }, handler: () => big } } });
    const result = await session.run(calls(["blob", {}]));
    const digest = (await import("node:crypto")).createHash("sha256").update(big).digest("hex").slice(0, 16);
    expect(result).toMatchObject({ finalOutput: `Results: ${big.length} chars sha256:${digest}` });
    await session.close();
  });

  startedModes("invalid arguments never reach the handler: the model reads the failing paths (zod 4 schema, converted by zod itself)", async () => {
    let called = false;
    const activity: ToolActivity[] = [];
    const { session } = await sessionIn(mode, {
      onToolActivity: (a) => activity.push(a),
      tools: {
        lookup: {
          description: "x",
          inputSchema: z.object({ customer_id: z.string().min(3), limit: z.number().int().default(10) }),
          handler: () => ((called = true), "x"),
        },
      },
    });
    const result = await session.run(calls(["lookup", { customer_id: 42 }]));
    expect(called).toBe(false);
    expect(String((result as { finalOutput: string }).finalOutput)).toMatch(/^Results: Invalid arguments for lookup: \/customer_id: 42 is not of type "string"/);
    expect(activity.find((a) => a.phase === "end")).toMatchObject({ ok: false, error: { kind: "invalid-arguments" } });
    // The input side of the zod schema: a field with a default may be left out.
    expect(await session.run(calls(["lookup", { customer_id: "c-42" }]))).toMatchObject({ finalOutput: "Results: x" });
    await session.close();
  });

  startedModes("a result that is not JSON is a clear invalid-result failure, not a crash", async () => {
    const activity: ToolActivity[] = [];
    const { session } = await sessionIn(mode, {
      onToolActivity: (a) => activity.push(a),
      tools: {
        nan: { description: "x", inputSchema: { type: "object" }, handler: () => ({ score: Number.NaN }) },
        big: { description: "x", inputSchema: { type: "object" }, handler: () => 10n },
        nothing: { description: "x", inputSchema: { type: "object" }, handler: () => undefined },
      },
    });
    const result = await session.run(calls(["nan", {}], ["big", {}], ["nothing", {}]));
    expect(result).toMatchObject({
      finalOutput:
        'Results: The tool\'s result is not JSON: the result at "score" is NaN. | The tool\'s result is not JSON: the result is a bigint. | The tool returned nothing (undefined): its result must be JSON.',
    });
    expect(activity.filter((a) => a.phase === "end").map((a) => (a as { error: { kind: string } }).error.kind)).toEqual(["invalid-result", "invalid-result", "invalid-result"]);
    await session.close();
  });

  startedModes("a host tool with needsApproval and the agent's own approval in one run: both go through the session's policy", async () => {
    const asked: ApprovalRequest["request"][] = [];
    const resolved: string[] = [];
    const { session } = await sessionIn(mode, {
      env: { HOST_TOOLS_APP_APPROVALS: "1" },
      approvals: ({ request }) => (asked.push(request), request.tool_name === "lookup" ? true : { allowed: false, reason: "no notes today" }),
      onApprovalResolved: (r) => resolved.push(`${r.request.tool_name}:${r.allowed}`),
      tools: { lookup: { description: "x", inputSchema: lookupSchema, needsApproval: true, handler: ({ customer_id }) => `found ${customer_id}` } },
    });
    const result = await session.run(calls(["lookup", { customer_id: "c-7" }], ["write_note", { path: "a.txt", content: "hi" }]));
    expect(result).toMatchObject({ finalOutput: expect.stringMatching(/^Results: found c-7 \| .*no notes today/) });
    expect(asked.map((r) => r.tool_name).sort()).toEqual(["lookup", "write_note"]);
    expect(asked.find((r) => r.tool_name === "lookup")).toMatchObject({ operation: "host_tool", metadata: { host_tool: true, arguments: { customer_id: "c-7" } } });
    expect(resolved.sort()).toEqual(["lookup:true", "write_note:false"]);
    await session.close();
  });

  startedModes("20 sessions calling host tools at once: no answer crosses", async () => {
    const sessions = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        sessionIn(mode, {
          // Twenty Python backends importing at once on a busy machine (attached: no start slots).
          readyTimeoutMs: 150_000,
          tools: { whoami: { description: "x", inputSchema: { type: "object" }, handler: async ({ n }: { n: number }) => (await new Promise((r) => setTimeout(r, Math.random() * 30)), `session ${i} call ${n}`) } },
        }),
      ),
    );
    const results = await Promise.all(sessions.map(({ session }) => session.run(calls(["whoami", { n: 1 }], ["whoami", { n: 2 }]))));
    results.forEach((result, i) => expect(result).toMatchObject({ finalOutput: `Results: session ${i} call 1 | session ${i} call 2` }));
    await Promise.all(sessions.map(({ session }) => session.close()));
  }, 240_000);

  startedModes("hostile lines on the channel: each a diagnostic, nothing crashes, the valid call still answered", async () => {
    const diagnostics: SessionDiagnostic[] = [];
    const { session } = await sessionIn(mode, {
      onDiagnostic: (d) => diagnostics.push(d),
      hostChannelMaxLineBytes: 1_000_000,
      tools: { lookup: { description: "x", inputSchema: lookupSchema, handler: ({ customer_id }) => `found ${customer_id}` } },
    });
    const result = await session.run(`hostile ${JSON.stringify([{ name: "lookup", arguments: { customer_id: "c-9" } }])}`);
    expect(result).toMatchObject({ status: "completed", finalOutput: "Results: found c-9" });
    const codes = diagnostics.filter((d) => d.kind === "host-channel").map((d) => (d as { code: string }).code);
    expect(codes).toEqual(expect.arrayContaining(["invalid-json", "unknown-type", "unknown-id", "line-too-long", "invalid-message"]));
    await session.close();
  });
});
