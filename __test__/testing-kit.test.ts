/**
 * The testing kit (`./testing`): the scripted backend answers every command
 * as the real backend does, and a transcript recorded from the real Python
 * backend replays to the same updates, with the app's deviations reported.
 */
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgentSession, RunError, ConfigureError, type SessionUpdate, type AgentSession, type AgentSessionOptions } from "../lib/index";
import { replayBackend, scriptedBackend, transcriptOf, type TestBackend } from "../lib/testing/index";
import { repoRoot } from "./helpers";

let fakes: TestBackend[] = [];
let open: AgentSession[] = [];
afterEach(async () => {
  await Promise.all(open.map((s) => s.close()));
  for (const fake of fakes) fake.dispose();
  open = [];
  fakes = [];
});

async function sessionOn(fake: TestBackend, options: Omit<AgentSessionOptions, "backend"> = {}) {
  fakes.push(fake);
  const session: AgentSession = await createAgentSession({ backend: fake.backend, ...options });
  open.push(session);
  return session;
}

/** A compact view of a run's updates, in order. */
function summarize(updates: SessionUpdate[]): string[] {
  return updates.map((update) => {
    switch (update.type) {
      case "text":
      case "reasoning":
        return `${update.type}:${update.chunk.delta}${update.chunk.done ? "|done" : ""}`;
      case "tool":
        return `tool:${update.activity.phase}:${update.activity.call.tool}`;
      case "agent":
        return `agent:${update.activity.phase}`;
      case "plan":
        return `plan:${update.plan.steps.map((s) => `${s.text}=${s.status}`).join(",")}`;
      case "approval-request":
        return `approval-request:${update.request.tool_name}`;
      case "approval":
        return `approval:${update.resolution.allowed}`;
      case "result":
        return `result:${update.result.status}:${update.result.status === "completed" ? JSON.stringify(update.result.finalOutput) : ""}`;
    }
  });
}

async function collect(iterable: AsyncIterable<SessionUpdate>): Promise<SessionUpdate[]> {
  const updates: SessionUpdate[] = [];
  for await (const update of iterable) updates.push(update);
  return updates;
}

describe("scriptedBackend", () => {
  it("streams a scripted run in order: agent, reasoning, text, a plan, a denied tool, the result", async () => {
    const session = await sessionOn(
      scriptedBackend({
        runs: [
          {
            steps: [
              { reasoning: "Thinking." },
              { text: "Let me " },
              { text: "check." },
              { plan: [{ step: "Look", status: "completed" }, { step: "Write", status: "in_progress" }] },
              { tool: "write_file", args: { path: "x" }, approval: { reason: "Writes." } },
              { text: "Not saved." },
            ],
          },
        ],
      }),
      { approvals: () => ({ allowed: false, reason: "not today" }) },
    );
    const updates = await collect(session.stream("go"));
    expect(summarize(updates)).toEqual([
      "agent:start",
      "reasoning:Thinking.|done",
      "text:Let me check.",
      "plan:Look=completed,Write=active",
      "text:|done",
      "tool:start:write_file",
      "approval-request:write_file",
      "approval:false",
      "tool:end:write_file",
      "text:Not saved.",
      "agent:end",
      "text:|done",
      "result:completed:\"Not saved.\"",
    ]);
    const denied = updates.find((u) => u.type === "tool" && u.activity.phase === "end");
    expect(denied).toMatchObject({ activity: { ok: false } });
    expect(fakes[0].commands()).toMatchObject([{ type: "prompt", text: "go" }, { type: "approve", allowed: false, reason: "not today" }]);
  });

  it("fails a run with RunError, cancels a slow one, resets, configures (and rejects when scripted to)", async () => {
    const session = await sessionOn(
      scriptedBackend({
        ready: { config: { model: "a" } },
        runs: [{ steps: [{ text: "partial" }, { fail: "Model exploded." }] }, { steps: [{ text: "tick" }, { delayMs: 60_000 }] }, { steps: [{ text: "again" }] }],
      }),
    );
    await expect(session.run("one")).rejects.toSatisfy((error: unknown) => error instanceof RunError && error.message.includes("Model exploded."));
    const slow = session.run("two");
    await new Promise((resolve) => setTimeout(resolve, 100));
    await session.cancel();
    await expect(slow).resolves.toMatchObject({ status: "cancelled" });
    await session.reset();
    expect(await session.configure({ model: "b" })).toEqual({ model: "b" });
    expect(session.config).toEqual({ model: "b" });
    await expect(session.run("three")).resolves.toMatchObject({ status: "completed", finalOutput: "again" });
    expect(fakes[0].commands().map((c) => c.type)).toEqual(["prompt", "prompt", "cancel", "reset", "configure", "prompt"]);

    const rejecting = await sessionOn(scriptedBackend({ ready: { config: { model: "a" } }, configure: "reject" }));
    await expect(rejecting.configure({ model: "b" })).rejects.toSatisfy((error: unknown) => error instanceof ConfigureError && error.code === "rejected");
    expect(rejecting.config).toEqual({ model: "a" });
  });

  it("a consumer that leaves the loop cancels the scripted run", async () => {
    const session = await sessionOn(scriptedBackend({ runs: [{ steps: [{ text: "first" }, { delayMs: 60_000 }, { text: "never" }] }, { steps: [{ text: "second" }] }] }));
    const seen: string[] = [];
    for await (const update of session.stream("go")) {
      if (update.type === "text") {
        seen.push(update.chunk.delta);
        break;
      }
    }
    expect(seen).toEqual(["first"]);
    // The loop is left once the run has ended: the next run starts at once.
    expect(fakes[0].commands().map((c) => c.type)).toEqual(["prompt", "cancel"]);
    await expect(session.run("next")).resolves.toMatchObject({ status: "completed", finalOutput: "second" });
  });
});

