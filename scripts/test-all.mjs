#!/usr/bin/env node
// The test command (`npm test`): works on a fresh clone. It installs what is
// missing (npm packages, the release addon, the Python backend's virtualenv),
// then runs every suite and ends with one line `N passed, N failed` summing
// all of them. Exits non-zero on any failure.
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { otherNodeMajorArgs } from "./test-plan.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const npx = process.platform === "win32" ? "npx.cmd" : "npx";

/** Each command's time, printed after it and again in the summary ("Step times"). */
const stepTimes = [];
function run(command, args, options = {}) {
  console.log(`\n$ ${command} ${args.join(" ")}`);
  const started = Date.now();
  const result = spawnSync(command, args, { cwd: root, stdio: options.capture ? ["inherit", "pipe", "inherit"] : "inherit", encoding: "utf8", ...options });
  if (options.capture) process.stdout.write(result.stdout ?? "");
  const seconds = Math.round((Date.now() - started) / 1000);
  stepTimes.push(`${String(seconds).padStart(5)} s  ${command === process.execPath ? "node" : command} ${args.join(" ").slice(0, 90)}`);
  console.log(`   (${seconds} s)`);
  return result;
}

function must(result, what) {
  if (result.status !== 0) {
    console.error(`\n${what} failed (exit ${result.status ?? result.signal}).`);
    console.log("0 passed, 1 failed");
    process.exit(1);
  }
}

// 1. Set-up: packages, addon, TypeScript build, Python backend. The Rust
// parts build with the quick profile (Cargo.toml: release's optimisation
// without LTO), shared by the addon, cargo test, clippy and the bridge's
// suites; benchmarks and releases use `npm run build` (LTO).
if (!existsSync(join(root, "node_modules", ".package-lock.json"))) {
  must(run("npm", ["ci", "--no-audit", "--no-fund"]), "npm ci");
}
must(run("npm", ["run", "build:quick"]), "the build");
must(run("bash", ["scripts/setup-python.sh"]), "the Python backend setup");
// The agentlane-bridge client tests: .venv-clients (connectrpc) and Go.
must(run("bash", ["scripts/setup-bridge-clients.sh"]), "the bridge clients' setup");
// The PostgreSQL store's tests start a server of their own from Debian's programs.
must(run("bash", ["scripts/setup-postgres.sh"]), "the PostgreSQL server setup");

let passed = 0;
let failed = 0;
/** What failed, by name, printed again just above the last line (a CI log is often read from its end). */
const failures = [];
/** The names of the failed tests in a vitest JSON report, prefixed with `where`. */
function failedIn(summary, where) {
  for (const file of summary.testResults ?? []) {
    for (const test of file.assertionResults ?? []) {
      if (test.status === "failed") failures.push(`${where}: ${file.name.replace(`${root}/`, "")} > ${test.fullName}`);
    }
    if (file.status === "failed" && !(file.assertionResults ?? []).some((test) => test.status === "failed")) {
      failures.push(`${where}: ${file.name.replace(`${root}/`, "")} (the file failed: ${String(file.message ?? "").split("\n")[0]})`);
    }
  }
}

// 2. Rust: the core's unit and integration tests.
const cargo = run("cargo", ["test", "--workspace", "--profile", "quick", "--color", "never"], { capture: true });
for (const match of (cargo.stdout ?? "").matchAll(/test result: \w+\. (\d+) passed; (\d+) failed/g)) {
  passed += Number(match[1]);
  failed += Number(match[2]);
}
if (cargo.status !== 0 && failed === 0) failed += 1; // a build failure counts
for (const match of (cargo.stdout ?? "").matchAll(/^test (\S+) \.\.\. FAILED$/gm)) failures.push(`cargo: ${match[1]}`);
if (cargo.status !== 0) failures.push("cargo test (see above)");

// 2b. Lints: clippy over the whole workspace, warnings denied (the
// workspace lints include SAFETY notes on every unsafe block). One test.
const clippy = run("cargo", ["clippy", "--workspace", "--profile", "quick", "--all-targets", "--color", "never", "--", "-D", "warnings"]);
if (clippy.status === 0) passed += 1;
else {
  failed += 1;
  failures.push("cargo clippy (see above)");
}

