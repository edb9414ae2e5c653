/**
 * agentlane-bridge end to end, against the real agentlane==0.22.0 backend
 * (tests/e2e/backends/scenario_app.py; keywords in tests/e2e/NOTES.md),
 * driven over Connect by connect-es (binary proto, and JSON where the codec
 * matters). One bridge serves the conversation tests in order; the
 * lifecycle tests start their own.
 */
import { execFileSync } from "node:child_process";
import { existsSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigureFailureSchema } from "../examples/clients/node/gen/agentlane/bridge/v1/bridge_pb.js";
import {
  AgentService,
  approval,
  BridgeControlService,
  backendsDir,
  bridgeBinary,
  collect,
  eventually,
  gone,
  groupMembers,
  record,
  scenarioArgs,
  start,
  Subscription,
  subscribedTo,
  type Bridge,
} from "./bridge-harness";

const terminalTypes = ["run_complete", "run_cancelled", "error"];

describe("agentlane-bridge: a conversation with the real backend", () => {
  let bridge: Bridge;
  let agent: any;
  let agentJson: any;
  let subscribers: Subscription[];

  beforeAll(async () => {
    bridge = await start(scenarioArgs());
    agent = bridge.client(AgentService);
    agentJson = bridge.client(AgentService, { json: true });
    // Clients subscribed before the first run: one per codec, the JSON one in batches.
    subscribers = await Promise.all([subscribedTo(bridge), subscribedTo(bridge, { json: true, batched: true })]);
  });

  afterAll(async () => {
    const exit = await bridge.stop();
    expect(exit).toEqual({ code: 0, signal: null });
  });

  it("chat: the Prompt stream carries run_start through run_complete as the exact lines, then ends OK; both subscribers (one taking batches) see the same lines", async () => {
    const run = await collect(agent.prompt({ text: "chat hello bridge" }));
    expect(run.error).toBeUndefined();
    expect(run.events[0].type).toBe("run_start");
    expect(run.events[0].event.prompt).toBe("chat hello bridge");
    const last = run.events.at(-1)!;
    expect(last.type).toBe("run_complete");
    expect(last.event.final_output).toBe("Hello! This is a scripted reply. You said: chat hello bridge");
    expect(run.events.slice(1, -1).every((e) => e.type === "run_event")).toBe(true);
    // Consecutive stdout positions, the type as given, the line exactly as written.
    const seqs = run.events.map((e) => Number(e.seq));
    expect(seqs).toEqual(seqs.map((_, i) => seqs[0] + i));
    for (const e of run.events) expect(e.type).toBe(e.event.type);
    for (const subscriber of subscribers) {
      await subscriber.until((e) => e.seq === last.seq, "the run's last event on Subscribe");
      const mirrored = subscriber.events.filter((e) => e.seq >= run.events[0].seq && e.seq <= last.seq);
      expect(mirrored.map((e) => [e.seq, e.type, e.event])).toEqual(run.events.map((e) => [e.seq, e.type, e.event]));
      // One event per message: the exact lines; batches: the same values.
      if (mirrored[0].json !== null) expect(mirrored.map((e) => e.json)).toEqual(run.events.map((e) => e.json));
    }
    expect(subscribers[1].events.some((e) => e.json === null)).toBe(true); // it did get batches
    // The ready line was line 1.
    const version = await bridge.client(BridgeControlService).getVersion({});
    expect(JSON.parse(version.readyJson).type).toBe("ready");
    expect(run.events[0].seq).toBeGreaterThan(1n);
  });

  it("approvals: the client answers while reading the stream; allowed and denied decisions reach the tool and the answer", async () => {
    for (const allowed of [true, false]) {
      const answers: Promise<any>[] = [];
      const run = await collect(agent.prompt({ text: "note todo.txt buy milk" }), (event) => {
        const pending = approval(event, "pending");
        if (pending) {
          answers.push(agentJson.approve(allowed ? { id: pending.request_id, allowed } : { id: pending.request_id, allowed, reason: "Not today." }));
        }
      });
      expect(run.error).toBeUndefined();
      const [answer] = await Promise.all(answers);
      expect(answers).toHaveLength(1);
      const resolved = JSON.parse(answer.resolved.json).event.payload.event.record;
      expect(resolved.status).toBe("resolved");
      expect(resolved.final_decision.outcome).toBe(allowed ? "allow" : "deny");
      const toolEnd = run.events.map(record).find((r) => r?.type === "tool_end").payload;
      expect(toolEnd.ok).toBe(allowed);
      expect(toolEnd.result).toBe(allowed ? "Saved 22 characters to /notes/todo.txt." : "Not today.");
      const last = run.events.at(-1)!;
      expect(last.type).toBe("run_complete");
      expect(last.event.final_output).toBe(`Done: ${toolEnd.result}`);
    }
  });

  it("two approvals pending at once, answered out of order", async () => {
    const pending: string[] = [];
    let answered = false;
    const answers: Promise<any>[] = [];
    const run = await collect(agent.prompt({ text: "parallel" }), (event) => {
      const p = approval(event, "pending");
      if (p) pending.push(p.request_id);
      if (pending.length === 2 && !answered) {
        answered = true;
        // b first (allow), then a (deny).
        answers.push(agent.approve({ id: pending[1], allowed: true }).then(() => agent.approve({ id: pending[0], allowed: false, reason: "Not a." })));
      }
    });
    expect(run.error).toBeUndefined();
    await Promise.all(answers);
    const ends = run.events.map(record).filter((r) => r?.type === "tool_end").map((r) => [r.payload.ok, r.payload.result]);
    expect(ends).toEqual([
      [true, "Saved 6 characters to /notes/b.txt."],
      [false, "Not a."],
    ]);
    expect(run.events.at(-1)!.event.final_output).toBe("Results: Not a. | Saved 6 characters to /notes/b.txt.");
  });

  it("Approve for an id that is not pending is not_found; of two answers for one approval exactly one takes effect", async () => {
    const error = await agent.approve({ id: "tool-approval-999", allowed: true }).catch((e: unknown) => ConnectError.from(e));
    expect(error.code).toBe(Code.NotFound);
    const outcomes: (Code | "resolved")[] = [];
    const run = await collect(agent.prompt({ text: "note twice.txt x" }), async (event) => {
      const p = approval(event, "pending");
      if (!p) return;
      // Two clients answer at once; whichever reaches the bridge second is
      // refused: already_exists while the first is on its way, not_found
      // once it resolved.
      const answers = [agent.approve({ id: p.request_id, allowed: true }), agentJson.approve({ id: p.request_id, allowed: false })];
      for (const answer of await Promise.allSettled(answers)) {
        outcomes.push(answer.status === "fulfilled" ? "resolved" : ConnectError.from(answer.reason).code);
      }
    });
    expect(run.error).toBeUndefined();
    expect(outcomes.filter((o) => o === "resolved")).toHaveLength(1);
    expect([Code.AlreadyExists, Code.NotFound]).toContain(outcomes.find((o) => o !== "resolved"));
  });

  it("a second Prompt during a run is refused with failed_precondition; Cancel mid-run answers with the run's terminal event", async () => {
    const controlled = new AbortController();
    let started!: () => void;
    const startedP = new Promise<void>((resolve) => (started = resolve));
    const first = collect(agent.prompt({ text: "slow 30" }, { signal: controlled.signal }), (e) => {
      if (e.type === "run_start") started();
    });
    await startedP;
    const second = await collect(agentJson.prompt({ text: "chat too" }));
    expect(second.error?.code).toBe(Code.FailedPrecondition);
    expect(second.error?.rawMessage).toBe("A run is already active.");
    const cancelled = await agent.cancel({});
    expect(cancelled.event.type).toBe("run_cancelled");
    const run = await first;
    expect(run.error).toBeUndefined();
    expect(run.events.at(-1)!.type).toBe("run_cancelled");
    expect(run.events.filter((e) => terminalTypes.includes(e.type))).toHaveLength(1);
  });

  it("Cancel with no run answers at once without an event and sends nothing", async () => {
    const [subscriber] = subscribers;
    // Let the subscriber catch up with the previous run first.
    const before = await agent.configure({ patchJson: "{}" });
    await subscriber.until((e) => e.seq === before.event.seq, "the first config event");
    const from = subscriber.events.length;
    const cancelled = await agent.cancel({});
    expect(cancelled.event).toBeUndefined();
    // A later command's answer is the barrier: no cancel answer came before it.
    const configured = await agent.configure({ patchJson: "{}" });
    await subscriber.until((e) => e.seq === configured.event.seq, "the config event");
    expect(subscriber.events.slice(from).map((e) => e.type)).toEqual(["config"]);
  });

  it("reset mid-run: the run ends cancelled, Reset answers with the reset event, the conversation starts over", async () => {
    expect((await collect(agent.prompt({ text: "count" }))).error).toBeUndefined();
    let started!: () => void;
    const startedP = new Promise<void>((resolve) => (started = resolve));
    const long = collect(agent.prompt({ text: "slow 30" }), (e) => {
      if (e.type === "run_start") started();
    });
    await startedP;
    const reset = await agent.reset({});
    expect(reset.event.type).toBe("reset");
    expect(JSON.parse(reset.event.json).config).toEqual({ model: "scripted-1" });
    const run = await long;
    expect(run.error).toBeUndefined();
    expect(run.events.at(-1)!.type).toBe("run_cancelled");
    const count = await collect(agent.prompt({ text: "count" }));
    expect(count.events.at(-1)!.event.final_output).toBe("This conversation has 1 user message(s).");
  });

  it("configure: accepted with the applied document; rejected as invalid_argument with the backend's config event in a ConfigureFailure detail", async () => {
    const ok = await agentJson.configure({ patchJson: '{"model":"scripted-2"}' });
    expect(JSON.parse(ok.event.json)).toMatchObject({ type: "config", ok: true, config: { model: "scripted-2" } });
    for (const client of [agent, agentJson]) {
      const error = await client.configure({ patchJson: '{"temperature":1}' }).catch((e: unknown) => ConnectError.from(e));
      expect(error.code).toBe(Code.InvalidArgument);
      expect(error.rawMessage).toBe("Unknown config key: temperature.");
      const [detail] = error.findDetails(ConfigureFailureSchema);
      expect(detail.code).toBe("rejected");
      expect(JSON.parse(detail.event!.json)).toMatchObject({ type: "config", ok: false, config: { model: "scripted-2" } });
    }
    const notObject = await agent.configure({ patchJson: "[1]" }).catch((e: unknown) => ConnectError.from(e));
    expect(notObject.code).toBe(Code.InvalidArgument);
    // Numbers reach the backend as written: 1 stays an integer.
    const rejected = await agent.configure({ patchJson: '{"model":1}' }).catch((e: unknown) => ConnectError.from(e));
    expect(rejected.rawMessage).toBe("model must be a non-empty string.");
    await agent.configure({ patchJson: '{"model":"scripted-1"}' });
  });

  it("a failing run is not an RPC failure: the stream ends OK with the run-scoped error", async () => {
    const run = await collect(agent.prompt({ text: "fail" }));
    expect(run.error).toBeUndefined();
    const last = run.events.at(-1)!;
    expect(last.type).toBe("error");
    expect(last.event).toMatchObject({ scope: "run", message: "Scripted model failure." });
  });

  it("a 20 MB tool result arrives intact, over proto and over JSON", async () => {
    const size = 20_000_000;
    for (const client of [agent, agentJson]) {
      const run = await collect(client.prompt({ text: `big ${size}` }));
      expect(run.error).toBeUndefined();
      const toolEnd = run.events.find((e) => record(e)?.type === "tool_end")!;
      const result: string = record(toolEnd).payload.result;
      expect(result.length).toBe(size);
      expect(result.slice(0, 32)).toBe("0123456789abcdef0123456789abcdef");
      expect(result === "0123456789abcdef".repeat(size / 16)).toBe(true);
      expect(toolEnd.json!.length).toBeGreaterThan(size);
      expect(run.events.at(-1)!.event.final_output).toBe(`Received ${size + 2} bytes of JSON`);
    }
    await agent.reset({});
  });

  it("the dropped-stream rule: a client that lets go of its Prompt stream before the end cancels the run", async () => {
    const [subscriber] = subscribers;
    const controller = new AbortController();
    const run = collect(agent.prompt({ text: "slow 30" }, { signal: controller.signal }), (e) => {
      if (e.type === "run_event") controller.abort();
    });
    const result = await run;
    expect(result.error?.code).toBe(Code.Canceled);
    const start = result.events[0].seq;
    await subscriber.until((e) => e.seq > start && e.type === "run_cancelled", "run_cancelled after the drop");
    expect(subscriber.events.some((e) => e.seq > start && e.type === "cancel_requested")).toBe(true);
    await eventually(() => bridge.stderr.some((l) => l.includes("the Prompt stream ended before its run did; cancelling the run")), "the bridge's note on stderr");
    const next = await collect(agent.prompt({ text: "chat after drop" }));
    expect(next.events.at(-1)!.type).toBe("run_complete");
  });

  it("subscribers kept up with everything and are still open", () => {
    for (const subscriber of subscribers) {
      expect(subscriber.ended).toBe(false);
      const seqs = subscriber.events.map((e) => Number(e.seq));
      expect(seqs).toEqual(seqs.map((_, i) => seqs[0] + i));
    }
  });
});

