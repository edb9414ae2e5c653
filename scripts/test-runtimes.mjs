#!/usr/bin/env node
// The runtime suites (issue 23): tests/runtime/main.mjs, the public API as a
// user's program uses it (codec, streams, spawn and containment, the session
// with the real backend, stream(), the testing kit, what a runtime cannot
// do), run under Bun and Deno (pinned in scripts/tools.mjs, from the npm
// registry) and, as the control, under this Node.
//
// The package is installed as a user gets it: `npm pack` of the main package
// and of this platform's package (addon and supervisor, staged as the
// release's publish job stages them), both installed with npm into a fresh
// project; the suites are copied into it and import the package by name.
// Deno runs them with its npm support on that node_modules (`deno run -A`,
// which finds package.json and uses node_modules as it is) and its N-API.
//
//   node scripts/test-runtimes.mjs [bun|deno|node ...]
//
// Needs `npm run build` and `bash scripts/setup-python.sh`. Each runtime
// prints `runtime <name> FAILED: <test>: <why>` per failure and
// `runtime <name>: N passed, N failed (T s)`; the last line is
// `runtimes: N passed, N failed (T s)`, and the exit status is 1 on any
// failure (a runtime that hangs is killed after 150 s and counts as one; so
// does any process of a run still alive 3 s after it, found in /proc by a
// variable in its environment).
import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { stageSupervisor } from "./stage-supervisor.mjs";
import { installTools } from "./tools.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const started = Date.now();
const platform = `${process.platform}-${process.arch}${process.platform === "linux" ? "-gnu" : ""}`;
const wanted = process.argv.slice(2).length > 0 ? process.argv.slice(2) : ["node", "bun", "deno"];
const RUNTIME_TIMEOUT_MS = 150_000;

function npm(args, cwd) {
  return execFileSync("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], { cwd, encoding: "utf8" });
}

/** A fresh project with the packed main and platform packages installed and the suites in tests/runtime; and one with this checkout linked. */
function installProject(scratch) {
  for (const file of [`process-bridge-native.${platform}.node`, `process-bridge-supervisor.${platform}`, "dist/index.mjs"]) {
    if (!existsSync(join(root, file))) throw new Error(`${file} is missing: run \`npm run build\` first`);
  }
  const mainTarball = join(scratch, npm(["pack", "--pack-destination", scratch], root).trim().split("\n").at(-1));
  const staged = join(scratch, "platform-package");
  mkdirSync(staged);
  copyFileSync(join(root, "npm", platform, "package.json"), join(staged, "package.json"));
  copyFileSync(join(root, `process-bridge-native.${platform}.node`), join(staged, `process-bridge-native.${platform}.node`));
  stageSupervisor(join(root, `process-bridge-supervisor.${platform}`), staged);
  const platformTarball = join(scratch, npm(["pack", "--pack-destination", scratch], staged).trim().split("\n").at(-1));
  const project = join(scratch, "app");
  mkdirSync(project);
  writeFileSync(join(project, "package.json"), `${JSON.stringify({ name: "runtime-app", private: true, version: "1.0.0", type: "module" }, null, 2)}\n`);
  npm(["install", "--offline", mainTarball, platformTarball], project);
  cpSync(join(root, "tests", "runtime"), join(project, "tests", "runtime"), { recursive: true });
  // And as `npm install <dir>` links a package: a symlink to this checkout (Deno resolves it to outside node_modules).
  const linked = join(scratch, "linked");
  mkdirSync(linked);
  writeFileSync(join(linked, "package.json"), `${JSON.stringify({ name: "linked-app", private: true, version: "1.0.0", type: "module" }, null, 2)}\n`);
  npm(["install", "--offline", "--install-links=false", root], linked);
  return { project, linked };
}

/**
 * The processes still running whose environment carries `mark` (every
 * process a runtime's suites start inherits it, a setsid escapee too):
 * after a runtime has exited there must be none.
 */
function markedProcesses(mark) {
  const found = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!readFileSync(`/proc/${entry}/environ`, "latin1").split("\0").includes(mark)) continue;
      const stat = readFileSync(`/proc/${entry}/stat`, "latin1");
      if (stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) === "Z") continue;
      found.push(`${entry} ${readFileSync(`/proc/${entry}/cmdline`, "latin1").split("\0").join(" ").trim().slice(0, 120)}`);
    } catch {
      // Gone, or not ours to read.
    }
  }
  return found;
}

