/**
 * Finding the native supervisor (`crates/bridge-supervisor`), the small
 * process `spawnBridgeProcess` puts between the host and the backend so that
 * no descendant of the backend outlives the host, even a SIGKILLed one.
 *
 * It ships beside the addon: `process-bridge-supervisor.<platform>` in the
 * package root (a build from source) or in the platform package
 * (`@agentlanejs/process-bridge-native-<platform>`). Windows has none.
 */
import { accessSync, constants, existsSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { deniedPermission, RuntimePermissionError } from "../errors";

/** The napi-rs platform name of this process: `linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`, … */
export function platformName(): string {
  const base = `${process.platform}-${process.arch}`;
  if (process.platform === "linux") return `${base}-${isMusl() ? "musl" : "gnu"}`;
  if (process.platform === "win32") return `${base}-msvc`;
  return base;
}

/**
 * Decided as the addon's generated loader (`index.js`) decides it, so that
 * the supervisor comes from the platform package the addon came from: by
 * `/usr/bin/ldd` first, and only where that cannot be read by a diagnostic
 * report (which costs a fresh host about 5–10 ms on its first spawn).
 */
function isMusl(): boolean {
  try {
    return readFileSync("/usr/bin/ldd", "utf8").includes("musl");
  } catch {
    // No ldd: ask the runtime.
  }
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
  return !report?.header?.glibcVersionRuntime;
}

/** The supervisor's file name for this platform. */
export function supervisorFileName(): string {
  return `process-bridge-supervisor.${platformName()}`;
}

let found: string | null | undefined;
let missing: MissingSupervisor | null | undefined;

/**
 * This platform's package is installed but holds no runnable supervisor (a
 * release whose `files` lost it, or an install that dropped its mode): what
 * `missingSupervisor` reports, so that `supervise: "auto"` running in the
 * weaker grouped mode is never silent.
 */
export interface MissingSupervisor {
  /** `ENOENT`: the file is not in the package; `EACCES`: it is, but not executable. */
  code: "ENOENT" | "EACCES";
  /** Where it should be. */
  path: string;
  message: string;
}

/**
 * The supervisor's path, or `null` where there is none (Windows, or a
 * platform package without it). `PROCESS_BRIDGE_SUPERVISOR` overrides the
 * lookup: a path, or an empty string for none.
 */
export function findSupervisor(): string | null {
  const override = process.env.PROCESS_BRIDGE_SUPERVISOR;
  if (override !== undefined) return override === "" ? null : override;
  if (found !== undefined) return found;
  found = null;
  if (process.platform === "win32") return found;
  const name = supervisorFileName();
  const candidates = [join(__dirname, "..", "..", name)];
  try {
    const platformPackage = require.resolve(`@agentlanejs/process-bridge-native-${platformName()}/package.json`);
    candidates.push(join(dirname(platformPackage), name));
  } catch {
    // No platform package: a build from source.
  }
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      found = candidate;
      break;
    } catch (error) {
      // Not here, unless the runtime would not let us look (Deno without --allow-run).
      const permission = deniedPermission(error);
      if (permission !== undefined) {
        found = undefined;
        throw new RuntimePermissionError(permission, "to find and run its supervisor", { cause: error });
      }
    }
  }
  return found;
}

/**
 * The supervisor this platform's package should ship and does not, or
 * `null`: when one was found, on Windows (none ships), without a platform
 * package (a build from source decides for itself), or when
 * `PROCESS_BRIDGE_SUPERVISOR` names one or none.
 */
export function missingSupervisor(): MissingSupervisor | null {
  if (missing !== undefined) return missing;
  missing = null;
  if (process.platform === "win32" || process.env.PROCESS_BRIDGE_SUPERVISOR !== undefined || findSupervisor() !== null) return missing;
  let packageDir: string;
  try {
    packageDir = dirname(require.resolve(`@agentlanejs/process-bridge-native-${platformName()}/package.json`));
  } catch {
    return missing;
  }
  const path = join(packageDir, supervisorFileName());
  const code = existsSync(path) ? "EACCES" : "ENOENT";
  const what = code === "ENOENT" ? "is not in" : "is not executable in";
  missing = {
    code,
    path,
    message: `The native supervisor ${supervisorFileName()} ${what} @agentlanejs/process-bridge-native-${platformName()} (${packageDir}), which should ship it: backends run in the weaker grouped mode (a SIGKILLed host can leave their processes behind). Reinstall the package; give supervise: false to choose that mode knowingly.`,
  };
  return missing;
}

/** What the supervisor reports on its control socket (`crates/bridge-supervisor`). */
export type SupervisorReport =
  /** The backend runs; an adopting supervisor (a warm start, docs/prefork.md) adds its own pid. */
  | { kind: "started"; pid: number; supervisorPid?: number }
  | { kind: "failed"; code: string; errno: number; message: string }
  /** The last line: how the backend ended (for a host that is not the supervisor's parent). */
  | { kind: "exited"; code: number }
  | { kind: "signaled"; signal: number };

/**
 * Parses one line of the control socket: `started <pid> [<supervisor pid>]`,
 * `failed <ERRNO> <number> <message>`, `exited <code>`, `signaled <number>`.
 */
export function parseReport(line: string): SupervisorReport | undefined {
  const started = /^started (\d+)(?: (\d+))?$/.exec(line);
  if (started) {
    return started[2] === undefined
      ? { kind: "started", pid: Number(started[1]) }
      : { kind: "started", pid: Number(started[1]), supervisorPid: Number(started[2]) };
  }
  const failed = /^failed (\S+) (\d+) (.*)$/.exec(line);
  if (failed) return { kind: "failed", code: failed[1], errno: Number(failed[2]), message: failed[3] };
  const ended = /^(exited|signaled) (\d+)$/.exec(line);
  if (ended) return ended[1] === "exited" ? { kind: "exited", code: Number(ended[2]) } : { kind: "signaled", signal: Number(ended[2]) };
  return undefined;
}
