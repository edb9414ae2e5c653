/**
 * Approvals: the policy, decisions, and approvals closed without a decision. The session layer (`createAgentSession`, docs/protocol.md §9.5)
 * against the scripted fake backend in ../fixtures/fake-backend.js; see
 * `harness.ts` for how a test drives it (real child process, waits on
 * events, the only timers are the ones under test).
 */
import { afterEach, describe, expect, it } from "vitest";

import { createAgentSession, type ApprovalRequest } from "../../lib/index";
import { APPROVAL_REQUEST, ev, flushMicrotasks, Harness, observe, Recorder, within } from "./harness";
import { startRun, barrier, manual } from "./common";

const h = new Harness(createAgentSession);
afterEach(() => h.cleanup());

describe("approvals (§9.5.4)", () => {
  async function pendingApproval(options: Parameters<Harness["launch"]>[1], id = "tool-approval-1", reason: string | null = "File writes need approval.") {
    const l = await h.launch({}, options);
    const run = await startRun(l);
    l.fake.emit(ev.approvalPending(id, reason));
    return { l, run };
  }

  it("true: sends approve {allowed: true} without reason; the policy gets request, reason and a live signal", async () => {
    const calls: ApprovalRequest[] = [];
    const { l } = await pendingApproval({
      approvals: (request) => {
        calls.push(request);
        return true;
      },
    });
    expect((await l.fake.next()).line).toBe('{"type":"approve","id":"tool-approval-1","allowed":true,"protocol_version":"1.0"}');
    expect(calls).toHaveLength(1);
    expect(calls[0].request).toEqual(APPROVAL_REQUEST);
    expect(calls[0].reason).toBe("File writes need approval.");
    expect(calls[0].signal.aborted).toBe(false);
    l.fake.emit(ev.approvalResolved("tool-approval-1", "allow", null));
    await l.rec.waitFor((e) => e.kind === "resolved", "onApprovalResolved");
    expect(l.rec.of("resolved").map((e) => e.resolution)).toEqual([
      { request: APPROVAL_REQUEST, allowed: true, reason: null, decidedByApp: true },
    ]);
    // Aborted also after an app decision, so a UI can dismiss its prompt.
    expect(calls[0].signal.aborted).toBe(true);
  });

  it("the policy is called asynchronously, not inside the event dispatch", async () => {
    let dispatching = false;
    const insideDispatch: boolean[] = [];
    const rec = new Recorder();
    const base = rec.callbacks();
    const l = await h.launch(
      {},
      {
        ...base,
        onEvent: (event) => {
          base.onEvent!(event);
          dispatching = true;
          // Runs before any continuation queued by the processing of this event.
          queueMicrotask(() => (dispatching = false));
        },
        approvals: () => {
          insideDispatch.push(dispatching);
          return true;
        },
      },
    );
    const run = observe(l.session.run("go"));
    await l.fake.expect("prompt");
    l.fake.emit(ev.runStart("go"), ev.approvalPending("tool-approval-1"));
    await l.fake.expect("approve");
    expect(insideDispatch).toEqual([false]);
    l.fake.emit(ev.runComplete(null));
    await run.value();
  });

  it("false: sends approve {allowed: false} without reason", async () => {
    const { l } = await pendingApproval({ approvals: () => false }, "tool-approval-2", null);
    expect((await l.fake.next()).line).toBe('{"type":"approve","id":"tool-approval-2","allowed":false,"protocol_version":"1.0"}');
  });

  it("objects: the reason is sent when given and left out when undefined; allowed is a real boolean", async () => {
    const decisions = [
      { allowed: false, reason: "Not in this folder." },
      { allowed: true },
      { allowed: true, reason: "fine" },
      { allowed: false, reason: undefined },
    ];
    const l = await h.launch({}, { approvals: ({ request }) => decisions[Number(request.metadata.n)] });
    await startRun(l);
    for (const n of decisions.keys()) l.fake.emit(ev.approvalPending(`a${n}`, null, { ...APPROVAL_REQUEST, metadata: { n } }));
    const lines = [];
    for (const _ of decisions) lines.push((await l.fake.next()).line);
    expect(lines).toEqual([
      '{"type":"approve","id":"a0","allowed":false,"reason":"Not in this folder.","protocol_version":"1.0"}',
      '{"type":"approve","id":"a1","allowed":true,"protocol_version":"1.0"}',
      '{"type":"approve","id":"a2","allowed":true,"reason":"fine","protocol_version":"1.0"}',
      '{"type":"approve","id":"a3","allowed":false,"protocol_version":"1.0"}',
    ]);
  });

  it("the default policy denies with 'No approval policy configured.'", async () => {
    const { l } = await pendingApproval({});
    expect((await l.fake.next()).line).toBe(
      '{"type":"approve","id":"tool-approval-1","allowed":false,"reason":"No approval policy configured.","protocol_version":"1.0"}',
    );
  });

  it.each([
    ["throws", () => {
      throw new Error("policy exploded");
    }, "policy exploded"],
    ["rejects", () => Promise.reject(new Error("policy exploded")), "policy exploded"],
    ["returns undefined", () => undefined, "Not an approval decision: undefined"],
    ["returns a non-boolean allowed", () => ({ allowed: "yes" }), "Not an approval decision: [object Object]"],
    ["gives a reason the encoder refuses", () => ({ allowed: true, reason: "bad \ud800" }), "contains an unpaired UTF-16 surrogate"],
  ])("a policy that %s: handler-error diagnostic (approvals), then a denial 'Approval policy failed.'", async (_label, policy, message) => {
    const { l } = await pendingApproval({ approvals: policy as unknown as () => boolean });
    const received = await l.fake.next();
    expect(received.line).toBe(
      '{"type":"approve","id":"tool-approval-1","allowed":false,"reason":"Approval policy failed.","protocol_version":"1.0"}',
    );
    const diagnostics = l.rec.diagnostics();
    expect(diagnostics).toHaveLength(1);
    expect(diagnostics[0]).toMatchObject({ kind: "handler-error", handler: "approvals" });
    expect(((diagnostics[0] as { error: Error }).error).message).toContain(message);
  });

  it("a slow policy whose approval was resolved meanwhile: signal aborted, decision dropped, decidedByApp false", async () => {
    const decision = manual<boolean>();
    const called = manual<ApprovalRequest>();
    const { l, run } = await pendingApproval({
      approvals: (request) => {
        called.resolve(request);
        return decision.promise;
      },
    });
    const request = await within(called.promise, "the policy call");
    // An automatic decision recorded by the backend's broker.
    l.fake.emit(ev.approvalResolved("tool-approval-1", "deny", "Denied by rule."));
    await l.rec.waitFor((e) => e.kind === "resolved", "onApprovalResolved");
    expect(request.signal.aborted).toBe(true);
    expect(l.rec.of("resolved").map((e) => e.resolution)).toEqual([
      { request: APPROVAL_REQUEST, allowed: false, reason: "Denied by rule.", decidedByApp: false },
    ]);
    decision.resolve(true);
    await decision.promise;
    await flushMicrotasks();
    await barrier(l);
    l.fake.emit(ev.runComplete(null));
    await run.value();
  });

  it.each([
    ["run_complete", [ev.runComplete("done")]],
    ["run_cancelled", [ev.runCancelled()]],
    ["run error", [ev.runError("boom")]],
    ["reset", [ev.reset()]],
    ["shutdown", [ev.shutdown()]],
  ])("a terminal %s aborts pending approval signals without onApprovalResolved; a late decision is dropped", async (_label, lines) => {
    const decision = manual<boolean>();
    const requests: ApprovalRequest[] = [];
    const { l, run } = await pendingApproval({
      approvals: (request) => {
        requests.push(request);
        return decision.promise;
      },
    });
    l.fake.emit(ev.approvalPending("tool-approval-2"));
    await l.rec.waitRecord("tool_approval", 2);
    await flushMicrotasks();
    expect(requests.map((r) => r.signal.aborted)).toEqual([false, false]);
    l.fake.emit(...(lines as Record<string, unknown>[]));
    await l.rec.waitEvent((lines[0] as { type: string }).type);
    expect(requests.map((r) => r.signal.aborted)).toEqual([true, true]);
    decision.resolve(true);
    await decision.promise;
    await flushMicrotasks();
    await barrier(l);
    expect(l.rec.of("resolved")).toEqual([]);
    void run.settled;
  });

  it("several approvals can be pending at once, each decided under its own id", async () => {
    const l = await h.launch({}, { approvals: ({ request }) => request.tool_call_id === "call-a" });
    await startRun(l);
    l.fake.emit(
      ev.approvalPending("tool-approval-1", null, { ...APPROVAL_REQUEST, tool_call_id: "call-a" }),
      ev.approvalPending("tool-approval-2", null, { ...APPROVAL_REQUEST, tool_call_id: "call-b" }),
    );
    const commands = [await l.fake.expect("approve"), await l.fake.expect("approve")];
    expect(commands.map((c) => [c.id, c.allowed])).toEqual([
      ["tool-approval-1", true],
      ["tool-approval-2", false],
    ]);
  });

  it("a resolved record without a remembered pending approval: decidedByApp false, reason from final_decision", async () => {
    const l = await h.launch();
    await startRun(l);
    l.fake.emit(ev.approvalResolved("tool-approval-9", "deny", "Denied by bridge client."));
    await l.rec.waitFor((e) => e.kind === "resolved", "onApprovalResolved");
    expect(l.rec.of("resolved").map((e) => e.resolution)).toEqual([
      { request: APPROVAL_REQUEST, allowed: false, reason: "Denied by bridge client.", decidedByApp: false },
    ]);
    await barrier(l);
  });
});

//
