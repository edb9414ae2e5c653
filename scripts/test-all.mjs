#!/usr/bin/env node
// The test command (`npm test`): works on a fresh clone. It installs what is
// missing (npm packages, the release addon, the Python backend's virtualenv),
// then runs every suite and ends with one line `N passed, N failed` summing
// all of them. Exits non-zero on any failure.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const npx = process.platform === "win32" ? "npx.cmd" : "npx";

function run(command, args, options = {}) {
  console.log(`\n$ ${command} ${args.join(" ")}`);
  const result = spawnSync(command, args, { cwd: root, stdio: options.capture ? ["inherit", "pipe", "inherit"] : "inherit", encoding: "utf8", ...options });
  if (options.capture) process.stdout.write(result.stdout ?? "");
  return result;
}

function must(result, what) {
  if (result.status !== 0) {
    console.error(`\n${what} failed (exit ${result.status ?? result.signal}).`);
    console.log("0 passed, 1 failed");
    process.exit(1);
  }
}

// 1. Set-up: packages, addon, TypeScript build, Python backend.
if (!existsSync(join(root, "node_modules", ".package-lock.json"))) {
  must(run("npm", ["ci", "--no-audit", "--no-fund"]), "npm ci");
}
must(run("npm", ["run", "build"]), "the build");
must(run("bash", ["scripts/setup-python.sh"]), "the Python backend setup");
// The agentlane-bridge client tests: .venv-clients (connectrpc) and Go.
must(run("bash", ["scripts/setup-bridge-clients.sh"]), "the bridge clients' setup");

let passed = 0;
let failed = 0;

// 2. Rust: the core's unit and integration tests.
const cargo = run("cargo", ["test", "--workspace", "--release", "--color", "never"], { capture: true });
for (const match of (cargo.stdout ?? "").matchAll(/test result: \w+\. (\d+) passed; (\d+) failed/g)) {
  passed += Number(match[1]);
  failed += Number(match[2]);
}
if (cargo.status !== 0 && failed === 0) failed += 1; // a build failure counts

// 2b. Lints: clippy over the whole workspace, warnings denied (the
// workspace lints include SAFETY notes on every unsafe block). One test.
const clippy = run("cargo", ["clippy", "--workspace", "--release", "--all-targets", "--color", "never", "--", "-D", "warnings"]);
if (clippy.status === 0) passed += 1;
else failed += 1;

// 3. Fuzzing: a short bounded pass of every cargo-fuzz target (the long
// runs' results are in RELIABILITY.md). One test per target.
const fuzz = run("bash", ["scripts/fuzz.sh", process.env.FUZZ_SECONDS ?? "10"], { capture: true });
for (const match of (fuzz.stdout ?? "").matchAll(/^fuzz \S+: .*, (ok|CRASH)$/gm)) {
  if (match[1] === "ok") passed += 1;
  else failed += 1;
}
if (fuzz.status !== 0 && !/CRASH/.test(fuzz.stdout ?? "")) failed += 1;

// 4. JavaScript: vitest, with a JSON report for the count.
const reportDir = mkdtempSync(join(tmpdir(), "pbn-vitest-"));
const report = join(reportDir, "report.json");
const vitest = run(npx, ["vitest", "run", "--reporter=default", "--reporter=json", `--outputFile.json=${report}`]);
if (existsSync(report)) {
  const summary = JSON.parse(readFileSync(report, "utf8"));
  passed += summary.numPassedTests;
  failed += summary.numFailedTests;
  if (vitest.status !== 0 && summary.numFailedTests === 0) failed += 1; // suite-level failure
} else {
  failed += 1;
}
rmSync(reportDir, { recursive: true, force: true });

console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
