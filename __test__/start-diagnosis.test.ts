/**
 * A backend that will not start says why (issue "Contained and
 * diagnosable", item 2): every start failure is a SessionStartError with a
 * stable code, the exit code and signal, the last stderr lines, and the
 * likely cause where it is recognisable. Real processes throughout: the
 * real agentlane backend, a Python without agentlane, a missing uv, and
 * scripted children for the protocol faults.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAgentSession, SessionStartError, type AgentSessionOptions } from "../lib/index";
import { repoRoot } from "./helpers";

const venvPython = join(repoRoot, ".venv", "bin", "python");
const haveBackend = existsSync(venvPython);
const writeAndExit = join(__dirname, "fixtures", "write-and-exit.js");
const ready = (fields: Record<string, unknown> = {}) =>
  JSON.stringify({ protocol_version: "1.0", type: "ready", ts: 1, version: "0.22.0", package: "agentlane-process-bridge", metadata: {}, ...fields });

async function startError(options: AgentSessionOptions): Promise<SessionStartError> {
  let session;
  try {
    session = await createAgentSession({ readyTimeoutMs: 20_000, onDiagnostic: () => {}, ...options });
  } catch (error) {
    expect(error).toBeInstanceOf(SessionStartError);
    return error as SessionStartError;
  }
  await session.close();
  throw new Error("the session started");
}

describe("start failures say why", () => {
  // Issue 19: a missing cwd was reported as the supervisor's ENOENT, with
  // "sh was not found" as the cause; a missing command, a missing cwd and
  // a missing supervisor are three causes.
  for (const supervise of [true, false]) {
    it(`a working directory that does not exist (supervise: ${supervise}): the command's ENOENT, and the cause names the directory`, async () => {
      const cwd = join(repoRoot, "no-such-directory-pbn");
      const error = await startError({ backend: { command: "sh", args: ["-c", "exit 0"], cwd, supervise } });
      expect(error.code).toBe("spawn-failed");
      expect(error.message).toBe("spawn sh ENOENT");
      expect(error.cause).toMatchObject({ code: "ENOENT", reason: "cwd-missing", cwd });
      expect(error.likelyCause).toBe(`The backend's working directory ${cwd} does not exist: check projectDir (or cwd), which a relative path is resolved against the host's cwd for.`);
    });
  }

  // Grouped, the supervisor's --exec reports the failed exec as the supervised start does.
  for (const [how, supervise] of [["under the supervisor", true], ["grouped (launched through the supervisor's --exec)", false]] as const) {
    it(`a command that is not there, ${how}: named as the command's ENOENT, not the supervisor's`, async () => {
      const error = await startError({ backend: { command: "no-such-command-pbn", supervise } });
      expect(error.message).toBe("spawn no-such-command-pbn ENOENT");
      expect(error.cause).toMatchObject({ code: "ENOENT", reason: "command-missing" });
      expect(error.likelyCause).toMatch(/^no-such-command-pbn was not found \(ENOENT\): check the command and PATH/);
    });
  }

  it("a relative command with a cwd: the cause says it is resolved against the cwd", async () => {
    // tests/e2e/backends has no .venv of its own; the repository root has.
    const error = await startError({ backend: { command: ".venv/bin/python", args: ["-m", "agentlane_process_bridge"], cwd: join(repoRoot, "tests", "e2e", "backends") } });
    expect(error.cause).toMatchObject({ code: "ENOENT", reason: "command-missing" });
    expect(error.likelyCause).toMatch(/^\.venv\/bin\/python was not found: .*a relative path is resolved against the backend's cwd/);
  });

  it("a supervisor whose file is gone: spawn-failed, and the cause says the install is broken", async () => {
    const saved = process.env.PROCESS_BRIDGE_SUPERVISOR;
    process.env.PROCESS_BRIDGE_SUPERVISOR = join(repoRoot, "no-such-supervisor-pbn");
    try {
      const error = await startError({ backend: { command: "sh", args: ["-c", "exit 0"], supervise: true } });
      expect(error.message).toBe("spawn sh ENOENT");
      expect(error.cause).toMatchObject({ code: "ENOENT", reason: "supervisor-missing" });
      expect(error.likelyCause).toMatch(/^The native supervisor of this platform's package is missing \(a broken install\)/);
    } finally {
      if (saved === undefined) delete process.env.PROCESS_BRIDGE_SUPERVISOR;
      else process.env.PROCESS_BRIDGE_SUPERVISOR = saved;
    }
  });

  it("a missing Python: spawn-failed, ENOENT as cause, and what to give instead", async () => {
    const error = await startError({ backend: { command: "/nonexistent/venv/bin/python", args: ["-m", "agentlane_process_bridge"] } });
    expect(error.code).toBe("spawn-failed");
    expect((error.cause as NodeJS.ErrnoException).code).toBe("ENOENT");
    expect(error.likelyCause).toMatch(/^\/nonexistent\/venv\/bin\/python was not found: give the path of a Python that has agentlane/);
  });

  it("the { app } form without uv on PATH: spawn-failed, and the cause names uv and the alternative", async () => {
    const error = await startError({ backend: { app: "demo_app:create_backend", projectDir: join(repoRoot, "examples", "backend"), env: { PATH: "/nonexistent" } } });
    expect(error.code).toBe("spawn-failed");
    expect(error.message).toBe("spawn uv ENOENT");
    expect(error.likelyCause).toMatch(/^uv was not found on PATH\. The \{ app, projectDir \} backend spec runs `uv run/);
  });

  it.runIf(haveBackend)("the app module failing to import: exited-before-ready, exit 1, the backend's reason in stderrTail and likelyCause", async () => {
    const error = await startError({
      backend: { command: venvPython, args: ["-m", "agentlane_process_bridge", "--app", "no_such_module_pbn:factory"], cwd: repoRoot },
    });
    expect(error.code).toBe("exited-before-ready");
    expect(error.message).toBe("Backend exited before ready event.");
    expect([error.exitCode, error.signal]).toEqual([1, null]);
    expect(error.stderrTail.at(-1)).toBe("agentlane_process_bridge: No module named 'no_such_module_pbn'");
    expect(error.likelyCause).toBe(
      "The app module failed to import (No module named 'no_such_module_pbn'): check --app module:factory and that the backend's working directory (projectDir or cwd) contains the module.",
    );
  });

  it("a Python without agentlane: the cause says to install it", async () => {
    const error = await startError({
      backend: { command: "python3", args: ["-c", "import agentlane_process_bridge"], env: { ...process.env, PYTHONPATH: "" } },
    });
    expect(error.code).toBe("exited-before-ready");
    expect(error.exitCode).toBe(1);
    expect(error.stderrTail.at(-1)).toBe("ModuleNotFoundError: No module named 'agentlane_process_bridge'");
    expect(error.likelyCause).toMatch(/^This Python has no agentlane/);
  });

  it("another protocol major version: unsupported-protocol, with the decoder's message", async () => {
    const error = await startError({
      backend: { command: process.execPath, args: [writeAndExit, JSON.stringify({ stdout: `${ready({ protocol_version: "2.0" })}\n`, code: 0 })] },
    });
    expect(error.code).toBe("unsupported-protocol");
    expect(error.message).toBe("The backend speaks an unsupported protocol version: Unsupported bridge protocol version: 2.0.");
  });

  it("an invalid ready event: bad-ready, naming the fields", async () => {
    const error = await startError({
      backend: { command: process.execPath, args: [writeAndExit, JSON.stringify({ stdout: `${ready({ package: 5 })}\n`, code: 0 })] },
    });
    expect(error.code).toBe("bad-ready");
    expect(error.message).toBe("The backend's ready event is invalid: Invalid bridge event payload: package.");
  });

  it("a stray line before ready: protocol-error, message as before", async () => {
    const error = await startError({
      backend: { command: process.execPath, args: [writeAndExit, JSON.stringify({ stdout: `hello from a tool\n${ready()}\n`, code: 0 })] },
    });
    expect(error.code).toBe("protocol-error");
    expect(error.message).toBe("Backend exited before ready event.");
  });

  it("a backend that never gets ready: ready-timeout, with what it wrote on stderr", async () => {
    const error = await startError({
      backend: { command: process.execPath, args: ["-e", "console.error('loading a very large model'); setInterval(() => {}, 1000)"] },
      readyTimeoutMs: 300,
    });
    expect(error.code).toBe("ready-timeout");
    expect(error.stderrTail).toEqual(["loading a very large model"]);
  });
});
