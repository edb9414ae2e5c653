/**
 * Helpers shared by the session suites (`__test__/session/*.test.ts`),
 * which drive `createAgentSession` against the scripted fake backend
 * (../fixtures/fake-backend.js) through `harness.ts`.
 */
import { expect } from "vitest";
import { SessionClosedError, type AgentSession, type SessionClose } from "../../lib/index";
import { deferred } from "../../lib/session/deferred";
import { ev, flushMicrotasks, observe, Recorder, within, type Launched } from "./harness";

export const x = (n: number, c = "x") => c.repeat(n);

/** Starts a run and lets the fake acknowledge it with run_start. */
export async function startRun(l: Launched, text = "go") {
  const run = observe(l.session.run(text));
  await l.fake.expect("prompt");
  l.fake.emit(ev.runStart(text));
  await l.rec.waitEvent("run_start");
  return run;
}

/**
 * Proves that nothing else was written to stdin before it: sends a
 * `configure({})`, requires it to be the very next command, and answers it.
 */
export async function barrier(l: Launched): Promise<void> {
  const done = observe(l.session.configure({}));
  const next = await l.fake.next("the barrier command");
  expect(next.command?.type, `unexpected command before the barrier: ${next.line}`).toBe("configure");
  l.fake.emit(ev.configOk({}));
  await done.value("the barrier configure");
}

/** A deferred the test resolves by hand (slow approval policies). */
export const manual = deferred;

/** Every segment seen in the log got exactly one done:true chunk, its last. */
export function expectOneDonePerSegment(rec: Recorder): void {
  const bySegment = new Map<number, boolean[]>();
  for (const chunk of rec.chunks()) bySegment.set(chunk.segment, [...(bySegment.get(chunk.segment) ?? []), chunk.done]);
  for (const [segment, dones] of bySegment) {
    expect(dones.filter(Boolean), `segment ${segment}`).toHaveLength(1);
    expect(dones[dones.length - 1], `segment ${segment}`).toBe(true);
  }
}

/**
 * Closes a session whose `run()` threw synchronously after creating its run
 * promise (the bugs below): teardown rejects that promise, which nobody can
 * observe. Its unhandled rejection is caught here, inside the test that
 * caused it, instead of being reported against whichever test runs next.
 * Returns the reasons caught.
 */
export async function closeCatchingOrphanRejections(session: AgentSession): Promise<unknown[]> {
  const caught: unknown[] = [];
  const saved = process.listeners("unhandledRejection");
  process.removeAllListeners("unhandledRejection");
  const catcher = (reason: unknown) => caught.push(reason);
  process.on("unhandledRejection", catcher);
  try {
    await within(session.close(), "close()");
    // Unhandled rejections are reported once the microtask queue has drained.
    await flushMicrotasks();
    await flushMicrotasks();
  } finally {
    process.off("unhandledRejection", catcher);
    for (const listener of saved) process.on("unhandledRejection", listener as (...args: unknown[]) => void);
  }
  return caught;
}

export function expectClosedError(error: unknown, close: SessionClose): void {
  expect(error).toBeInstanceOf(SessionClosedError);
  expect((error as SessionClosedError).name).toBe("SessionClosedError");
  expect((error as SessionClosedError).message).toBe(`Agent session closed: ${close.reason}`);
  expect((error as SessionClosedError).close).toEqual(close);
}

// ---------------------------------------------------------------------------------
