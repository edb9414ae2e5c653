/**
 * The shared session scenarios (tests/fixtures/session-scenarios/, format in
 * its README) against the TypeScript session, through its public API only:
 * `createAgentSession` spawns a scripted child (fixtures/scenario-backend.js)
 * that plays the scenario's backend steps in answer to the commands it
 * reads. The same table runs against the Rust state machine in `cargo test`
 * (crates/bridge-core/tests/session_scenarios.rs).
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAgentSession, type AgentSession, type ApprovalDecision, type SessionClose } from "../lib/index";
import scenarios from "./fixtures/session-scenarios.js";

const CHILD = join(__dirname, "fixtures", "scenario-backend.js");
const WAIT_MS = 5_000;

type Step = Record<string, any>;
type Scenario = { name: string; steps: Step[] };
type OpState = { kind: string; id?: string; settled?: { ok: true; value: unknown } | { ok: false; error: any } };

interface Approval {
  decide(decision: ApprovalDecision): void;
  signal: AbortSignal;
  resolvedByApp: boolean | undefined;
}

/** Everything the session tells about itself, in the scenarios' vocabulary. */
class Observer {
  events = 0;
  reads = 0;
  failures: string[] = [];
  rejected: string[] = [];
  closed: SessionClose | undefined;
  readonly approvals = new Map<string, Approval>();
  readonly ops = new Map<string, OpState>();
  private wakers: (() => void)[] = [];

  wake(): void {
    for (const w of this.wakers.splice(0)) w();
  }

