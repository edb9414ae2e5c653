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