// 3. Fuzzing: a short bounded pass of every cargo-fuzz target (the long
// runs' results are in RELIABILITY.md). One test per target.
const fuzz = run("bash", ["scripts/fuzz.sh", process.env.FUZZ_SECONDS ?? "10"], { capture: true });
for (const match of (fuzz.stdout ?? "").matchAll(/^fuzz \S+: .*, (ok|CRASH)$/gm)) {
  if (match[1] === "ok") passed += 1;
  else {
    failed += 1;
    failures.push(`fuzz: ${match[0]}`);
  }
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
  failedIn(summary, "vitest");
  if (vitest.status !== 0 && summary.numFailedTests === 0) failed += 1; // suite-level failure
} else {
  failed += 1;
  failures.push("vitest (no report)");
}
rmSync(reportDir, { recursive: true, force: true });

// ---- Platforms (issue 14): steps 5-8, each counted on its own line and in the total.
const platformCounts = [];
let stepStart = Date.now();
/** Adds a step's counts to the total and prints them, with the time since the previous step ended. */
function counted(name, stepPassed, stepFailed, seconds = Math.round((Date.now() - stepStart) / 1000)) {
  passed += stepPassed;
  failed += stepFailed;
  if (stepFailed > 0 && !failures.some((line) => line.startsWith(`${name}:`))) failures.push(`${name}: ${stepFailed} failed (see above)`);
  platformCounts.push(`${name}: ${stepPassed} passed, ${stepFailed} failed (${seconds} s)`);
  console.log(`\n${platformCounts.at(-1)}`);
  stepStart = Date.now();
}
/** Runs vitest with `node` (first on PATH, for the suites' children too); its counts, a failed run counting once. */
function vitestOn(node, args, env = {}, where = `vitest on ${node}`) {
  const dir = mkdtempSync(join(tmpdir(), "pbn-vitest-"));
  const json = join(dir, "report.json");
  const result = run(node, [join(root, "node_modules", "vitest", "vitest.mjs"), "run", "--reporter=dot", "--reporter=json", `--outputFile.json=${json}`, ...args], {
    env: { ...process.env, PATH: `${dirname(node)}${delimiter}${process.env.PATH}`, ...env },
  });
  const summary = existsSync(json) ? JSON.parse(readFileSync(json, "utf8")) : { numPassedTests: 0, numFailedTests: 0 };
  failedIn(summary, where);
  rmSync(dir, { recursive: true, force: true });
  const ran = summary.numPassedTests + summary.numFailedTests;
  return [summary.numPassedTests, summary.numFailedTests + (result.status !== 0 && summary.numFailedTests === 0 ? 1 : 0) + (ran === 0 ? 1 : 0)];
}

// 5. Workflows: actionlint on .github/workflows (one test per file).
stepStart = Date.now();
{
  const lint = run("node", ["scripts/lint-workflows.mjs"], { capture: true });
  const match = /^actionlint: (\d+) passed, (\d+) failed$/m.exec(lint.stdout ?? "");
  counted("actionlint", match ? Number(match[1]) : 0, match ? Number(match[2]) : 1);
}

// 6. Building from the package's own sources where no prebuilt binary is
// installed (a release build, so apart from the suites whose timings it
// would disturb).
counted("source build", ...vitestOn(process.execPath, ["__test__/source-build.test.ts"], { PBN_SOURCE_BUILD: "1" }, "source build"));

// 7. On every other tested Node major (official builds from the npm
// registry, cached in node_modules/.cache): the suites of
// scripts/test-plan.mjs, what can differ there (the rest is the same on every
// Node and ran once above; external-strings.test.ts checks every version
// from the one above).
if (process.platform !== "linux" || !["x64", "arm64"].includes(process.arch)) {
  console.log("\nvitest on the other Node majors: skipped (the npm registry's Node builds are for Linux)");
} else {
  const { nodeBinary, testedNodeMajors } = await import("./node-binaries.mjs");
  for (const major of testedNodeMajors.filter((m) => m !== process.versions.node.split(".")[0])) {
    let node;
    try {
      node = nodeBinary(process.arch, major);
    } catch (error) {
      console.error(`Node ${major}: ${error.message}`);
      counted(`vitest on Node ${major}`, 0, 1);
      continue;
    }
    counted(`vitest on Node ${major}`, ...vitestOn(node, otherNodeMajorArgs(), {}, `vitest on Node ${major}`));
  }
}

