/**
 * The session layer against the real agentlane==0.22.0 backend (the
 * scenario app in tests/e2e/backends): one full conversation touching every
 * part of §9.5, and vitest exiting by itself proves no timer or handle leaks.
 *
 * Each suite runs through every way a session gets its backend (`starts`):
 * spawned by `createAgentSession`, and attached with `attachAgentSession`
 * to a ChildProcess the test spawned itself, directly and through `sh -c`
 * (as `docker exec -i` or `ssh` would run it). A start mode that changes
 * how the backend starts adds itself to the table.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import {
  attachAgentSession,
  createAgentSession,
  type AgentSessionOptions,
  type AgentActivity,
  type AgentSession,
  type ApprovalResolution,
  SessionClosedError,
  type JsonObject,
  type PlanUpdate,
  type SessionClose,
  type SessionDiagnostic,
  type TextChunk,
  type ToolActivity,
} from "../lib/index";
import { goneWithin, repoRoot } from "./helpers";

const backend = {
  command: join(repoRoot, ".venv", "bin", "python"),
  args: ["-m", "agentlane_process_bridge", "--app", "scenario_app:create_backend"],
  cwd: join(repoRoot, "tests", "e2e", "backends"),
};

type SessionOptions = Omit<AgentSessionOptions, "backend">;

/** A way of starting a session on the real backend. */
interface Start {
  name: string;
  open(options: SessionOptions): Promise<AgentSession>;
  /** The child the test spawned itself (attached starts). */
  child?: () => ChildProcess | undefined;
  /** What `session.process.start` says (spawned starts). */
  startMode?: "cold" | "warm";
}

/** Spawns the backend as an application would before attaching: Node's own pipes. */
function attached(command: string, args: string[]): Start {
  let child: ChildProcess | undefined;
  return {
    name: command === "sh" ? "attachAgentSession through sh -c (as docker exec -i)" : "attachAgentSession on a ChildProcess",
    open: (options) => {
      child = spawn(command, args, { cwd: backend.cwd, stdio: ["pipe", "pipe", "pipe"] });
      return attachAgentSession(child, options);
    },
    child: () => child,
  };
}

const spawned: Start = { name: "createAgentSession", open: (options) => createAgentSession({ backend, ...options }), startMode: "cold" };
/** Forked from a prefork server, failing rather than falling back: a warm test is warm. */
const warm: Start = {
  name: "createAgentSession, warm",
  open: (options) => createAgentSession({ backend: { ...backend, warm: { fallback: "error" } }, ...options }),
  startMode: "warm",
};
const direct = attached(backend.command, backend.args);
const throughShell = attached("sh", ["-c", 'exec "$0" "$@"', backend.command, ...backend.args]);
/** Every start; the long suites (many runs of the same thing) run on the spawned ones and one attached. */
const starts = [spawned, warm, direct, throughShell];

let open: AgentSession[] = [];
afterEach(async () => {
  await Promise.all(open.map((s) => s.close()));
  open = [];
});

/** Checks that every segment has exactly one done chunk, after its other chunks. */
function segmentsOf(chunks: TextChunk[]): Map<number, string> {
  const texts = new Map<number, string>();
  const done = new Set<number>();
  for (const chunk of chunks) {
    expect(done.has(chunk.segment)).toBe(false);
    texts.set(chunk.segment, (texts.get(chunk.segment) ?? "") + chunk.delta);
    expect(chunk.text).toBe(texts.get(chunk.segment));
    if (chunk.done) done.add(chunk.segment);
  }
  expect([...done].sort()).toEqual([...texts.keys()].sort());
  return texts;
}

