/**
 * A conversation's own tools through agentlane-bridge (issue 31 item 3),
 * from the Python standard-library client (__test__/fixtures/bridge_stdlib.py,
 * `tools`: handler functions on threads, answered with AnswerToolCall),
 * against the real host-tools backend (tests/e2e/backends/host_tools_app.py:
 * a real agentlane agent, a scripted model; `calls [...]` calls the listed
 * tools at once and answers `Results: r1 | r2 | …`), cold and warm; and the
 * check's step 3. The Go library's own tests (clients/go/agentlane/tools_test.go)
 * cover the same cases from Go, and the bridge restart with the adapter's
 * snapshots.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backendsDir, bridgeBinary, repoRoot, start, venvPython, type Bridge } from "./bridge-harness";

const run = promisify(execFile);
const stdlibClient = join(__dirname, "fixtures", "bridge_stdlib.py");
const env = { ...process.env, PYTHONPATH: join(repoRoot, "python/src") };

function hostToolsArgs(...extra: string[]): string[] {
  return ["--app", "host_tools_app:create_backend", "--project-dir", backendsDir, "--python", venvPython, ...extra];
}

interface ToolOutcome {
  conversation: string;
  items: any[];
  end: any;
  answers: { id: string; status: number; body: any }[];
  /** The Subscribe stream's items (`subscribe`), until the run's terminal event. */
  subscribed?: any[];
}

/** Runs `prompt` in `conversations` new conversations from the stdlib client. */
async function tools(
  bridge: Bridge,
  prompt: string,
  options: { conversations?: number; behaviour?: string; dropOnCall?: boolean; cancelOnCall?: boolean; closeOnCall?: boolean; subscribe?: boolean } = {},
): Promise<ToolOutcome[]> {
  const args = [stdlibClient, "tools", "--url", bridge.info.url, "--token-file", bridge.info.tokenFile, "--prompt", prompt];
  args.push("--conversations", String(options.conversations ?? 1), "--behaviour", options.behaviour ?? "answer");
  if (options.dropOnCall) args.push("--drop-on-call");
  if (options.cancelOnCall) args.push("--cancel-on-call");
  if (options.closeOnCall) args.push("--close-on-call");
  if (options.subscribe) args.push("--subscribe");
  const { stdout } = await run("python3", args, { maxBuffer: 64 * 1024 * 1024, timeout: 120_000 });
  return stdout.trim().split("\n").map((line) => JSON.parse(line));
}

const lookups = (...ids: string[]) => `calls ${JSON.stringify(ids.map((id) => ({ name: "lookup", arguments: { customer_id: id } })))}`;

function terminal(outcome: ToolOutcome): any {
  const events = outcome.items.filter((item) => item.event).map((item) => JSON.parse(item.event.json));
  return events[events.length - 1];
}

function toolCalls(outcome: ToolOutcome): any[] {
  return outcome.items.filter((item) => item.toolCall).map((item) => item.toolCall);
}

for (const mode of ["cold", "warm"] as const) {
  describe(`host tools through the bridge (${mode})`, () => {
    let bridge: Bridge;

    beforeAll(async () => {
      bridge = await start(hostToolsArgs(...(mode === "warm" ? ["--warm", "--warm-fallback", "error"] : [])), { env });
    }, 60_000);

    afterAll(async () => {
      await bridge?.stop();
    });

    it("one tool: the handler's result reaches the final answer", async () => {
      const [outcome] = await tools(bridge, lookups("c-42"));
      expect(terminal(outcome)).toMatchObject({ type: "run_complete", final_output: `Results: c-42 @ ${outcome.conversation}` });
      const [call] = toolCalls(outcome);
      expect(call).toMatchObject({ name: "lookup", conversationId: outcome.conversation, timeoutMs: 60_000 });
      expect(call.id).toBe(`${outcome.conversation}/tool-call-1`);
      expect(JSON.parse(call.argumentsJson)).toEqual({ customer_id: "c-42" });
      expect(outcome.answers).toEqual([{ id: call.id, status: 200, body: {} }]);
      // The Prompt stream carries the call before the run's terminal event.
      const order = outcome.items.map((item) => (item.toolCall ? "toolCall" : item.event?.type));
      expect(order.indexOf("toolCall")).toBeLessThan(order.indexOf("run_complete"));
    }, 60_000);

    it("two calls at once, answered in reverse order", async () => {
      const [outcome] = await tools(bridge, lookups("first", "second"), { behaviour: "reverse" });
      expect(terminal(outcome).final_output).toBe(`Results: first @ ${outcome.conversation} | second @ ${outcome.conversation}`);
      expect(outcome.answers.map((a) => a.id)).toEqual(toolCalls(outcome).map((c) => c.id).reverse());
    }, 60_000);

    it("a handler that raises: the model reads the message, the run goes on", async () => {
      const [outcome] = await tools(bridge, lookups("c-1"));
      const [failed] = await tools(bridge, lookups("c-1"), { behaviour: "error" });
      expect(terminal(outcome).type).toBe("run_complete");
      expect(terminal(failed)).toMatchObject({ type: "run_complete", final_output: "Results: no customer c-1" });
    }, 60_000);

    it("five conversations at once, the same tool name, no answer crosses", async () => {
      const outcomes = await tools(bridge, lookups("a", "b"), { conversations: 5 });
      expect(new Set(outcomes.map((o) => o.conversation)).size).toBe(5);
      for (const outcome of outcomes) {
        expect(terminal(outcome).final_output).toBe(`Results: a @ ${outcome.conversation} | b @ ${outcome.conversation}`);
        for (const call of toolCalls(outcome)) expect(call.id.startsWith(`${outcome.conversation}/`)).toBe(true);
      }
    }, 120_000);
  });
}

