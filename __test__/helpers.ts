import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";

export const repoRoot = join(__dirname, "..");

/** Running: the process exists and is not a zombie (Linux's /proc). */
export function alive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.[0] !== "Z";
  } catch {
    return false;
  }
}

/** Waits until `pid` is gone (the kernel may take a moment after a SIGKILL); false after `timeoutMs`. */
export async function goneWithin(pid: number, timeoutMs = 10_000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

export interface ValidExample {
  name: string;
  line: string;
}
export interface InvalidExample {
  id: string;
  name: string;
  line: string;
  message: string;
  messageIsPrefix: boolean;
  /** The `BridgeDecodeError.code` (the core's `DecodeErrorKind::code`). */
  code: string;
  fields: string[];
}

/** The worked examples of docs/protocol.md §10, shared with the Rust tests. */
export const examples: {
  valid: ValidExample[];
  invalid: InvalidExample[];
  encodedCommands: string[];
} = JSON.parse(readFileSync(join(repoRoot, "tests/fixtures/protocol-examples.json"), "utf8"));

const hostileLines = createRequire(__filename)("./fixtures/hostile-lines.js") as {
  runHost(config: object, timeoutMs: number): Promise<unknown>;
  figure(name: string, data: unknown): void;
};

/** What fixtures/hostile-writer.js reports having written. */
export interface WriterSummary {
  stdoutBytes: number;
  stdoutLines: number;
  stderrBytes: number;
  stderrLines: number;
}

/** What every scenario run in fixtures/hostile-host.js reports. */
export interface HostResult {
  elapsedMs: number;
  /** VmRSS once the package was loaded, VmHWM (peak) and VmRSS at the end, kB. */
  startKb: number;
  peakKb: number;
  endKb: number;
  peakReset: boolean;
  problems: string[];
  exit: { code: number | null; signal: string | null; summary: WriterSummary; stderrLines: number };
}

/** Runs one scenario in fixtures/hostile-host.js, its own process (see runHost there). */
export const runHost = <T>(config: object, timeoutMs: number) => hostileLines.runHost(config, timeoutMs) as Promise<T & HostResult>;

/** Prints a measured figure for RELIABILITY.md (a `FIGURE` line). */
export const figure = hostileLines.figure;