describe.each(starts)("$name with the real backend", (start) => {
  it("runs a full conversation: text, a policy-decided approval, a plan, cancel, reset, configure, close", async () => {
    const assistant: TextChunk[] = [];
    const tools: ToolActivity[] = [];
    const agents: AgentActivity[] = [];
    const plans: PlanUpdate[] = [];
    const resolutions: ApprovalResolution[] = [];
    const configs: JsonObject[] = [];
    const diagnostics: SessionDiagnostic[] = [];
    const closes: SessionClose[] = [];
    const policyCalls: string[] = [];
    const session = await start.open({
      // A loaded machine can take over 1.5 s to exit after shutdown; the close must still be a clean exit.
      shutdownGraceMs: 10_000,
      approvals: async ({ request, signal }) => {
        policyCalls.push(request.path ?? "");
        expect(signal.aborted).toBe(false);
        return request.path?.endsWith("allowed.txt") ? true : { allowed: false, reason: "Not this file." };
      },
      onAssistantText: (chunk) => assistant.push(chunk),
      onToolActivity: (activity) => tools.push(activity),
      onAgentActivity: (activity) => agents.push(activity),
      onPlan: (plan) => plans.push(plan),
      onApprovalResolved: (resolution) => resolutions.push(resolution),
      onConfigChanged: (config) => configs.push(config),
      onDiagnostic: (diagnostic) => diagnostics.push(diagnostic),
      onClose: (close) => closes.push(close),
    });
    open.push(session);
    expect(session.ready).toMatchObject({ version: "0.22.0", package: "agentlane-process-bridge" });
    if (start.startMode) expect(session.process?.start).toBe(start.startMode);
    expect(session.config).toEqual({ model: "scripted-1" });

    // 1. Streamed text.
    const chat = await session.run("chat hello there");
    expect(chat).toEqual({ status: "completed", finalOutput: "Hello! This is a scripted reply. You said: chat hello there", turnCount: 1, responseCount: 1 });
    expect([...segmentsOf(assistant).values()]).toEqual([chat.status === "completed" ? chat.finalOutput : ""]);
    expect(agents.map((a) => a.phase)).toEqual(["start", "end"]);

    // 2. Approvals decided by the policy: allowed, then denied.
    const allowed = await session.run("note allowed.txt");
    expect(allowed.status).toBe("completed");
    const denied = await session.run("note other.txt");
    expect(denied.status).toBe("completed");
    expect(policyCalls).toEqual(["/notes/allowed.txt", "/notes/other.txt"]);
    expect(resolutions.map((r) => [r.allowed, r.reason, r.decidedByApp])).toEqual([
      [true, null, true],
      [false, "Not this file.", true],
    ]);
    const ends = tools.filter((t): t is Extract<ToolActivity, { phase: "end" }> => t.phase === "end");
    expect(ends.map((t) => [t.call.tool, t.ok])).toEqual([
      ["write_note", true],
      ["write_note", false],
    ]);
    expect(ends[0].call.arguments).toMatchObject({ path: "allowed.txt" });

    // 3. A plan update.
    expect((await session.run("plan")).status).toBe("completed");
    expect(plans[0]).toMatchObject({ explanation: "Starting the work." });
    expect(plans[0].steps.map((s) => s.status)).toEqual(["active", "pending", "pending"]);
    expect(tools.some((t) => t.phase === "start" && t.call.isPlan)).toBe(true);

    // 4. Cancel a slow run once it has streamed something.
    const before = assistant.length;
    const slow = session.run("slow 30");
    await new Promise<void>((resolve) => {
      const check = () => (assistant.length > before ? resolve() : setTimeout(check, 10));
      check();
    });
    await session.cancel();
    const cancelled = await slow;
    // Completion can win the race with the cancel (§8.4); with 30 s left it does not.
    expect(cancelled).toEqual({ status: "cancelled" });
    expect(segmentsOf(assistant).size).toBeGreaterThan(0);

    // 5. Configure: accepted, then rejected with the snapshot re-announced.
    expect(await session.configure({ model: "scripted-2" })).toEqual({ model: "scripted-2" });
    expect(session.config).toEqual({ model: "scripted-2" });
    await expect(session.configure({ model: "" })).rejects.toMatchObject({ name: "ConfigureError", code: "rejected" });
    expect(configs).toEqual([{ model: "scripted-2" }, { model: "scripted-2" }]);

    // 6. Reset: the conversation starts again, the config is re-announced.
    await session.reset();
    expect(configs.at(-1)).toEqual({ model: "scripted-2" });
    const count = await session.run("count");
    expect(count).toMatchObject({ status: "completed", finalOutput: "This conversation has 1 user message(s)." });

    // 7. Close.
    await session.close();
    expect(closes).toEqual([{ reason: "shutdown", code: 0, signal: null }]);
    expect(diagnostics.filter((d) => d.kind !== "stderr")).toEqual([]);
    await expect(session.run("chat")).rejects.toMatchObject({ name: "SessionClosedError", message: "Agent session closed: shutdown" });
  });

  it("delivers a 20 MB tool result intact through the session", async () => {
    const size = 20_000_000;
    const tools: ToolActivity[] = [];
    const session = await start.open({ onToolActivity: (activity) => tools.push(activity), onDiagnostic: () => {} });
    open.push(session);
    const result = await session.run(`big ${size}`);
    expect(result).toMatchObject({ status: "completed", finalOutput: `Received ${size + 2} bytes of JSON` });
    const ends = tools.filter((t): t is Extract<ToolActivity, { phase: "end" }> => t.phase === "end");
    expect(ends.map((t) => [t.call.tool, t.ok])).toEqual([["make_blob", true]]);
    const blob = ends[0].result as string;
    expect(blob.length).toBe(size);
    // Compared without letting a mismatch print 20 MB.
    expect(blob === "0123456789abcdef".repeat(size / 16)).toBe(true);
  });
});

