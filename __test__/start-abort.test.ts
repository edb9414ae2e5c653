/**
 * Calling a start off (issue 29, item 15): `createAgentSession` and
 * `attachAgentSession` take a `signal` that aborts the start until
 * `ready`, wherever the start is: before it began, queued for a start
 * slot, spawning cold, waiting for a warm server's import, forked warm, or
 * attached. Each aborted start rejects with `SessionStartError`
 * `aborted` (the signal's reason as `cause`) and leaves no process behind.
 * Before, a `signal` was ignored silently and a queued start waited as
 * long as the starts before it. Real processes throughout: shell
 * backends that record their pid and never get ready, the real backend
 * and prefork server for the warm starts.
 */
import { spawn } from "node:child_process";
import { getEventListeners, once } from "node:events";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import {
  attachAgentSession,
  closeWarmServers,
  createAgentSession,
  SessionStartError,
  setMaxConcurrentStarts,
  startSlots,
  type AgentSession,
} from "../lib/index";
import { alive, goneWithin, repoRoot } from "./helpers";

const ready = JSON.stringify({ protocol_version: "1.0", type: "ready", ts: 1, version: "0", package: "abort", metadata: {} });
const python = join(repoRoot, ".venv", "bin", "python");
const dir = mkdtempSync(join(tmpdir(), "pbn-abort-"));
let files = 0;
const quiet = { onDiagnostic: () => {} };

let sessions: AgentSession[] = [];
afterEach(async () => {
  await Promise.all(sessions.map((session) => session.close()));
  sessions = [];
});
afterAll(async () => {
  await closeWarmServers({ kill: true });
  rmSync(dir, { recursive: true, force: true });
});

/** A backend that writes its pid to a file and never gets ready (or, with `writesReady`, does at once). */
function recordingBackend(writesReady = false) {
  files += 1;
  const pidFile = join(dir, `pid-${files}`);
  const then = writesReady ? `echo '${ready}'; read line` : "exec sleep 600";
  return { pidFile, backend: { command: "sh", args: ["-c", `echo $$ > '${pidFile}'; ${then}`] } };
}

/** The pid a backend wrote, once it has. */
async function pidIn(file: string): Promise<number> {
  await expect.poll(() => existsSync(file) && readFileSync(file, "utf8").endsWith("\n"), { timeout: 20_000 }).toBe(true);
  return Number(readFileSync(file, "utf8").trim());
}

/** The rejection of a start, which must be `aborted`, within 10 s (an ignored signal leaves it pending far longer). */
async function abortedError(start: Promise<unknown>): Promise<SessionStartError> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const error = await Promise.race([
    start.then(
      () => new Error("the start succeeded"),
      (e: unknown) => e,
    ),
    new Promise((resolve) => (timer = setTimeout(resolve, 10_000, new Error("the start was still pending 10 s after the abort")))),
  ]).finally(() => clearTimeout(timer));
  expect(error).toBeInstanceOf(SessionStartError);
  expect((error as SessionStartError).code).toBe("aborted");
  return error as SessionStartError;
}

