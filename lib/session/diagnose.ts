/**
 * Saying why a backend would not start: the last lines of its stderr, kept
 * bounded, and the likely cause where it is recognisable (Python, `uv` or
 * agentlane missing, the app module failing to import, a protocol version
 * mismatch). Pure functions of what the session saw; no I/O.
 */
import { basename } from "node:path";
import type { BridgeDecodeError, SessionStartErrorCode } from "../errors";
import type { BridgeSpawnError, SpawnFailureReason } from "../spawn/spawn-error";

/** The last stderr lines, bounded in count and length. */
export class StderrTail {
  private readonly kept: string[] = [];

  constructor(
    private readonly maxLines = 20,
    private readonly maxLineChars = 1024,
  ) {}

  push(line: string): void {
    this.kept.push(line.length > this.maxLineChars ? `${line.slice(0, this.maxLineChars)}…` : line);
    if (this.kept.length > this.maxLines) this.kept.shift();
  }

  lines(): string[] {
    return [...this.kept];
  }
}

/** What went wrong at startup, as the session saw it. */
export interface StartFailure {
  code: SessionStartErrorCode;
  /** The command spawned (`uv` for an `{ app }` spec). */
  command: string;
  /** The OS error of a failed spawn. */
  spawnError?: NodeJS.ErrnoException;
  exitCode: number | null;
  stderrTail: string[];
}

/**
 * The start failure an error of the start seam stands for: its own
 * `startCode` (a warm start that cannot be: `warm-unavailable`), else
 * `spawn-failed`.
 */
export function startCodeOf(error: unknown): SessionStartErrorCode {
  const own = (error as { startCode?: unknown } | null)?.startCode;
  return own === "warm-unavailable" ? own : "spawn-failed";
}

/** The likely cause of a start failure, in a sentence, when it is recognisable. */
export function likelyCause(failure: StartFailure): string | undefined {
  const program = basename(failure.command);
  if (failure.code === "spawn-failed") {
    const error = failure.spawnError as BridgeSpawnError | undefined;
    switch (error?.reason ?? reasonOfCode(error?.code)) {
      case "cwd-missing":
        return `The backend's working directory ${error?.cwd} does not exist: check projectDir (or cwd), which a relative path is resolved against the host's cwd for.`;
      case "supervisor-missing":
        return "The native supervisor of this platform's package is missing (a broken install): reinstall the package, or give supervise: false to run without it.";
      case "out-of-descriptors":
        return "The host has run out of file descriptors: each session holds 4 while it runs; raise the limit (ulimit -n) or close sessions.";
      case "not-executable":
        return `${failure.command} is not executable (EACCES).`;
      case "command-missing":
        if (program === "uv") {
          return "uv was not found on PATH. The { app, projectDir } backend spec runs `uv run --project <projectDir> python -m agentlane_process_bridge --app <app>`: install uv, or give { command, args } with a Python that has agentlane installed.";
        }
        if (/^python/.test(program)) return `${failure.command} was not found: give the path of a Python that has agentlane installed (for example a virtualenv's bin/python; a relative path is resolved against the backend's cwd).`;
        return `${failure.command} was not found (ENOENT): check the command and PATH (a relative path is resolved against the backend's cwd).`;
      default:
        return undefined;
    }
  }
  if (failure.code !== "exited-before-ready") return undefined;
  const lines = failure.stderrTail;
  const last = (pattern: RegExp) => [...lines].reverse().map((line) => pattern.exec(stripAnsi(line))).find((m) => m !== null);
  const noBridge = last(/No module named '?agentlane_process_bridge'?/);
  if (noBridge) return "This Python has no agentlane: install agentlane (the package that provides agentlane_process_bridge) into it, or use the Python of a virtualenv that has it.";
  const bridge = last(/^agentlane_process_bridge: (.+)$/);
  if (bridge) {
    const reason = bridge[1];
    if (/No module named/.test(reason)) {
      return `The app module failed to import (${reason}): check --app module:factory and that the backend's working directory (projectDir or cwd) contains the module.`;
    }
    if (/Expected --app/.test(reason)) return `The --app value is malformed (${reason}): it must be module:factory.`;
    return `The backend stopped at startup: ${reason}`;
  }
  const usage = last(/^usage: .*agentlane_process_bridge/);
  if (usage || failure.exitCode === 2) return "The backend's command line is wrong (exit status 2, a usage error): check the arguments, --app in particular.";
  const uvError = last(/^error: (.+)$/);
  if (uvError && program === "uv") return `uv failed: ${uvError[1]}`;
  const exception = last(/^([A-Za-z_][\w.]*(?:Error|Exception)): (.*)$/);
  if (exception) return `The backend raised ${exception[1]}: ${exception[2]}`;
  return undefined;
}

/** The reason of a spawn error that did not come through the process layer. */
function reasonOfCode(code: string | undefined): SpawnFailureReason | undefined {
  if (code === "ENOENT") return "command-missing";
  if (code === "EACCES") return "not-executable";
  if (code === "EMFILE" || code === "ENFILE") return "out-of-descriptors";
  return undefined;
}

function stripAnsi(text: string): string {
  // eslint-disable-next-line no-control-regex
  return text.replace(/\u001b\[[0-9;]*m/g, "").trim();
}

/** How a bad line before `ready` makes startup fail. */
export function startFailureOf(error: BridgeDecodeError, line: string): { message: string; code: SessionStartErrorCode; cause: unknown } {
  if (error.code === "unsupported-version") {
    return { message: `The backend speaks an unsupported protocol version: ${error.message}`, code: "unsupported-protocol", cause: error };
  }
  let type: unknown;
  try {
    type = (JSON.parse(line) as { type?: unknown } | null)?.type;
  } catch {
    // Not JSON.
  }
  if (type === "ready") return { message: `The backend's ready event is invalid: ${error.message}`, code: "bad-ready", cause: error };
  return { message: "Backend exited before ready event.", code: "protocol-error", cause: error };
}
