// The runtime suites' own tiny runner: named tests run one after the other,
// each bounded by a timeout (a hang is a failure, never a stuck run), with
// plain `node:assert`. vitest does not run reliably under Bun and Deno, and
// the point is to run what a user's program runs, on the runtime alone.
import { readFileSync } from "node:fs";

/** `bun`, `deno` or `node`: the runtime this program runs on. */
export const runtime = process.versions.bun !== undefined ? "bun" : process.versions.deno !== undefined ? "deno" : "node";

const tests = [];

/** Registers a named test; `timeoutMs` bounds it (default 20 s). */
export function test(name, body, { timeoutMs = 20_000 } = {}) {
  tests.push({ name, body, timeoutMs });
}

/** Whether a process is alive (a zombie is not): read from /proc, not signalled. */
export function alive(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until none of `pids` is alive; throws naming the ones left after `ms`. */
export async function waitGone(pids, ms = 5_000, what = "processes") {
  const deadline = Date.now() + ms;
  for (;;) {
    const left = pids.filter((pid) => pid !== undefined && alive(pid));
    if (left.length === 0) return;
    if (Date.now() > deadline) throw new Error(`${what} still alive after ${ms} ms: ${left.join(", ")}`);
    await sleep(25);
  }
}

/** Resolves when `predicate()` holds; throws `message` after `ms`. */
export async function waitFor(predicate, ms, message) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(message);
    await sleep(10);
  }
}

function describe(error) {
  if (!(error instanceof Error)) return String(error);
  const first = error.stack?.split("\n").find((line) => line.includes("tests/runtime/")) ?? "";
  return `${error.name}: ${error.message.split("\n").slice(0, 6).join(" | ")}${first ? ` (${first.trim()})` : ""}`;
}

/**
 * Runs every registered test in order; prints one line per failure and
 * `runtime <name>: N passed, N failed (T s)`; resolves with the failure count.
 */
export async function runAll({ only } = {}) {
  const started = Date.now();
  let passed = 0;
  let failed = 0;
  for (const { name, body, timeoutMs } of tests) {
    if (only && !name.includes(only)) continue;
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
    });
    const testStarted = Date.now();
    try {
      await Promise.race([Promise.resolve().then(body), timeout]);
      passed += 1;
      if (process.env.PBN_RUNTIME_VERBOSE) console.log(`  ok ${name} (${Date.now() - testStarted} ms)`);
    } catch (error) {
      failed += 1;
      console.log(`runtime ${runtime} FAILED: ${name}: ${describe(error)}`);
    } finally {
      clearTimeout(timer);
    }
  }
  console.log(`runtime ${runtime}: ${passed} passed, ${failed} failed (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  return failed;
}
