/**
 * What a supervised cold start reports, in what order (issue 29, item 12):
 * the supervisor's `started <pid>` comes first, whatever the backend
 * writes and however soon. The two come on different sockets (stdout
 * through a native reader thread, the report through the event loop), so
 * a backend that writes `ready` at once was heard first in about 1 start
 * in 100, and `createAgentSession` resolved with `session.process`
 * undefined.
 *
 * Made deterministic, not hoped for: the real supervisor runs behind a
 * wrapper (`PROCESS_BRIDGE_SUPERVISOR`) whose relay holds back what it
 * reports on the control socket until the test says so, or, when nothing
 * comes to say so, until the backend has written `ready` a second ago.
 * Unfixed, the backend's `ready` is delivered while the report waits (the
 * test then releases it); fixed, nothing is delivered before the report.
 */
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createAgentSession, spawnBridgeProcess, type BackendProcess } from "../lib/index";
import { findSupervisor } from "../lib/spawn/supervisor";

const ready = JSON.stringify({ protocol_version: "1.0", type: "ready", ts: 1, version: "0", package: "order", metadata: {} });
let dir: string;
let real: string | null;
let count = 0;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "pbn-order-"));
  real = findSupervisor();
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));
afterEach(() => {
  delete process.env.PROCESS_BRIDGE_SUPERVISOR;
});

/** A start whose supervisor reports late: its wrapper, the backend, and the file that releases the report. */
function lateReport() {
  count += 1;
  const release = join(dir, `release-${count}`);
  const wrote = join(dir, `wrote-ready-${count}`);
  const wrapper = join(dir, `supervisor-${count}.sh`);
  // The relay gets the real control socket (fd 3) before the supervisor's
  // fd 3 becomes the pipe to it.
  writeFileSync(
    wrapper,
    `#!/usr/bin/env bash
exec '${real}' "$@" 3> >(
  waited=0
  until [ -e '${release}' ] || [ "$waited" -ge 100 ]; do
    if [ -e '${wrote}' ]; then waited=$((waited + 1)); fi
    sleep 0.01
  done
  exec cat >&3
)
`,
  );
  chmodSync(wrapper, 0o755);
  process.env.PROCESS_BRIDGE_SUPERVISOR = wrapper;
  return {
    backend: { command: "sh", args: ["-c", `echo '${ready}'; : > '${wrote}'; read line`], supervise: true as const },
    releaseReport: () => writeFileSync(release, ""),
    reportHeldUntilReady: () => existsSync(wrote),
  };
}

describe.runIf(process.platform === "linux")("a supervised cold start whose backend writes ready before its supervisor's report is read", () => {
  it("spawnBridgeProcess: onStarted comes before the backend's first event", async () => {
    const start = lateReport();
    const order: string[] = [];
    let info: BackendProcess | undefined;
    const child = spawnBridgeProcess(start.backend, {
      onStarted: (process) => {
        info = process;
        order.push("started");
      },
      onEvent: (event) => {
        order.push(event.type);
        start.releaseReport();
      },
    });
    try {
      await expect.poll(() => order, { timeout: 10_000 }).toHaveLength(2);
      // Before the fix: ["ready", "started"].
      expect(order).toEqual(["started", "ready"]);
      expect(info).toMatchObject({ mode: "supervised", start: "cold" });
      expect(info!.pid).toBeTypeOf("number");
      expect(start.reportHeldUntilReady()).toBe(true);
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("createAgentSession resolves with session.process set", async () => {
    const start = lateReport();
    const pending = createAgentSession({ backend: start.backend, onDiagnostic: () => {} });
    pending.then(start.releaseReport, start.releaseReport);
    const session = await pending;
    try {
      // Before the fix: undefined (ready resolved the start before the report).
      expect(session.process).toMatchObject({ mode: "supervised", start: "cold" });
      expect(session.process!.pid).toBeTypeOf("number");
      expect(start.reportHeldUntilReady()).toBe(true);
    } finally {
      await session.close();
    }
  });
});
