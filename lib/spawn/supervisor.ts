/**
 * Finding the native supervisor (`crates/bridge-supervisor`), the small
 * process `spawnBridgeProcess` puts between the host and the backend so that
 * no descendant of the backend outlives the host, even a SIGKILLed one.
 *
 * It ships beside the addon: `process-bridge-supervisor.<platform>` in the
 * package root (a build from source) or in the platform package
 * (`@agentlanejs/process-bridge-native-<platform>`). Windows has none.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { native } from "../native";

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

/** What the addon's lookup answers. */
type SupervisorLookup = ReturnType<typeof native.findSupervisor>;

/** The lookup without an override, once per process (the files do not move). */
let searched: SupervisorLookup | undefined;

/**
 * The places this host knows (beside the addon, in the platform package),
 * looked up by the rules every host shares (`crates/bridge-launch`'s
 * `supervisor.rs`, through the addon): this file only says where to look.
 */
function lookup(): SupervisorLookup {
  const named = process.env.PROCESS_BRIDGE_SUPERVISOR;
  if (named !== undefined) return native.findSupervisor(named, [], null);
  if (searched !== undefined) return searched;
  if (process.platform === "win32") return (searched = { kind: "absent", named: false });
  const name = supervisorFileName();
  const packaged = platformPackageDir();
  const candidates = [join(__dirname, "..", "..", name)];
  if (packaged !== undefined) candidates.push(join(packaged, name));
  return (searched = native.findSupervisor(undefined, candidates, packaged === undefined ? null : join(packaged, name)));
}

/** This platform's package's folder, or `undefined` (a build from source). */
function platformPackageDir(): string | undefined {
  try {
    return dirname(require.resolve(`@agentlanejs/process-bridge-native-${platformName()}/package.json`));
  } catch {
    return undefined;
  }
}

/**
 * The supervisor's path, or `null` where there is none (Windows, or a
 * platform package without it). `PROCESS_BRIDGE_SUPERVISOR` overrides the
 * lookup: a path, or an empty string for none. A named path is used even
 * when it cannot be run, so that the start fails and says why
 * (`supervisor-missing`) rather than running silently without it.
 */
export function findSupervisor(): string | null {
  const found = lookup();
  if (found.kind === "found" || (found.kind === "missing" && found.named)) return found.path ?? null;
  return null;
}

/**
 * The supervisor only when it can run, never a named one that cannot: what
 * grouped mode launches its backend through (`--exec`), which must not
 * turn a start that works without the supervisor into a failed one.
 */
export function runnableSupervisor(): string | null {
  const found = lookup();
  return found.kind === "found" ? (found.path ?? null) : null;
}

/**
 * The supervisor this platform's package should ship and does not, or
 * `null`: when one was found, on Windows (none ships), without a platform
 * package (a build from source decides for itself), or when
 * `PROCESS_BRIDGE_SUPERVISOR` names one or none.
 */
export function missingSupervisor(): MissingSupervisor | null {
  const found = lookup();
  if (found.kind !== "missing" || found.named || found.path == null) return null;
  const code = found.code === "EACCES" ? "EACCES" : "ENOENT";
  const what = code === "ENOENT" ? "is not in" : "is not executable in";
  return {
    code,
    path: found.path,
    message: `The native supervisor ${supervisorFileName()} ${what} @agentlanejs/process-bridge-native-${platformName()} (${dirname(found.path)}), which should ship it: backends run in the weaker grouped mode (a SIGKILLed host can leave their processes behind). Reinstall the package; give supervise: false to choose that mode knowingly.`,
  };
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
