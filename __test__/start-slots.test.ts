/**
 * Many sessions started at once (issue 19, item 8): spawned backends start
 * a few at a time, never more than `maxConcurrentStarts` between their
 * spawn and their `ready`, and each one's ready timeout counts from its own
 * spawn. Before, all started together and shared the cores: 32 real
 * backends on 2 cores took 41 s, and with the default timeout all failed.
 * Real child processes: each backend logs when it started and when it
 * wrote `ready` (after a pause), and the test reads the overlap off the log.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createAgentSession, InvalidOptionError, setMaxConcurrentStarts, startSlots, type AgentSession } from "../lib/index";

const ready = JSON.stringify({ protocol_version: "1.0", type: "ready", ts: 1, version: "0", package: "slots", metadata: {} });
const dir = mkdtempSync(join(tmpdir(), "pbn-slots-"));
let sessions: AgentSession[] = [];
afterEach(async () => {
  await Promise.all(sessions.map((session) => session.close()));
  sessions = [];
});

/** A backend that logs `start`, waits `ms`, writes ready, logs `ready`, and waits for stdin's end. */
function slowBackend(log: string, ms: number) {
  const pause = (ms / 1000).toFixed(3);
  return { command: "sh", args: ["-c", `echo "start $$" >> '${log}'; sleep ${pause}; echo "ready $$" >> '${log}'; echo '${ready}'; read line`] };
}

/** The most backends that were between `start` and `ready` at once, from the log. */
function maxOverlap(log: string): number {
  let now = 0;
  let most = 0;
  for (const line of readFileSync(log, "utf8").trim().split("\n")) {
    now += line.startsWith("start ") ? 1 : -1;
    most = Math.max(most, now);
  }
  return most;
}

describe.runIf(process.platform !== "win32")("start slots", () => {
  it("the default is the number of cores, at least 2", () => {
    expect(startSlots()).toEqual({ max: Math.max(2, availableParallelism()), starting: 0, waiting: 0 });
  });

  it("a limit that is not a whole number of at least 1, or none at all, is refused and the limit stays: later starts still start (issue 29, item 5)", async () => {
    const before = startSlots().max;
    const set = setMaxConcurrentStarts as (value?: unknown) => number;
    // Before the fix, no argument (or undefined) was taken as the limit, and every later start waited for ever.
    for (const value of [[], [undefined], [0], [Number.NaN], [-1], [1.5], ["2"], [null]]) {
      expect(() => set(...value), JSON.stringify(value)).toThrow(InvalidOptionError);
    }
    expect(() => set()).toThrow("maxConcurrentStarts must be a whole number of at least 1 (or Infinity), not undefined.");
    expect(startSlots().max).toBe(before);
    sessions.push(await createAgentSession({ backend: slowBackend(join(dir, "after-refused.log"), 0), readyTimeoutMs: 10_000, onDiagnostic: () => {} }));
    expect(startSlots()).toMatchObject({ starting: 0, waiting: 0 });
  });

  it("8 sessions created at once with 2 slots: at most 2 start at a time, all get ready, and a ready timeout counts from each one's own spawn", async () => {
    const log = join(dir, "two.log");
    const previous = setMaxConcurrentStarts(2);
    try {
      // 8 starts of 400 ms, 2 at a time: the last spawns after about 1.2 s,
      // well past a 900 ms timeout counted from the call.
      const pending = Array.from({ length: 8 }, () => createAgentSession({ backend: slowBackend(log, 400), readyTimeoutMs: 900, onDiagnostic: () => {} }));
      expect(startSlots()).toMatchObject({ starting: 2, waiting: 6 });
      sessions = await Promise.all(pending);
      expect(maxOverlap(log)).toBe(2);
      expect(readFileSync(log, "utf8").trim().split("\n")).toHaveLength(16);
      expect(startSlots()).toMatchObject({ starting: 0, waiting: 0 });
    } finally {
      setMaxConcurrentStarts(previous);
    }
  }, 30_000);

  it("a failed start gives its slot back; Infinity lets every start go at once", async () => {
    const previous = setMaxConcurrentStarts(1);
    try {
      const failing = createAgentSession({ backend: { command: "sh", args: ["-c", "exit 3"] }, onDiagnostic: () => {} });
      const after = createAgentSession({ backend: slowBackend(join(dir, "after.log"), 50), onDiagnostic: () => {} });
      await expect(failing).rejects.toMatchObject({ code: "exited-before-ready", exitCode: 3 });
      sessions.push(await after);
      setMaxConcurrentStarts(Number.POSITIVE_INFINITY);
      const log = join(dir, "all.log");
      sessions.push(...(await Promise.all(Array.from({ length: 5 }, () => createAgentSession({ backend: slowBackend(log, 300), onDiagnostic: () => {} })))));
      expect(maxOverlap(log)).toBe(5);
    } finally {
      setMaxConcurrentStarts(previous);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