// 8. linux-arm64-gnu: built here, tested under qemu (scripts/cross-arm64.sh
// prints `arm64 <part>: N passed, N failed` per part).
if (process.platform !== "linux" || process.arch !== "x64") {
  console.log("\nlinux-arm64: skipped (cross-built on Linux x64 only)");
} else {
  const crossStart = Date.now();
  const cross = run("bash", ["scripts/cross-arm64.sh"], { capture: true });
  const crossSeconds = Math.round((Date.now() - crossStart) / 1000);
  let parts = 0;
  for (const match of (cross.stdout ?? "").matchAll(/^arm64 (\S+): (\d+) passed, (\d+) failed \((\d+) s\)$/gm)) {
    counted(`arm64 ${match[1]}`, Number(match[2]), Number(match[3]), Number(match[4]));
    parts += 1;
  }
  if (cross.status !== 0 && !/^arm64 \S+: \d+ passed, [1-9]\d* failed/m.test(cross.stdout ?? "")) counted("arm64 (script)", 0, 1);
  if (parts === 0 && cross.status === 0) counted("arm64 (no parts ran)", 0, 1);
  platformCounts.push(`(arm64 in all, with its set-up: ${crossSeconds} s)`);
}
// 9. The publish rehearsal (issue 23): the release's publish script to a
// local Verdaccio, then npm, pnpm, Yarn 4 (node-modules and PnP) and Bun
// install it in fresh projects (linux-arm64-gnu too when step 8 built it).
// One count per manager and step.
if (process.platform !== "linux") {
  console.log("\npublish rehearsal: skipped (the platform packages built here are Linux's)");
} else {
  const rehearsal = run(process.execPath, ["scripts/rehearse-publish.mjs"], { capture: true });
  const match = /^rehearsal: (\d+) passed, (\d+) failed \((\d+) s\)$/m.exec(rehearsal.stdout ?? "");
  for (const line of (rehearsal.stdout ?? "").matchAll(/^rehearsal FAILED: (.*)$/gm)) failures.push(`rehearsal: ${line[1]}`);
  if (match) counted("publish rehearsal", Number(match[1]), Number(match[2]) + (rehearsal.status !== 0 && match[2] === "0" ? 1 : 0), Number(match[3]));
  else counted("publish rehearsal", 0, 1);
}
// 9b. The Python publish rehearsal: the host channel's module (python/,
// docs/host-channel.md) built and uploaded by the release's own script to
// a local package index, then installed with pip and uv, from the index and
// from the npm package's files, into fresh virtualenvs, and tried there
// (import, typed marker, a conversation with a host tool). One count per
// installer and step.
if (process.platform !== "linux") {
  console.log("\nPython publish rehearsal: skipped (Linux only, as the npm one)");
} else {
  const rehearsal = run(process.execPath, ["scripts/rehearse-publish-python.mjs"], { capture: true });
  const match = /^rehearsal-python: (\d+) passed, (\d+) failed \((\d+) s\)$/m.exec(rehearsal.stdout ?? "");
  for (const line of (rehearsal.stdout ?? "").matchAll(/^rehearsal-python FAILED: (.*)$/gm)) failures.push(`rehearsal-python: ${line[1]}`);
  if (match) counted("Python publish rehearsal", Number(match[1]), Number(match[2]) + (rehearsal.status !== 0 && match[2] === "0" ? 1 : 0), Number(match[3]));
  else counted("Python publish rehearsal", 0, 1);
}
// 10. Bun and Deno as runtimes (issue 23): tests/runtime's program (the
// codec, streams, spawn and containment, the session with the real backend,
// the testing kit) on the packed, installed package, under each pinned
// runtime, with Node as the control. One count per test and runtime.
if (process.platform !== "linux" || !["x64", "arm64"].includes(process.arch)) {
  console.log("\nruntimes: skipped (the pinned Bun and Deno builds are fetched for Linux)");
} else {
  const runtimes = run(process.execPath, ["scripts/test-runtimes.mjs"], { capture: true });
  const out = runtimes.stdout ?? "";
  for (const line of out.matchAll(/^runtime (\S+) FAILED: (.*)$/gm)) failures.push(`runtime ${line[1]}: ${line[2]}`);
  let parts = 0;
  for (const match of out.matchAll(/^runtime (\S+): (\d+) passed, (\d+) failed \(([\d.]+) s\)$/gm)) {
    counted(`runtime ${match[1]}`, Number(match[2]), Number(match[3]), Math.round(Number(match[4])));
    parts += 1;
  }
  if (parts === 0 || (runtimes.status !== 0 && !/^runtime \S+: \d+ passed, [1-9]\d* failed/m.test(out))) counted("runtimes (script)", 0, 1);
}
console.log(`\nPlatform steps:\n  ${platformCounts.join("\n  ")}`);
console.log(`\nStep times (${Math.round(process.uptime())} s in all):\n${stepTimes.join("\n")}`);
// ---- end of the platform steps.

if (failures.length > 0) console.log(`\nFailed:\n  ${failures.join("\n  ")}`);
console.log(`\n${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
