/**
 * Guarded callbacks and diagnostics. The session layer (`createAgentSession`, docs/protocol.md §9.5)
 * against the scripted fake backend in ../fixtures/fake-backend.js; see
 * `harness.ts` for how a test drives it (real child process, waits on
 * events, the only timers are the ones under test).
 */
import { afterEach, describe, expect, it, vi } from "vitest";

import { createAgentSession } from "../../lib/index";
import { ev, Harness, observe, Recorder, within } from "./harness";
import { manual } from "./common";

const h = new Harness(createAgentSession);
afterEach(() => h.cleanup());

describe("guarded callbacks (§9.5.1)", () => {
  it("an exception in any callback becomes a handler-error diagnostic naming it, and processing continues", async () => {
    const rec = new Recorder();
    const handlerErrors: { handler: string; error: unknown }[] = [];
    const thrower = (name: string, record?: (arg: any) => void) => (arg: any) => {
      record?.(arg);
      throw new Error(`${name} failed`);
    };
    const base = rec.callbacks();
    const l = await h.launch(
      {},
      {
        ...base,
        onEvent: thrower("onEvent", base.onEvent),
        onAssistantText: thrower("onAssistantText", base.onAssistantText),
        onReasoningText: thrower("onReasoningText", base.onReasoningText),
        onToolActivity: thrower("onToolActivity", base.onToolActivity),
        onAgentActivity: thrower("onAgentActivity", base.onAgentActivity),
        onPlan: thrower("onPlan", base.onPlan),
        onApprovalResolved: thrower("onApprovalResolved", base.onApprovalResolved),
        onConfigChanged: thrower("onConfigChanged", base.onConfigChanged),
        onClose: thrower("onClose", base.onClose),
        onDiagnostic: (diagnostic) => {
          if (diagnostic.kind === "handler-error") handlerErrors.push({ handler: diagnostic.handler, error: diagnostic.error });
          base.onDiagnostic!(diagnostic);
        },
      },
    );
    const run = observe(l.session.run("go"));
    await l.fake.expect("prompt");
    l.fake.emit(
      ev.runStart("go"),
      ev.agentStart(),
      ev.reasoning("hmm"),
      ev.text("Hello"),
      ev.text(" world"),
      ev.toolStart("call-1"),
      ev.toolEnd("call-1"),
      ev.plan([{ step: "a", status: "completed" }]),
      ev.approvalResolved("tool-approval-1", "allow"),
      ev.agentEnd({ final_output: "Hello world" }),
      ev.runComplete("Hello world"),
    );
    expect(await run.value()).toMatchObject({ status: "completed", finalOutput: "Hello world" });
    const configure = observe(l.session.configure({ a: 1 }));
    await l.fake.expect("configure");
    l.fake.emit(ev.configOk({ a: 1 }));
    expect(await configure.value()).toEqual({ a: 1 });
    await within(l.session.close(), "close()");

    // Every callback was still called for everything (processing continued).
    expect(rec.of("event")).toHaveLength(14);
    expect(rec.chunks("assistant").map((c) => c.delta)).toEqual(["Hello", " world", "", "Hello world"]);
    expect(rec.of("tool").map((e) => e.activity.phase)).toEqual(["start", "end"]);
    expect(rec.of("agent").map((e) => e.activity.phase)).toEqual(["start", "end"]);
    expect(rec.of("close")).toHaveLength(1);
    const names = new Set(handlerErrors.map((e) => e.handler));
    expect([...names].sort()).toEqual(
      [
        "onAgentActivity",
        "onApprovalResolved",
        "onAssistantText",
        "onClose",
        "onConfigChanged",
        "onEvent",
        "onPlan",
        "onReasoningText",
        "onToolActivity",
      ].sort(),
    );
    expect(handlerErrors.filter((e) => e.handler === "onEvent")).toHaveLength(rec.of("event").length);
    for (const { handler, error } of handlerErrors) expect((error as Error).message).toBe(`${handler} failed`);
  });

  it("an exception in onDiagnostic goes to console.error and is not reported again", async () => {
    const logged = manual<unknown[]>();
    const spy = vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => logged.resolve(args));
    try {
      const calls: unknown[] = [];
      const failure = new Error("diagnostic sink broke");
      const l = await h.launch(
        {},
        {
          onDiagnostic: (diagnostic) => {
            calls.push(diagnostic);
            throw failure;
          },
        },
      );
      l.fake.stderr("a warning");
      const args = await within(logged.promise, "console.error");
      expect(calls).toEqual([{ kind: "stderr", line: "a warning" }]);
      expect(args).toContain(failure);
      expect(String(args[0])).toMatch(/^\[session\]/);
      expect(spy).toHaveBeenCalledTimes(1);
    } finally {
      spy.mockRestore();
    }
  });

  it("without onDiagnostic, diagnostics are printed to console.error with the prefix [session]", async () => {
    const logged = manual<unknown[]>();
    const spy = vi.spyOn(console, "error").mockImplementation((...args: unknown[]) => logged.resolve(args));
    try {
      const l = await h.launch({}, { onDiagnostic: undefined });
      l.fake.stderr("backend warning");
      const args = await within(logged.promise, "console.error");
      expect(args.join(" ")).toMatch(/^\[session\] .*backend warning/);
    } finally {
      spy.mockRestore();
    }
  });
});

//