  /** Resolves once `ready()` holds; fails on a child mismatch or after WAIT_MS. */
  async until(ready: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + WAIT_MS;
    while (!ready()) {
      if (this.failures.length) throw new Error(`scripted backend: ${this.failures.join("; ")}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        this.wakers.push(resolve);
        setTimeout(resolve, 20);
      });
    }
    // Let promise continuations of the last event run.
    for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
  }

  track(name: string, kind: string, promise: Promise<unknown>): void {
    const op: OpState = { kind };
    this.ops.set(name, op);
    promise.then(
      (value) => (op.settled = { ok: true, value }),
      (error) => (op.settled = { ok: false, error }),
    );
  }

  /** Does op `name` match the expected state? Returns a description of the actual state when not. */
  check(name: string, expected: any): string | undefined {
    const op = this.ops.get(name);
    if (!op) return "no such op";
    const actual = op.kind === "approve" ? this.approveState(op.id!, expected) : this.settledState(op, expected);
    return JSON.stringify(actual) === JSON.stringify(expected) ? undefined : JSON.stringify(actual);
  }

  private settledState(op: OpState, expected: any): unknown {
    const s = op.settled;
    if (!s) return "pending";
    if (s.ok) {
      if (op.kind === "run") return (s.value as { status: string }).status;
      return op.kind === "configure" ? "configured" : "done";
    }
    const error = s.error;
    switch (error?.name) {
      case "SessionClosedError":
        return "closed";
      case "SessionStateError":
        return { invalid: error.message };
      case "RunError":
        // A RunError stands for a failed run and for a refused command alike.
        if (expected && typeof expected === "object" && ("failed" in expected || "refused" in expected)) {
          return { [Object.keys(expected)[0]]: error.message };
        }
        return { run_error: error.message };
      case "ConfigureError":
        if (error.code === "unsupported" && expected && typeof expected === "object" && "refused" in expected) {
          return { refused: error.message };
        }
        return { config_rejected: { code: error.code, message: error.message } };
      default:
        return { unexpected: String(error) };
    }
  }

  private approveState(id: string, expected: any): unknown {
    const approval = this.approvals.get(id);
    if (!approval) return "no approval asked";
    if (expected === "dropped") return "dropped"; // the child checks that nothing was sent
    if (approval.resolvedByApp) return "resolved";
    if (approval.signal.aborted) return expected === "closed" ? "closed" : "approval_closed";
    if (expected && typeof expected === "object" && "refused" in expected) {
      return this.rejected.includes(expected.refused) ? expected : "pending";
    }
    return "pending";
  }
}

async function play(file: string, index: number, scenario: Scenario): Promise<void> {
  const seen = new Observer();
  let expectedEvents = 1; // ready
  let backendSteps = 0;
  const session: AgentSession = await createAgentSession({
    backend: { command: process.execPath, args: [CHILD, file, String(index)] },
    readyTimeoutMs: WAIT_MS,
    approvals: ({ request, signal }) =>
      new Promise<ApprovalDecision>((decide) => {
        const id = String((request.metadata as Record<string, unknown>).scenario_id);
        seen.approvals.set(id, { decide, signal, resolvedByApp: undefined });
        seen.wake();
      }),
    onApprovalResolved: (resolution) => {
      const id = String((resolution.request.metadata as Record<string, unknown>).scenario_id);
      const approval = seen.approvals.get(id);
      if (approval) approval.resolvedByApp = resolution.decidedByApp;
    },
    onEvent: () => {
      seen.events += 1;
      seen.wake();
    },
    onClose: (close) => {
      seen.closed = close;
      seen.wake();
    },
    onDiagnostic: (d) => {
      if (d.kind === "command-rejected") seen.rejected.push(d.message);
      if (d.kind === "stderr") {
        if (d.line.startsWith("READ ")) seen.reads += 1;
        if (d.line.startsWith("MISMATCH") || d.line.startsWith("EXTRA")) seen.failures.push(d.line);
      }
      seen.wake();
    },
  });
  try {
    for (const [i, step] of scenario.steps.entries()) {
      const at = `step ${i}`;
      if (step.host) {
        const name = step.op ?? `#${i}`;
        switch (step.host) {
          case "run":
            seen.track(name, "run", session.run(step.text));
            break;
          case "cancel":
            seen.track(name, "cancel", session.cancel());
            break;
          case "reset":
            seen.track(name, "reset", session.reset());
            break;
          case "configure":
            seen.track(name, "configure", session.configure(step.patch));
            break;
          case "close":
            seen.track(name, "close", session.close());
            break;
          case "approve": {
            await seen.until(() => seen.approvals.has(step.id), `${at}: the policy to be asked about ${step.id}`);
            seen.ops.set(name, { kind: "approve", id: step.id });
            seen.approvals.get(step.id)!.decide(step.reason === undefined ? { allowed: step.allowed } : { allowed: step.allowed, reason: step.reason });
            break;
          }
          default:
            throw new Error(`${at}: unknown host call ${step.host}`);
        }
        // The command (if any) is on its way before the next host call.
        for (let k = 0; k < 3; k++) await new Promise((resolve) => setImmediate(resolve));
      } else if (step.backend) {
        backendSteps += 1;
        expectedEvents += step.backend.writes.length;
        const steps = backendSteps;
        const events = expectedEvents;
        await seen.until(
          () => seen.reads >= steps && (seen.events >= events || seen.closed !== undefined) && (step.backend.exit === undefined || seen.closed !== undefined),
          `${at}: the backend to read ${JSON.stringify(step.backend.reads)} and its events to be processed`,
        );
      } else if (step.expect) {
        const e = step.expect;
        for (const [name, expected] of Object.entries(e.ops ?? {})) {
          const mismatch = seen.check(name, expected);
          expect(mismatch, `${at}: op ${name} should be ${JSON.stringify(expected)}`).toBeUndefined();
        }
        if (e.open_approvals) {
          const open = [...seen.approvals].filter(([, a]) => !a.signal.aborted).map(([id]) => id);
          expect(open, `${at}: open approvals`).toEqual(e.open_approvals);
        }
        if (e.rejected) expect(seen.rejected, `${at}: rejected command errors`).toEqual(e.rejected);
        if ("closed" in e) {
          if (e.closed === null) {
            expect(seen.closed, `${at}: closed`).toBeUndefined();
          } else {
            const close = seen.closed as (SessionClose & { error?: { message: string } }) | undefined;
            const actual: Record<string, unknown> = { reason: close?.reason, code: close?.code ?? null };
            if (close?.reason === "protocol-error") actual.message = close.error?.message;
            for (const [key, value] of Object.entries(e.closed)) expect(actual[key], `${at}: closed.${key}`).toEqual(value);
          }
        }
      }
    }
    const scripted = scenario.steps.filter((s) => s.backend).length;
    await seen.until(() => seen.reads >= scripted, "the backend to read every scripted command");
    expect(seen.failures).toEqual([]);
  } finally {
    await session.close();
  }
}

describe("session scenarios: the TypeScript session against the shared table", () => {
  const all: { file: string; index: number; scenario: Scenario }[] = scenarios.loadScenarios();
  it("finds the table", () => {
    expect(all.length).toBeGreaterThanOrEqual(30);
  });
  for (const { file, index, scenario } of all) {
    it(`${file}: ${scenario.name}`, () => play(file, index, scenario));
  }
});