/** Waits up to `ms` for no marked process to be left; returns those left. */
async function leftBehind(mark, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    const left = markedProcesses(mark);
    if (left.length === 0 || Date.now() > deadline) return left;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Runs the suites under one runtime; resolves with its counts (its output passed through). */
function runSuites(name, command, args, project, env) {
  return new Promise((resolve) => {
    const child = spawn(command, args, { cwd: project, env, stdio: ["ignore", "pipe", "inherit"] });
    let output = "";
    child.stdout.on("data", (chunk) => {
      output += chunk;
      process.stdout.write(chunk);
    });
    const timer = setTimeout(() => {
      console.log(`runtime ${name} FAILED: killed after ${RUNTIME_TIMEOUT_MS / 1000} s (a hang)`);
      child.kill("SIGKILL");
    }, RUNTIME_TIMEOUT_MS);
    const done = (code, signal) => {
      clearTimeout(timer);
      const summary = output.match(new RegExp(`^runtime ${name}: (\\d+) passed, (\\d+) failed`, "m"));
      if (!summary) {
        console.log(`runtime ${name} FAILED: ended (${code ?? signal}) without its summary line`);
        resolve({ passed: 0, failed: 1 });
      } else {
        const counts = { passed: Number(summary[1]), failed: Number(summary[2]) };
        // A run whose tests passed but which did not exit 0 (or hung after its summary) is one failure more.
        if (counts.failed === 0 && code !== 0) {
          console.log(`runtime ${name} FAILED: exited ${code ?? signal} after its summary`);
          counts.failed = 1;
        }
        resolve(counts);
      }
    };
    child.on("error", (error) => {
      console.log(`runtime ${name} FAILED: could not start ${command}: ${error.message}`);
      done(-1, null);
    });
    child.on("close", done);
  });
}

async function main() {
  const tools = installTools();
  const commands = {
    node: [process.execPath, ["tests/runtime/main.mjs"]],
    bun: [tools.bun, ["tests/runtime/main.mjs"]],
    // -A: a user's host spawns processes, reads files and loads an addon (--allow-run, -read, -write, -env, -ffi).
    deno: [tools.deno, ["run", "-A", "tests/runtime/main.mjs"]],
  };
  const scratch = mkdtempSync(join(tmpdir(), "pbn-runtimes-"));
  let passed = 0;
  let failed = 0;
  try {
    const { project, linked } = installProject(scratch);
    const env = {
      ...process.env,
      PBN_LINKED_PROJECT: linked,
      PBN_REPO: root,
      PBN_PYTHON: join(root, ".venv", "bin", "python"),
      PBN_BACKEND_DIR: join(root, "examples", "backend"),
      // Deno's own update check and prompts would reach the network or a terminal.
      DENO_NO_UPDATE_CHECK: "1",
      DENO_NO_PROMPT: "1",
    };
    for (const name of wanted) {
      if (!commands[name]) throw new Error(`unknown runtime ${name} (bun, deno or node)`);
      const [command, args] = commands[name];
      const mark = `PBN_RUNTIME_MARK=${name}-${process.pid}-${Date.now()}`;
      const counts = await runSuites(name, command, args, project, { ...env, PBN_RUNTIME_MARK: mark.slice(mark.indexOf("=") + 1) });
      const left = await leftBehind(mark, 3_000);
      if (left.length > 0) {
        console.log(`runtime ${name} FAILED: ${left.length} processes outlived the run: ${left.join("; ")}`);
        counts.failed += 1;
        for (const line of left) {
          try {
            process.kill(Number(line.split(" ")[0]), "SIGKILL");
          } catch {
            // Gone.
          }
        }
      }
      passed += counts.passed;
      failed += counts.failed;
    }
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
  console.log(`runtimes: ${passed} passed, ${failed} failed (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  process.exit(failed === 0 ? 0 : 1);
}

main().catch((error) => {
  console.log(`runtimes FAILED: ${error instanceof Error ? error.message : error}`);
  console.log(`runtimes: 0 passed, 1 failed (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  process.exit(1);
});