describe.runIf(process.platform !== "win32")("a start called off through its signal", () => {
  it("already aborted: rejects at once and starts nothing; an attached process is left as it was", async () => {
    const reason = new Error("no longer needed");
    const { pidFile, backend } = recordingBackend();
    const error = await abortedError(createAgentSession({ backend, signal: AbortSignal.abort(reason), ...quiet }));
    expect(error.message).toBe("The start was aborted before it began.");
    expect(error.cause).toBe(reason);
    expect(existsSync(pidFile)).toBe(false);

    const child = spawn("sleep", ["600"]);
    try {
      await abortedError(attachAgentSession(child, { signal: AbortSignal.abort(), ...quiet }));
      expect(child.exitCode).toBeNull();
      expect(alive(child.pid!)).toBe(true);
    } finally {
      child.kill("SIGKILL");
    }
  });

  it("queued for a start slot: it leaves the queue at once, nothing is spawned, and the starts after it move up", async () => {
    const previous = setMaxConcurrentStarts(1);
    try {
      const first = recordingBackend();
      const ahead = new AbortController();
      const running = createAgentSession({ backend: first.backend, signal: ahead.signal, ...quiet });
      const queued = recordingBackend();
      const controller = new AbortController();
      const waiting = createAgentSession({ backend: queued.backend, signal: controller.signal, ...quiet });
      const third = recordingBackend(true);
      const after = createAgentSession({ backend: third.backend, ...quiet });
      expect(startSlots()).toMatchObject({ starting: 1, waiting: 2 });
      // Before: ignored; it waited for the start ahead of it (here: for ever).
      controller.abort();
      const error = await abortedError(waiting);
      expect(error.message).toBe("The start was aborted while it waited for a start slot.");
      expect((error.cause as Error).name).toBe("AbortError");
      expect(startSlots()).toMatchObject({ starting: 1, waiting: 1 });
      // The one ahead is called off while it starts: its slot goes to the third.
      const firstPid = await pidIn(first.pidFile);
      ahead.abort();
      await abortedError(running);
      sessions.push(await after);
      expect(existsSync(queued.pidFile)).toBe(false);
      expect(await goneWithin(firstPid)).toBe(true);
      expect(startSlots()).toMatchObject({ starting: 0, waiting: 0 });
    } finally {
      setMaxConcurrentStarts(previous);
    }
  });

  it("spawned, cold, before ready: the backend and its supervisor are killed", async () => {
    const { pidFile, backend } = recordingBackend();
    const controller = new AbortController();
    const start = createAgentSession({ backend, signal: controller.signal, readyTimeoutMs: 60_000, ...quiet });
    const pid = await pidIn(pidFile);
    controller.abort(new Error("user went away"));
    const error = await abortedError(start);
    expect(error.message).toBe("The start was aborted before the backend was ready.");
    expect((error.cause as Error).message).toBe("user went away");
    expect(await goneWithin(pid)).toBe(true);
    expect(startSlots()).toMatchObject({ starting: 0, waiting: 0 });
  });

  it("attached, before ready: the process is ended through its kill", async () => {
    const child = spawn("sleep", ["600"]);
    const controller = new AbortController();
    const start = attachAgentSession(child, { signal: controller.signal, readyTimeoutMs: 60_000, ...quiet });
    controller.abort();
    const exited = once(child, "exit");
    await abortedError(start);
    expect(await exited).toEqual([null, "SIGKILL"]);
  });

  it("once ready, the signal has no effect and is let go of", async () => {
    const { backend } = recordingBackend(true);
    const controller = new AbortController();
    const closes: unknown[] = [];
    const session = await createAgentSession({ backend, signal: controller.signal, onClose: (close) => closes.push(close), ...quiet });
    expect(getEventListeners(controller.signal, "abort")).toHaveLength(0);
    controller.abort();
    await session.close();
    expect(closes).toEqual([{ reason: "shutdown", code: 0, signal: null }]);
  });

  it("a signal that is not an AbortSignal is refused (invalid-spec) before anything starts", async () => {
    const { pidFile, backend } = recordingBackend();
    const error = (await createAgentSession({ backend, signal: "stop" as never, ...quiet }).catch((e: unknown) => e)) as SessionStartError;
    expect(error).toBeInstanceOf(SessionStartError);
    expect(error.code).toBe("invalid-spec");
    expect(error.message).toBe("The signal option must be an AbortSignal, not a string.");
    expect(existsSync(pidFile)).toBe(false);
  });
});

describe.runIf(process.platform === "linux")("a warm start called off through its signal (the real prefork server)", () => {
  /** An app module in its own folder: `source` is its Python. */
  function app(name: string, source: string) {
    const cwd = mkdtempSync(join(dir, `${name}-`));
    writeFileSync(join(cwd, `${name}.py`), source);
    return { command: python, args: ["-m", "agentlane_process_bridge", "--app", `${name}:create`], cwd, warm: { fallback: "error" as const } };
  }

  it("while its server still imports the app: rejects at once", async () => {
    const imported = join(dir, "slow-import-started");
    const backend = app("slow_import", `import pathlib, time\npathlib.Path(${JSON.stringify(imported)}).touch()\ntime.sleep(600)\n\ndef create():\n    raise RuntimeError("never reached")\n`);
    const controller = new AbortController();
    const start = createAgentSession({ backend, signal: controller.signal, readyTimeoutMs: 60_000, ...quiet });
    await expect.poll(() => existsSync(imported), { timeout: 20_000 }).toBe(true);
    controller.abort();
    const error = await abortedError(start);
    expect(error.message).toBe("The start was aborted before the backend was ready.");
  });

  it("forked, while its factory runs: the forked backend is killed", async () => {
    const pidFile = join(dir, "slow-factory-pid");
    const backend = app(
      "slow_factory",
      `import os, pathlib, time\n\ndef create():\n    pathlib.Path(${JSON.stringify(pidFile)}).write_text(f"{os.getpid()}\\n")\n    time.sleep(600)\n`,
    );
    const controller = new AbortController();
    const start = createAgentSession({ backend, signal: controller.signal, readyTimeoutMs: 60_000, ...quiet });
    const pid = await pidIn(pidFile);
    controller.abort();
    await abortedError(start);
    expect(await goneWithin(pid)).toBe(true);
  });
});
