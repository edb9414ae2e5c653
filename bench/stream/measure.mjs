// What the stream benchmarks read about this process's own threads, shared
// by bench/stream.mjs (warm, in process) and bench/stream/fresh.mjs (one
// fresh process per run).
import { existsSync, readFileSync, writeFileSync } from "node:fs";

/** /proc/self/task/<pid>/schedstat: the main (JS) thread's scheduler times (Linux; ns resolution). */
const SCHEDSTAT = `/proc/self/task/${process.pid}/schedstat`;
const schedstat = existsSync(SCHEDSTAT) ? () => readFileSync(SCHEDSTAT, "latin1").split(" ").map(Number) : () => [NaN, NaN];

/** CPU time of this (the main) thread, in ms. */
export const threadCpuMs = () => schedstat()[0] / 1e6;

/** [CPU time, time runnable but waiting for a core] of this thread, in ms. */
export const threadTimes = () => schedstat().slice(0, 2).map((ns) => ns / 1e6);

/** CPU time of the whole process (all threads), in ms. */
export function processCpuMs() {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1e3;
}

/** A line of /proc/self/status (`VmRSS`, `VmHWM`) in bytes; NaN where there is none. */
export function statusBytes(field) {
  try {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, "m").exec(readFileSync("/proc/self/status", "latin1"));
    return match ? Number(match[1]) * 1024 : NaN;
  } catch {
    return NaN;
  }
}

/**
 * Resets this process's peak resident size (`VmHWM`) to its current size
 * (Linux ≥ 4.0: `clear_refs` 5); false where that is not possible.
 */
export function resetPeakRss() {
  try {
    writeFileSync("/proc/self/clear_refs", "5");
    return true;
  } catch {
    return false;
  }
}