describe("host tools through the bridge: ends of a call", () => {
  let bridge: Bridge;

  beforeAll(async () => {
    bridge = await start(hostToolsArgs("--tool-timeout-ms", "500"), { env });
  }, 60_000);

  afterAll(async () => {
    await bridge?.stop();
  });

  it("a call nobody answers ends at its deadline and the run goes on", async () => {
    const [outcome] = await tools(bridge, lookups("c-3"), { behaviour: "hang" });
    expect(terminal(outcome)).toMatchObject({ type: "run_complete", final_output: "Results: The host did not answer in time." });
    const [call] = toolCalls(outcome);
    expect(call.timeoutMs).toBe(500);
    expect(outcome.items.find((item) => item.toolCallEnded)?.toolCallEnded).toEqual({ id: call.id, conversationId: outcome.conversation, reason: "timeout" });
  }, 60_000);

  it("a cancel while a call is pending: the run ends cancelled and the call is no longer pending", async () => {
    const [outcome] = await tools(bridge, lookups("c-6"), { behaviour: "hang", cancelOnCall: true });
    expect(terminal(outcome).type).toBe("run_cancelled");
    const [call] = toolCalls(outcome);
    expect(outcome.answers).toEqual([]);
    const late = await run("python3", [stdlibClient, "call", "--url", bridge.info.url, "--token-file", bridge.info.tokenFile, "--method", "agentlane.bridge.v1.AgentService/AnswerToolCall", "--body", JSON.stringify({ id: call.id, resultJson: '"late"' })]);
    expect(JSON.parse(late.stdout)[0].status).toBe(404);
  }, 60_000);

  it("an owner that drops its Prompt stream with a call pending: host-unavailable, the run cancelled, nothing left waiting", async () => {
    const [outcome] = await tools(bridge, lookups("c-4"), { dropOnCall: true });
    const [call] = toolCalls(outcome);
    expect(call).toBeDefined();
    // The conversation takes the next run: nothing of the dropped one waits.
    const agentlane = "agentlane.bridge.v1.AgentService/AnswerToolCall";
    const late = await run("python3", [stdlibClient, "call", "--url", bridge.info.url, "--token-file", bridge.info.tokenFile, "--method", agentlane, "--body", JSON.stringify({ id: call.id, resultJson: '"late"' })]);
    const [answer] = JSON.parse(late.stdout);
    expect(answer.status).toBe(404);
    expect(bridge.stderr.join("\n")).toContain("the Prompt stream ended before its run did; cancelling the run");
  }, 60_000);

  it("CloseConversation with a call pending: the run ends cancelled, the call is no longer pending, the stream ends OK", async () => {
    const [outcome] = await tools(bridge, lookups("c-9"), { behaviour: "hang", closeOnCall: true });
    const [call] = toolCalls(outcome);
    expect(call).toBeDefined();
    expect(terminal(outcome).type).toBe("run_cancelled");
    expect(outcome.items.find((item) => item.toolCallEnded)?.toolCallEnded).toMatchObject({ id: call.id, conversationId: outcome.conversation });
    expect(outcome.end?.error).toBeUndefined();
    const late = await run("python3", [stdlibClient, "call", "--url", bridge.info.url, "--token-file", bridge.info.tokenFile, "--method", "agentlane.bridge.v1.AgentService/AnswerToolCall", "--body", JSON.stringify({ id: call.id, resultJson: '"late"' })]);
    expect(JSON.parse(late.stdout)[0].status).toBe(404);
  }, 60_000);

  it("hostile lines on the channel: diagnostics on stderr, the valid call still answered", async () => {
    const before = bridge.stderr.length;
    const [outcome] = await tools(bridge, `hostile ${JSON.stringify([{ name: "lookup", arguments: { customer_id: "c-8" } }])}`);
    expect(terminal(outcome)).toMatchObject({ type: "run_complete", final_output: `Results: c-8 @ ${outcome.conversation}` });
    const diagnostics = bridge.stderr.slice(before).filter((line) => line.includes("host channel"));
    // Not JSON, a type the host does not take, a cancel of an id never
    // sent, a request without an id (the 2 MB request is a call with
    // invalid arguments: answered, not a diagnostic).
    for (const code of ["invalid-json", "unknown-type", "unknown-id", "invalid-message"]) {
      expect(diagnostics.some((line) => line.includes(`[${code}]`)), code).toBe(true);
    }
  }, 60_000);
});

