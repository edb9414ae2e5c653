/**
 * The streaming API (issue "Drop-in and pleasant", item 2): `session.stream()`
 * yields a run's updates in wire order and ends with its result; not
 * pulling stops the backend's writes; leaving the loop cancels the run;
 * `await using` closes the session. Against the scripted fake backend, and
 * a real flooding child for the backpressure.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";

import { createAgentSession, RunError, type SessionUpdate } from "../../lib/index";
import { ev, Harness, within } from "./harness";

const h = new Harness(createAgentSession);
afterEach(() => h.cleanup());

/** What an update is, in a word, for comparing sequences. */
function label(update: SessionUpdate): string {
  switch (update.type) {
    case "text":
    case "reasoning":
      return `${update.type} ${JSON.stringify(update.chunk.delta)}${update.chunk.done ? " done" : ""}`;
    case "tool":
    case "agent":
      return `${update.type} ${update.activity.phase}`;
    case "approval-request":
      return `approval-request ${update.requestId}`;
    case "approval":
      return `approval ${update.resolution.allowed}`;
    case "plan":
      return "plan";
    case "result":
      return `result ${update.result.status}`;
  }
}

describe("session.stream()", () => {
  it("yields the run's updates in wire order and ends with the result; the callbacks are called as for run()", async () => {
    const texts: string[] = [];
    const l = await h.launch({}, { approvals: () => true, onAssistantText: (chunk) => texts.push(chunk.delta) });
    const stream = l.session.stream("go");
    await l.fake.expect("prompt");
    l.fake.emit(ev.runStart("go"), ev.agentStart(), ev.text("Saving."), ev.toolStart("call-1"), ev.approvalPending("tool-approval-1"));
    await l.fake.expect("approve");
    l.fake.emit(ev.approvalResolved("tool-approval-1", "allow"), ev.toolEnd("call-1"), ev.agentEnd({ final_output: "Saved." }), ev.runComplete("Saved."));
    const seen: string[] = [];
    for await (const update of stream) seen.push(label(update));
    expect(seen).toEqual([
      "agent start",
      'text "Saving."',
      'text "" done',
      "tool start",
      "approval-request tool-approval-1",
      "approval true",
      "tool end",
      "agent end",
      'text "Saved." done',
      "result completed",
    ]);
    expect(texts).toEqual(["Saving.", "", "Saved."]);
  });

  it("a failed run ends the loop with its RunError, after the updates before it", async () => {
    const l = await h.launch();
    const stream = l.session.stream("go");
    await l.fake.expect("prompt");
    l.fake.emit(ev.runStart("go"), ev.text("part"), ev.runError("model exploded"));
    const seen: string[] = [];
    await expect(
      (async () => {
        for await (const update of stream) seen.push(label(update));
      })(),
    ).rejects.toBeInstanceOf(RunError);
    expect(seen).toEqual(['text "part"', 'text "" done']);
  });

  it("leaving the loop early cancels the run, and the loop is left once the run has ended", async () => {
    const l = await h.launch();
    const stream = l.session.stream("go");
    await l.fake.expect("prompt");
    l.fake.emit(ev.runStart("go"), ev.text("first"));
    const order: string[] = [];
    const loop = (async () => {
      for await (const update of stream) {
        expect(label(update)).toBe('text "first"');
        break;
      }
      order.push("left the loop");
    })();
    await l.fake.expect("cancel");
    await new Promise((resolve) => setTimeout(resolve, 50));
    order.push("cancelled");
    l.fake.emit(ev.cancelRequested(), ev.runCancelled());
    await loop;
    expect(order).toEqual(["cancelled", "left the loop"]);
    await l.rec.waitEvent("run_cancelled");
    // The session goes on: the next run starts.
    const next = l.session.run("again");
    await l.fake.expect("prompt");
    l.fake.emit(ev.runStart("again"), ev.runComplete("ok"));
    expect(await next).toMatchObject({ status: "completed" });
  });

  it("a second stream while a run is active fails with SessionStateError and leaves the first alone", async () => {
    const l = await h.launch();
    const first = l.session.stream("one");
    await l.fake.expect("prompt");
    const second = l.session.stream("two");
    await expect(second.next()).rejects.toMatchObject({ name: "SessionStateError", code: "run-active" });
    l.fake.emit(ev.runStart("one"), ev.text("x"), ev.runComplete("x"));
    const seen: string[] = [];
    for await (const update of first) seen.push(label(update));
    expect(seen.at(-1)).toBe("result completed");
  });
});

describe.runIf(process.platform === "linux")("backpressure through the stream", () => {
  it("a consumer that stops pulling stops the backend's writes; then every update arrives", async () => {
    const count = 100_000;
    const session = await createAgentSession({
      backend: { command: process.execPath, args: [join(__dirname, "..", "fixtures", "flood-backend.js"), String(count)] },
      textDelivery: "immediate",
      onDiagnostic: () => {},
    });
    try {
      const backend = session.process!.pid!;
      const written = () => Number(/wchar: (\d+)/.exec(readFileSync(`/proc/${backend}/io`, "utf8"))![1]);
      const stream = session.stream("flood");
      const first = await stream.next();
      expect(first.value).toMatchObject({ type: "text" });
      // Not pulling: the backend's writes stop within the pipe's and the
      // reader's bounds, far short of the 100,000 events (about 23 MB).
      await new Promise((resolve) => setTimeout(resolve, 700));
      const atStall = written();
      await new Promise((resolve) => setTimeout(resolve, 1500));
      const later = written();
      expect(later - atStall).toBeLessThan(256 * 1024);
      expect(later).toBeLessThan(8 * 1024 * 1024);
      let texts = 1;
      let last: SessionUpdate | undefined;
      for await (const update of stream) {
        if (update.type === "text" && !update.chunk.done) texts += 1;
        last = update;
      }
      expect(texts).toBe(count);
      expect(last).toMatchObject({ type: "result", result: { status: "completed" } });
    } finally {
      await session.close();
    }
  }, 60_000);
});

describe("await using", () => {
  it("closes the session at the end of the scope", async () => {
    let exited!: Promise<unknown>;
    {
      await using session = await createAgentSession({
        backend: { command: process.execPath, args: [join(__dirname, "..", "fixtures", "flood-backend.js"), "1"] },
        onDiagnostic: () => {},
      });
      const pid = session.process!.supervisorPid ?? session.process!.pid!;
      exited = within(
        new Promise((resolve) => {
          const poll = () => {
            try {
              process.kill(pid, 0);
              setTimeout(poll, 10);
            } catch {
              resolve(true);
            }
          };
          poll();
        }),
        "the backend to exit after the scope",
      );
    }
    expect(await exited).toBe(true);
  });
});
