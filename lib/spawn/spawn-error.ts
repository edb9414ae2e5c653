/**
 * Saying why a backend could not be started, at the place that knows: the
 * process layer. Node reports a failed spawn as `spawn <program> <ERRNO>`,
 * naming the program it ran (the supervisor, when there is one) and not
 * what went wrong: a missing working directory and a missing command both
 * are `ENOENT`. This module names the backend's command, tells those cases
 * apart (`reason`), and gives errors of the native layer their errno
 * `code` (`EMFILE`, …).
 */
import { existsSync, statSync } from "node:fs";
import { constants } from "node:os";
import { isAbsolute, resolve } from "node:path";
import { deniedPermission } from "../errors";

/** Why a spawn failed, where the process layer can tell. */
export type SpawnFailureReason =
  /** The backend's working directory does not exist (or is not a directory). */
  | "cwd-missing"
  /** The backend's command was not found. */
  | "command-missing"
  /** The native supervisor's file is gone (a broken install). */
  | "supervisor-missing"
  /** The command exists but may not be executed. */
  | "not-executable"
  /** The host has run out of file descriptors (or the system has). */
  | "out-of-descriptors"
  /** The runtime may not start processes (Deno without --allow-run). */
  | "permission-denied";

/** A spawn failure as the process layer reports it (`onSpawnError`, or thrown). */
export interface BridgeSpawnError extends NodeJS.ErrnoException {
  /** Why it failed, where that could be told (absent otherwise). */
  reason?: SpawnFailureReason;
  /** The backend's command (not the supervisor's path). */
  command?: string;
  /** The working directory it was to run in. */
  cwd?: string;
  /** What `reason` means here, in a sentence (e.g. which directory is missing). */
  detail?: string;
}

const ERRNO_NAMES = new Map(Object.entries(constants.errno).map(([name, number]) => [number, name]));

/**
 * Gives an error of the native layer (`… (os error 24)`) the errno name as
 * its `code`, as Node's own errors have it.
 */
export function withErrnoCode(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const match = /\(os error (\d+)\)/.exec(error.message);
  const name = match ? ERRNO_NAMES.get(Number(match[1])) : undefined;
  if (name !== undefined) {
    Object.assign(error, { code: name, errno: -Number(match![1]), message: `spawn ${name}`, syscall: "spawn" });
    if (name === "EMFILE" || name === "ENFILE") (error as BridgeSpawnError).reason = "out-of-descriptors";
  }
  return error;
}

/** What was being started, for the explanation. */
export interface SpawnAttempt {
  command: string;
  cwd: string | undefined;
  /** The supervisor's path when the backend ran under it. */
  supervisor: string | null;
}

/**
 * Rewrites a spawn error (from Node, or made from the supervisor's report)
 * to name the backend's command, as Node and the reference name it without
 * a supervisor (`spawn <command> <ERRNO>`), and says why in `reason` and
 * `detail`, where that can be told. Called only once a spawn has failed:
 * the checks cost nothing otherwise.
 */
export function explainSpawnError(error: Error, attempt: SpawnAttempt): BridgeSpawnError {
  const failure = error as BridgeSpawnError;
  failure.command = attempt.command;
  failure.cwd = attempt.cwd;
  failure.reason ??= deniedPermission(failure) !== undefined ? "permission-denied" : reasonOf(failure.code, attempt, failure.path);
  failure.detail = describe(failure.reason, attempt);
  if (failure.code !== undefined && failure.message.startsWith("spawn ")) failure.message = `spawn ${attempt.command} ${failure.code}`;
  return failure;
}

function reasonOf(code: string | undefined, attempt: SpawnAttempt, program: string | undefined): SpawnFailureReason | undefined {
  switch (code) {
    case "EMFILE":
    case "ENFILE":
      return "out-of-descriptors";
    case "EACCES":
      return "not-executable";
    case "ENOENT":
    case "ENOTDIR":
      if (attempt.cwd !== undefined && !isDirectory(attempt.cwd)) return "cwd-missing";
      // Node names the program it ran: the supervisor, or the backend's command.
      if (attempt.supervisor !== null && program === attempt.supervisor && !existsSync(attempt.supervisor)) return "supervisor-missing";
      return "command-missing";
    default:
      return undefined;
  }
}

function describe(reason: SpawnFailureReason | undefined, attempt: SpawnAttempt): string | undefined {
  switch (reason) {
    case "cwd-missing":
      return `the working directory ${attempt.cwd} does not exist`;
    case "supervisor-missing":
      return `the native supervisor ${attempt.supervisor} is missing (a broken install; supervise: false runs without it)`;
    case "command-missing": {
      const where = isAbsolute(attempt.command) || !attempt.command.includes("/") ? "" : ` (a relative command is resolved against the working directory ${resolve(attempt.cwd ?? ".")})`;
      return `the command was not found${where}`;
    }
    case "not-executable":
      return "the command is not executable";
    case "out-of-descriptors":
      return "the host has run out of file descriptors";
    case "permission-denied":
      return "the runtime may not start processes (Deno: run with --allow-run)";
    default:
      return undefined;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