describe("host tools through the bridge: results, arguments, approvals, Subscribe", () => {
  let bridge: Bridge;

  beforeAll(async () => {
    // The agent also has write_note, which asks the host's approval.
    bridge = await start(hostToolsArgs(), { env: { ...env, HOST_TOOLS_APP_APPROVALS: "1" } });
  }, 60_000);

  afterAll(async () => {
    await bridge?.stop();
  });

  it("a 20 MiB result reaches the backend whole", async () => {
    const [outcome] = await tools(bridge, lookups("c-big"), { behaviour: "big" });
    const big = "0123456789abcdef".repeat((20 * 1024 * 1024) / 16);
    const digest = createHash("sha256").update(big).digest("hex").slice(0, 16);
    expect(terminal(outcome)).toMatchObject({ type: "run_complete", final_output: `Results: ${big.length} chars sha256:${digest}` });
  }, 120_000);

  it("a result_json that is not JSON is refused with invalid_argument, the call stays pending, and the next answer is taken", async () => {
    const [outcome] = await tools(bridge, lookups("c-5"), { behaviour: "not-json" });
    const [call] = toolCalls(outcome);
    expect(outcome.answers).toHaveLength(2);
    expect(outcome.answers[0]).toMatchObject({ id: call.id, status: 400, body: { code: "invalid_argument", message: expect.stringContaining("result_json must be the text of one JSON value") } });
    expect(outcome.answers[1]).toEqual({ id: call.id, status: 200, body: {} });
    expect(terminal(outcome)).toMatchObject({ type: "run_complete", final_output: "Results: answered after a refusal" });
  }, 60_000);

  it("invalid arguments from the model never reach the adapter: the model reads the failing path", async () => {
    const prompt = `calls ${JSON.stringify([{ name: "lookup", arguments: { customer_id: 42 } }])}`;
    const [outcome] = await tools(bridge, prompt);
    expect(toolCalls(outcome)).toEqual([]);
    expect(terminal(outcome).type).toBe("run_complete");
    expect(terminal(outcome).final_output).toContain("/customer_id");
  }, 60_000);

  it("a host tool and the agent's own approval in one run: the call is answered, the approval denied, both reach the answer", async () => {
    const prompt = `calls ${JSON.stringify([{ name: "lookup", arguments: { customer_id: "c-7" } }, { name: "write_note", arguments: { path: "a.txt", content: "hi" } }])}`;
    const [outcome] = await tools(bridge, prompt);
    expect(outcome.items.some((item) => item.event?.approvalId)).toBe(true);
    expect(toolCalls(outcome)).toHaveLength(1);
    expect(terminal(outcome).final_output).toMatch(new RegExp(`^Results: c-7 @ ${outcome.conversation} \\| .*no notes today`));
  }, 60_000);

  it("the Subscribe stream carries the tool call too, with the same id, before the run's end", async () => {
    const [outcome] = await tools(bridge, lookups("c-11"), { subscribe: true });
    const [call] = toolCalls(outcome);
    const seen = (outcome.subscribed ?? []).filter((item) => item.toolCall).map((item) => item.toolCall);
    expect(seen).toEqual([call]);
    const order = (outcome.subscribed ?? []).map((item) => (item.toolCall ? "toolCall" : item.event?.type));
    expect(order.indexOf("toolCall")).toBeLessThan(order.indexOf("run_complete"));
  }, 60_000);
});

describe("agentlane-bridge check, step 3", () => {
  it("passes with an app whose agent calls the host's tool, and says why it fails without one", async () => {
    const args = hostToolsArgs(
      "--prompt",
      'calls [{"name":"write_note","arguments":{"path":"a.txt","content":"hi"}}]',
      "--tool-prompt",
      lookups("c-42"),
      "--require-tools",
    );
    const passed = await run(bridgeBinary, ["check", ...args], { env: { ...env, HOST_TOOLS_APP_APPROVALS: "1" }, timeout: 120_000 });
    expect(passed.stdout).toContain('step 3: ok (the agent called the host\'s tool "lookup" 1 time(s); final answer "Results: c-42 is Ada Lovelace (checked by agentlane-bridge)")');
    const failed = await run(bridgeBinary, ["check", ...args], { env: { ...env, HOST_TOOLS_APP_APPROVALS: "1", HOST_TOOLS_APP_WITHOUT_MODULE: "1" }, timeout: 120_000 }).catch((error) => error);
    expect(failed.code).toBe(1);
    expect(failed.stdout).toContain("check: FAILED: step 3: the conversation has tools but the backend's factory did not add them");
  }, 240_000);
});