describe("replayBackend", () => {
  const python = {
    command: join(repoRoot, ".venv", "bin", "python"),
    args: ["-m", "agentlane_process_bridge", "--app", "scenario_app:create_backend"],
    cwd: join(repoRoot, "tests", "e2e", "backends"),
  };

  it("replays a conversation recorded from the real backend to the same updates, and reports where the app deviates", async () => {
    // Immediate text delivery: one chunk per delta, so the comparison does
    // not depend on when the lines arrive (coalescing is timed).
    const real = await createAgentSession({
      backend: python,
      flightRecorder: { lines: Infinity, bytes: Infinity, maxLineBytes: Infinity },
      approvals: () => true,
      textDelivery: "immediate",
    });
    open.push(real);
    const recorded = [summarize(await collect(real.stream("chat hi"))), summarize(await collect(real.stream("note a.txt")))];
    const transcript = transcriptOf(real.flightRecord ?? []);
    await real.close();
    expect(recorded[1]).toContain("approval:true");

    const replay = replayBackend(transcript);
    const session = await sessionOn(replay, { approvals: () => true, textDelivery: "immediate" });
    expect(session.ready.metadata).toMatchObject({ app: "scenario" });
    const replayed = [summarize(await collect(session.stream("chat hi"))), summarize(await collect(session.stream("note a.txt")))];
    expect(replayed).toEqual(recorded);
    expect(replay.mismatches()).toEqual([]);

    // An app that answers the approval differently is told where.
    const deviating = replayBackend(transcript);
    const other = await sessionOn(deviating, { approvals: () => false });
    await collect(other.stream("chat hi"));
    const secondRun = other.stream("note a.txt");
    const first = await secondRun.next();
    expect(first.done).toBe(false);
    await expect.poll(() => deviating.mismatches().length).toBe(1);
    // Which command the approval is depends on the recording: a second prompt
    // that met the §12 race was refused and sent again, one command more.
    const entries = transcript.split("\n").map((line) => JSON.parse(line) as { out?: string; in?: { type: string } });
    const commands = entries.flatMap((entry) => (entry.in ? [entry.in.type] : []));
    const approveAt = commands.indexOf("approve") + 1;
    expect(approveAt).toBeGreaterThanOrEqual(3);
    expect(commands.slice(0, approveAt - 1).every((type) => type === "prompt")).toBe(true);
    expect(deviating.mismatches()[0]).toMatch(new RegExp(`^command ${approveAt}: expected \\{.*"allowed":true.*\\}, got \\{.*"allowed":false`));
    await secondRun.return?.();

    // A recording whose second prompt met the §12 race (refused with `A run
    // is already active.`, then sent again) replays as well, and the
    // approval is one command later. Made from this recording when it did
    // not meet the race itself.
    if (approveAt === 3) {
      const prompts = entries.flatMap((entry, index) => (entry.in?.type === "prompt" ? [index] : []));
      const { protocol_version, ts } = JSON.parse(entries[0].out!) as { protocol_version: string; ts: number };
      const refusal = { out: JSON.stringify({ protocol_version, type: "error", ts, scope: "command", message: "A run is already active." }) };
      entries.splice(prompts[1] + 1, 0, refusal, { in: entries[prompts[1]].in });
      const raced = entries.map((entry) => JSON.stringify(entry)).join("\n");
      const racedReplay = replayBackend(raced);
      const racedSession = await sessionOn(racedReplay, { approvals: () => true, textDelivery: "immediate" });
      expect([summarize(await collect(racedSession.stream("chat hi"))), summarize(await collect(racedSession.stream("note a.txt")))]).toEqual(recorded);
      expect(racedReplay.commands().map((command) => command.type)).toEqual(["prompt", "prompt", "prompt", "approve"]);
      expect(racedReplay.mismatches()).toEqual([]);
      const racedDeviating = replayBackend(raced);
      const racedOther = await sessionOn(racedDeviating, { approvals: () => false });
      await collect(racedOther.stream("chat hi"));
      const racedRun = racedOther.stream("note a.txt");
      expect((await racedRun.next()).done).toBe(false);
      await expect.poll(() => racedDeviating.mismatches().length).toBe(1);
      expect(racedDeviating.mismatches()[0]).toMatch(/^command 4: expected \{.*"allowed":true.*\}, got \{.*"allowed":false/);
      await racedRun.return?.();
    }
  }, 60_000);
});
