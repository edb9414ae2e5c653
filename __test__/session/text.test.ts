/**
 * Text segmentation as the session delivers it. The session layer (`createAgentSession`, docs/protocol.md §9.5)
 * against the scripted fake backend in ../fixtures/fake-backend.js; see
 * `harness.ts` for how a test drives it (real child process, waits on
 * events, the only timers are the ones under test).
 */
import { afterEach, describe, expect, it } from "vitest";

import { createAgentSession } from "../../lib/index";
import { ev, Harness, observe } from "./harness";
import { x, startRun, expectOneDonePerSegment } from "./common";

const h = new Harness(createAgentSession);
afterEach(() => h.cleanup());

describe("text segmentation through the session (§9.5.4)", () => {
  it("deltas, empty deltas (ignored: no segment, no chunk) and tool start/end closing segments (immediate)", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    l.fake.emit(
      ev.text("Saving"),
      ev.text(""),
      ev.text("."),
      ev.toolStart("call-1"),
      ev.text(""),
      ev.toolEnd("call-1"),
      ev.runComplete(null),
    );
    await run.value();
    expect(l.rec.chunks("assistant")).toEqual([
      { delta: "Saving", text: "Saving", segment: 1, done: false },
      { delta: ".", text: "Saving.", segment: 1, done: false },
      { delta: "", text: "Saving.", segment: 1, done: true },
    ]);
    expectOneDonePerSegment(l.rec);
  });

  it("reasoning then assistant: the reasoning segment closes first; segment numbers are shared", async () => {
    const l = await h.launch();
    const run = await startRun(l);
    l.fake.emit(ev.reasoning("Checking"), ev.text("Two files."), ev.reasoning(null, "More"), ev.runComplete(null));
    await run.value();
    expect(l.rec.log.filter((e) => e.kind === "assistant" || e.kind === "reasoning").map((e) => [e.kind, (e as any).chunk])).toEqual([
      ["reasoning", { delta: "Checking", text: "Checking", segment: 1, done: false }],
      ["reasoning", { delta: "", text: "Checking", segment: 1, done: true }],
      ["assistant", { delta: "Two files.", text: "Two files.", segment: 2, done: false }],
      ["assistant", { delta: "", text: "Two files.", segment: 2, done: true }],
      ["reasoning", { delta: "More", text: "More", segment: 3, done: false }],
      ["reasoning", { delta: "", text: "More", segment: 3, done: true }],
    ]);
  });

  it("reasoning takes text when not null, else reasoning; a non-string value does nothing (no flush)", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    await startRun(l);
    // One burst: had the non-string reasoning flushed "ab", a done:false chunk would show.
    l.fake.emit(
      ev.text("ab"),
      ev.reasoning({ summary: "structured" }, null),
      ev.reasoning(null, null),
      ev.reasoning("from reasoning", null),
      ev.reasoning("ignored", "from text"),
      ev.runCancelled(),
    );
    await l.rec.waitEvent("run_cancelled");
    expect(l.rec.log.filter((e) => e.kind === "assistant" || e.kind === "reasoning").map((e) => [e.kind, (e as any).chunk])).toEqual([
      ["assistant", { delta: "ab", text: "ab", segment: 1, done: true }],
      ["reasoning", { delta: "from reasoningfrom text", text: "from reasoningfrom text", segment: 2, done: true }],
    ]);
  });

  it("other model kinds and a text_delta with non-string text flush pending text; the segment stays open", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    await startRun(l);
    const flushers = [
      ev.model("provider", { provider_event_type: "response.created" }),
      ev.model("tool_call_arguments_delta", { tool_call_id: "c", arguments_delta: "{" }),
      ev.model("completed"),
      ev.model("error", { error: { type: "RateLimitError", message: "slow" } }),
      ev.text(null),
      ev.record("model_stream", { event: { kind: "web_search_progress", query: "files" } }),
    ];
    let count = 0;
    for (const [i, flusher] of flushers.entries()) {
      l.fake.emit(ev.text(`t${i}`), flusher);
      count += 2;
      await l.rec.waitRecord("model_stream", count);
      expect(l.rec.chunks().at(-1), `flusher ${i}`).toEqual({ delta: `t${i}`, text: flushers.slice(0, i + 1).map((_, j) => `t${j}`).join(""), segment: 1, done: false });
    }
    expect(l.rec.chunks()).toHaveLength(flushers.length);
  });

  it("agent, plan, approval, llm, snapshot, handoff and unknown records flush pending text but keep the segment open", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced", approvals: () => true });
    await startRun(l);
    const records: [string, Record<string, unknown>][] = [
      ["agent_start", ev.agentStart({ taskId: "task-2", parent: "task-1", agent: "Helper" })],
      ["agent_end", ev.agentEnd(null, { taskId: "task-2", parent: "task-1", agent: "Helper" })],
      ["plan_updated", ev.plan([{ step: "a", status: "pending" }])],
      ["tool_approval", ev.approvalPending("tool-approval-1")],
      ["tool_approval", ev.approvalResolved("tool-approval-1", "allow")],
      ["llm_start", ev.llmStart()],
      ["state_snapshot", ev.stateSnapshot()],
      ["handoff_start", ev.handoffStart()],
      ["subagent_progress", ev.unknownKind()],
    ];
    const seen = new Map<string, number>();
    let text = "";
    for (const [i, [type, record]] of records.entries()) {
      l.fake.emit(ev.text(`t${i}`), record);
      seen.set(type, (seen.get(type) ?? 0) + 1);
      await l.rec.waitRecord(type, seen.get(type));
      text += `t${i}`;
      expect(l.rec.chunks().at(-1), type).toEqual({ delta: `t${i}`, text, segment: 1, done: false });
    }
  });

  it("coalesced: 96 code units or a 32-unit sentence are delivered at once; shorter text after 120 ms", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    await startRun(l);
    // Each pair arrives in one burst: 95 units are held, the 96th unit delivers both at once.
    l.fake.emit(ev.text(x(95)), ev.text("y"));
    await l.rec.waitRecord("model_stream", 2);
    expect(l.rec.chunks()).toEqual([{ delta: x(95) + "y", text: x(95) + "y", segment: 1, done: false }]);
    // 31 units ending a sentence are held; 35 ending a sentence are delivered at once.
    l.fake.emit(ev.text(x(29) + ". "), ev.text("ab! "));
    await l.rec.waitRecord("model_stream", 4);
    const sentence = x(29) + ". ab! ";
    expect(l.rec.chunks()).toEqual([
      { delta: x(95) + "y", text: x(95) + "y", segment: 1, done: false },
      { delta: sentence, text: x(95) + "y" + sentence, segment: 1, done: false },
    ]);
    const started = Date.now();
    l.fake.emit(ev.text("short"));
    await l.rec.waitRecord("model_stream", 5);
    expect(l.rec.chunks()).toHaveLength(2);
    await l.rec.waitFor((e) => e.kind === "assistant", "the coalescing timer", 3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(100);
    expect(l.rec.chunks().at(-1)).toEqual({ delta: "short", text: x(95) + "y" + sentence + "short", segment: 1, done: false });
  });

  it("final-output reconciliation: equal, extends, different, non-string, no open segment, reasoning open", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    const cases: { name: string; deltas: Record<string, unknown>[]; final: unknown; expected: unknown[] }[] = [
      {
        name: "equal",
        deltas: [ev.text("Two "), ev.text("files.")],
        final: "Two files.",
        expected: [["assistant", { delta: "Two files.", text: "Two files.", done: true }]],
      },
      {
        name: "extends",
        deltas: [ev.text(x(96)), ev.text("ab")],
        final: x(96) + "abcd",
        expected: [
          ["assistant", { delta: x(96), text: x(96), done: false }],
          ["assistant", { delta: "abcd", text: x(96) + "abcd", done: true }],
        ],
      },
      {
        name: "different",
        deltas: [ev.text(x(96)), ev.text("draft")],
        final: "Final answer",
        expected: [
          ["assistant", { delta: x(96), text: x(96), done: false }],
          ["assistant", { delta: "Final answer", text: "Final answer", done: true }],
        ],
      },
      {
        name: "non-string",
        deltas: [ev.text("Partial")],
        final: { answer: 42 },
        expected: [["assistant", { delta: "Partial", text: "Partial", done: true }]],
      },
      { name: "no open segment", deltas: [], final: "Saved.", expected: [["assistant", { delta: "Saved.", text: "Saved.", done: true }]] },
      { name: "no open segment, empty output", deltas: [], final: "", expected: [] },
      {
        name: "reasoning open",
        deltas: [ev.reasoning("thinking")],
        final: "Answer",
        expected: [
          ["reasoning", { delta: "thinking", text: "thinking", done: true }],
          ["assistant", { delta: "Answer", text: "Answer", done: true }],
        ],
      },
    ];
    let lastSegment = 0;
    for (const c of cases) {
      const before = l.rec.log.length;
      const run = await startRun(l, c.name);
      l.fake.emit(...c.deltas, ev.runComplete(c.final));
      expect(await run.value(), c.name).toMatchObject({ status: "completed", finalOutput: c.final });
      const got = l.rec.log
        .slice(before)
        .filter((e) => e.kind === "assistant" || e.kind === "reasoning")
        .map((e) => [e.kind, (e as any).chunk]);
      expect(
        got.map(([kind, { segment: _segment, ...chunk }]) => [kind, chunk]),
        c.name,
      ).toEqual(c.expected);
      for (const [, chunk] of got) expect(chunk.segment, c.name).toBeGreaterThan(lastSegment);
      if (got.length > 0) lastSegment = got.at(-1)![1].segment;
    }
    expectOneDonePerSegment(l.rec);
  });

  it("cancel_requested and cancel_ignored flush pending text; the segment stays open", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    const run = await startRun(l);
    const cancel = observe(l.session.cancel());
    await l.fake.expect("cancel");
    l.fake.emit(ev.text("ab"), ev.cancelRequested());
    await l.rec.waitEvent("cancel_requested");
    expect(l.rec.chunks()).toEqual([{ delta: "ab", text: "ab", segment: 1, done: false }]);
    l.fake.emit(ev.text("cd"), ev.cancelIgnored("cancellation already in progress"));
    await l.rec.waitEvent("cancel_ignored");
    expect(l.rec.chunks().at(-1)).toEqual({ delta: "cd", text: "abcd", segment: 1, done: false });
    l.fake.emit(ev.runCancelled());
    await cancel.value();
    await run.value();
    expect(l.rec.chunks().at(-1)).toEqual({ delta: "", text: "abcd", segment: 1, done: true });
  });

  it.each([
    ["reset", ev.reset()],
    ["shutdown", ev.shutdown()],
  ])("a %s event sweeps: the open segment closes, open tools and agents are cancelled", async (type, event) => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    await startRun(l);
    l.fake.emit(ev.agentStart(), ev.toolStart("call-1"), ev.text("partial"), event);
    await l.rec.waitEvent(type);
    expect(l.rec.trace().slice(-4)).toEqual([
      `event ${type}`,
      'assistant 1 "partial" done',
      "tool cancelled call-1",
      "agent cancelled task-1",
    ]);
  });

  it("run_cancelled and run errors close the open segment normally", async () => {
    const l = await h.launch({}, { textDelivery: "coalesced" });
    let run = await startRun(l);
    l.fake.emit(ev.text("Partial"), ev.runCancelled());
    await run.value();
    run = await startRun(l);
    l.fake.emit(ev.reasoning("Hmm"), ev.runError("boom"));
    await run.error();
    expect(l.rec.chunks()).toEqual([
      { delta: "Partial", text: "Partial", segment: 1, done: true },
      { delta: "Hmm", text: "Hmm", segment: 2, done: true },
    ]);
  });
});

//

describe("regressions", () => {
  it("a stray run_complete with no active run makes no text", async () => {
    const l = await h.launch();
    l.fake.emit(ev.runComplete("ghost output"));
    await l.rec.waitEvent("run_complete");
    expect(l.rec.chunks()).toEqual([]);
    const run = await startRun(l);
    l.fake.emit(ev.text("real"), ev.runComplete("real"));
    await run.value();
    expect(l.rec.chunks().map((c) => c.text)).toEqual(["real", "real"]);
  });
});
