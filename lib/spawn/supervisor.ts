/**
 * Finding the native supervisor (`crates/bridge-supervisor`), the small
 * process `spawnBridgeProcess` puts between the host and the backend so that
 * no descendant of the backend outlives the host, even a SIGKILLed one.
 *
 * It ships beside the addon: `process-bridge-supervisor.<platform>` in the
 * package root (a build from source) or in the platform package
 * (`@agentlanejs/process-bridge-native-<platform>`). Windows has none.
 */
import { accessSync, constants } from "node:fs";
import { dirname, join } from "node:path";

/** The napi-rs platform name of this process: `linux-x64-gnu`, `darwin-arm64`, `win32-x64-msvc`, … */
export function platformName(): string {
  const base = `${process.platform}-${process.arch}`;
  if (process.platform === "linux") return `${base}-${isMusl() ? "musl" : "gnu"}`;
  if (process.platform === "win32") return `${base}-msvc`;
  return base;
}

function isMusl(): boolean {
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
  return !report?.header?.glibcVersionRuntime;
}

/** The supervisor's file name for this platform. */
export function supervisorFileName(): string {
  return `process-bridge-supervisor.${platformName()}`;
}

let found: string | null | undefined;

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
    } catch {
      // Not here.
    }
  }
  return found;
}

/** What the supervisor reports on its control socket. */
export type SupervisorReport =
  | { kind: "started"; pid: number }
  | { kind: "failed"; code: string; errno: number; message: string };

/** Parses one line of the control socket (`started <pid>` or `failed <ERRNO> <number> <message>`). */
export function parseReport(line: string): SupervisorReport | undefined {
  const started = /^started (\d+)$/.exec(line);
  if (started) return { kind: "started", pid: Number(started[1]) };
  const failed = /^failed (\S+) (\d+) (.*)$/.exec(line);
  if (failed) return { kind: "failed", code: failed[1], errno: Number(failed[2]), message: failed[3] };
  return undefined;
}