describe.each(starts.slice(0, 3))("$name with the real backend, many runs", (start) => {
  it("rejects a failing run with RunError and stays usable", async () => {
    const session = await start.open({ onDiagnostic: () => {} });
    open.push(session);
    await expect(session.run("fail")).rejects.toMatchObject({ name: "RunError", message: "Scripted model failure." });
    expect((await session.run("chat again")).status).toBe("completed");
  });

  it("runs prompts back to back without spurious 'A run is already active.' failures", async () => {
    const session = await start.open({ onDiagnostic: () => {} });
    open.push(session);
    for (let i = 0; i < 25; i++) {
      expect((await session.run(`chat ${i}`)).status).toBe("completed");
    }
  });

  it("reset() right after run(), 40 times: every reset resolves and the next run sees a fresh conversation (the reset race absorbed)", async () => {
    const session = await start.open({ onDiagnostic: () => {} });
    open.push(session);
    for (let i = 0; i < 40; i++) {
      const run = session.run("count");
      await session.reset(); // before the fix, about 1 in 60 rejected: "Cannot reset while a primary run is active."
      const ended = await run;
      expect(["completed", "cancelled"]).toContain(ended.status);
      const next = await session.run("count");
      expect(next).toMatchObject({ status: "completed", finalOutput: "This conversation has 1 user message(s)." });
    }
  });
});

describe("attachAgentSession: what only an attached process shows", () => {
  it("close() of a backend that ignores shutdown uses the process's own kill: SIGTERM, then SIGKILL; the process is gone", async () => {
    const stubborn = join(repoRoot, "tests", "e2e", "backends", "ignores_shutdown.py");
    const child = spawn(backend.command, [stubborn], { cwd: backend.cwd, stdio: ["pipe", "pipe", "pipe"] });
    const signals: (NodeJS.Signals | number | undefined)[] = [];
    const kill = child.kill.bind(child);
    child.kill = (signal?: NodeJS.Signals | number) => {
      signals.push(signal);
      return kill(signal);
    };
    const closes: SessionClose[] = [];
    const session = await attachAgentSession(child, { shutdownGraceMs: 300, termGraceMs: 300, onClose: (close) => closes.push(close), onDiagnostic: () => {} });
    expect(session.process).toEqual({ mode: "attached", start: "attached", pid: child.pid, processGroup: undefined, supervisorPid: undefined });
    await session.close();
    // It ignores shutdown and SIGTERM: the grace ends in SIGTERM, then SIGKILL, both through child.kill.
    expect(signals).toEqual(["SIGTERM", "SIGKILL"]);
    expect(child.signalCode).toBe("SIGKILL");
    expect(closes).toEqual([{ reason: "shutdown", code: null, signal: "SIGKILL" }]);
  });
});

describe("a backend that stops answering", () => {
  it("configure() with no run active, the backend frozen (SIGSTOP): rejects once commandTimeoutMs has passed, the session closes unresponsive, the backend is killed (issue 29, item 16)", async () => {
    const closes: SessionClose[] = [];
    const session = await createAgentSession({ backend, commandTimeoutMs: 500, onClose: (close) => closes.push(close), onDiagnostic: () => {} });
    const pid = session.process!.pid!;
    process.kill(pid, "SIGSTOP");
    // Before: pending until close(); bounded here so that it fails rather than hangs.
    const unanswered = Symbol("still pending after 20 s");
    const error = await Promise.race([
      session.configure({ model: "frozen" }).catch((e: unknown) => e),
      new Promise((resolve) => setTimeout(resolve, 20_000, unanswered)),
    ]);
    expect(error).toBeInstanceOf(SessionClosedError);
    const close = { reason: "unresponsive", message: "The backend did not answer a configure command within 500 ms; closing the session.", code: null, signal: null };
    expect((error as SessionClosedError).close).toEqual(close);
    expect(closes).toEqual([close]);
    expect(await goneWithin(pid)).toBe(true);
  });
});