describe("agentlane-bridge: lifecycle", () => {
  it("the backend dying mid-run ends every stream with unavailable (the exit status), and the bridge exits non-zero", async () => {
    const bridge = await start(scenarioArgs());
    const agent: any = bridge.client(AgentService);
    const subscriber = new Subscription(bridge);
    const run = collect(agent.prompt({ text: "slow 30" }), (e) => {
      if (e.type === "run_start") process.kill(bridge.info.backend!.pid, "SIGKILL");
    });
    const result = await run;
    expect(result.error?.code).toBe(Code.Unavailable);
    expect(result.error?.rawMessage).toContain("the backend exited with signal 9");
    await subscriber.done;
    expect(subscriber.error?.code).toBe(Code.Unavailable);
    expect(await bridge.exited).toEqual({ code: 3, signal: null });
  });

  it("an invalid stdout line arrives as its own item with the decode error; the exit status and last stderr line end the streams", async () => {
    const script = join(backendsDir, "dies_midline.py");
    const bridge = await start(["--app", "x:y", "--", "python3", "-c", `import runpy, sys; sys.stderr.write("about to fail\\n"); runpy.run_path(${JSON.stringify(script)})`]);
    const subscriber = new Subscription(bridge);
    await subscriber.done;
    expect(subscriber.invalid).toHaveLength(1);
    const [invalid] = subscriber.invalid;
    expect(invalid.code).toBe("invalid-json");
    expect(invalid.message).toMatch(/^Invalid JSON bridge event: SyntaxError: /);
    expect(invalid.lineHead).toContain('"type":"run_event"');
    expect(invalid.seq).toBe(2n);
    expect(subscriber.error?.code).toBe(Code.Unavailable);
    expect(subscriber.error?.rawMessage).toBe("the backend exited with status 3: about to fail");
    expect((await bridge.exited).code).toBe(3);
  });

  it("Shutdown mid-run: the run ends cancelled, streams end OK, the backend exits within the grace, nothing is left", async () => {
    const bridge = await start(scenarioArgs());
    const agent: any = bridge.client(AgentService);
    const subscriber = new Subscription(bridge);
    let started!: () => void;
    const startedP = new Promise<void>((resolve) => (started = resolve));
    const run = collect(agent.prompt({ text: "slow 30" }), (e) => {
      if (e.type === "run_start") started();
    });
    await startedP;
    const stopped = await bridge.client(BridgeControlService).shutdown({ graceMs: 5000 });
    expect(stopped).toMatchObject({ backendExitCode: 0, killed: false });
    const result = await run;
    expect(result.error).toBeUndefined();
    expect(result.events.at(-1)!.type).toBe("run_cancelled");
    await subscriber.done;
    expect(subscriber.error).toBeUndefined();
    expect(subscriber.events.at(-1)!.type).toBe("shutdown");
    expect(await bridge.exited).toEqual({ code: 0, signal: null });
    expect(await gone(bridge.info.backend!.pid)).toBe(true);
    expect(existsSync(dirname(bridge.info.tokenFile))).toBe(false);
  });

  it("Shutdown escalates to SIGKILL of the whole group when the backend and its child ignore it", async () => {
    const bridge = await start(["--app", "x:y", "--", "python3", join(backendsDir, "stubborn_group.py")]);
    const pgid = bridge.info.backend!.pid;
    // The backend's stderr comes through the bridge's, on its own pipe.
    await eventually(() => bridge.stderr.some((l) => l.startsWith("child ")), "the child's pid on stderr");
    const child = Number(/^child (\d+)$/.exec(bridge.stderr.find((l) => l.startsWith("child "))!)![1]);
    expect(groupMembers(pgid).sort()).toEqual([pgid, child].sort());
    const begun = Date.now();
    const stopped = await bridge.client(BridgeControlService).shutdown({ graceMs: 300 });
    expect(stopped).toMatchObject({ backendExitCode: -1, backendSignal: 9, killed: true });
    expect(Date.now() - begun).toBeGreaterThanOrEqual(300);
    expect(await bridge.exited).toEqual({ code: 0, signal: null });
    expect(await gone(pgid)).toBe(true);
    expect(await gone(child)).toBe(true);
  });

  it("stdin EOF and SIGTERM take the shutdown path; a SIGKILLed bridge takes its backend along (PR_SET_PDEATHSIG)", async () => {
    for (const how of ["stdin", "SIGTERM", "SIGKILL"] as const) {
      const bridge = await start(scenarioArgs());
      if (how === "stdin") bridge.child.stdin!.end();
      else bridge.child.kill(how);
      const exit = await bridge.exited;
      expect(exit).toEqual(how === "SIGKILL" ? { code: null, signal: "SIGKILL" } : { code: 0, signal: null });
      expect(await gone(bridge.info.backend!.pid), `the backend outlived the bridge (${how})`).toBe(true);
      // A SIGKILLed bridge cannot remove its token folder; the test does.
      if (how === "SIGKILL") rmSync(dirname(bridge.info.tokenFile), { recursive: true, force: true });
    }
  });
});

describe("agentlane-bridge check", () => {
  it("runs the two-step check against the demo backend and leaves no process", () => {
    const out = execFileSync(
      bridgeBinary,
      ["check", "--app", "demo_app:create_backend", "--project-dir", join(__dirname, "..", "examples/backend"), "--python", join(__dirname, "..", ".venv/bin/python")],
      { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
    );
    expect(out).toMatch(/^step 1: ok/m);
    expect(out.match(/^step 2: ok/gm)).toHaveLength(2);
    expect(out).toMatch(/denied; tool result "Note not saved: Denied by agentlane-bridge check\."/);
    expect(out.trim().split("\n").at(-1)).toBe("check: passed");
  });
});

