#!/usr/bin/env node
// The publish rehearsal (`npm test`, issue 23): the release's own publish
// script (scripts/publish.mjs --rehearsal) publishes the main package and the
// platform packages built here to a local Verdaccio, and every package
// manager a user has installs `@agentlanejs/process-bridge-native` from it
// into a fresh project, as a new user would:
//
//   npm, pnpm, Yarn 4 (node-modules linker and Plug'n'Play), `bun add`;
//   steps per manager: install, only-its-platform (no other platform
//   package on disk), addon, resolve, exec-bit, conversation (the real
//   backend, supervised), testing (`./testing`), help and check
//   (`process-bridge-native check` through the manager's exec);
//   a broken release (a platform package whose `files` lost the
//   supervisor): `check` must fail, naming the missing supervisor;
//   Yarn 4's age gate on release day: the Yarn projects exempt the package
//   as the README says (`npmPreapprovedPackages`), and one without the
//   exemption must be refused with YN0016;
//   linux-arm64-gnu when scripts/cross-arm64.sh has built it (addon and
//   supervisor in target/cross-arm64/): `npm install --cpu=arm64` resolves it,
//   and the probe runs on the emulated arm64 Node.
//
//   node scripts/rehearse-publish.mjs
//
// A failure prints `rehearsal FAILED: <manager> <step>: <detail>`; the last
// line is `rehearsal: N passed, N failed (S s)`, one count per manager and
// step. PBN_REHEARSAL_BREAK=files|mode publishes the real release broken
// (supervisor left out of `files` / not executable), to see the rehearsal
// fail. The tools are pinned in scripts/tools.mjs and cached.
import { spawn } from "node:child_process";
import { chmodSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { publish } from "./publish.mjs";
import { exec, freePort, steps, tail } from "./rehearsal.mjs";
import { installTools } from "./tools.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const PKG = "@agentlanejs/process-bridge-native";
const version = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version;
const python = join(root, ".venv", "bin", "python");
const backendDir = join(root, "examples", "backend");
const probe = join(root, "tests", "rehearsal", "probe.cjs");
const work = mkdtempSync(join(tmpdir(), "pbn-rehearsal-"));
const { record, finish } = steps("rehearsal");

// ---- the registry ----------------------------------------------------------

async function startRegistry(verdaccio) {
  const dir = join(work, "verdaccio");
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const config = join(dir, "config.yaml");
  // No uplinks: the package has no dependencies, and nothing may come from elsewhere.
  writeFileSync(
    config,
    [
      `storage: ${join(dir, "storage")}`,
      "auth:",
      "  htpasswd:",
      `    file: ${join(dir, "htpasswd")}`,
      "uplinks: {}",
      "packages:",
      "  '**':",
      "    access: $all",
      "    publish: $authenticated",
      "max_body_size: 200mb",
      "log: { type: stdout, format: pretty, level: warn }",
      "",
    ].join("\n"),
  );
  const url = `http://127.0.0.1:${port}`;
  const log = join(dir, "verdaccio.log");
  const child = spawn(process.execPath, [verdaccio, "--config", config, "--listen", `127.0.0.1:${port}`], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  const stop = () => {
    writeFileSync(log, output);
    if (child.exitCode === null) child.kill("SIGTERM");
  };
  for (let waited = 0; ; waited += 100) {
    if (child.exitCode !== null || waited > 30_000) {
      stop();
      throw new Error(`Verdaccio did not start on ${url}: ${output.slice(-2000)}`);
    }
    try {
      if ((await fetch(`${url}/-/ping`)).ok) break;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  const answer = await fetch(`${url}/-/user/org.couchdb.user:rehearsal`, {
    method: "PUT",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ name: "rehearsal", password: "rehearsal-password", type: "user", roles: [], date: new Date().toISOString() }),
  });
  const { token } = await answer.json();
  if (!token) throw new Error(`Verdaccio gave no token (HTTP ${answer.status})`);
  const npmrc = join(dir, "npmrc");
  writeFileSync(npmrc, `registry=${url}/\n//127.0.0.1:${port}/:_authToken=${token}\n`);
  return { url, npmrc, stop };
}

// ---- what is published -------------------------------------------------------

/** The builds of this machine, as the release's artifacts: x64 always, arm64 when cross-arm64.sh built both parts. */
function collectArtifacts() {
  const dir = join(work, "artifacts");
  mkdirSync(join(dir, "bindings-x86_64-unknown-linux-gnu"), { recursive: true });
  const x64 = join(dir, "bindings-x86_64-unknown-linux-gnu");
  for (const file of ["process-bridge-native.linux-x64-gnu.node", "process-bridge-supervisor.linux-x64-gnu"]) {
    if (!existsSync(join(root, file))) throw new Error(`${file} is not built (npm run build)`);
    copyFileSync(join(root, file), join(x64, file));
  }
  const cross = join(root, "target", "cross-arm64");
  const addon = join(cross, "process-bridge-native.linux-arm64-gnu.node");
  const supervisor = [join(cross, "process-bridge-supervisor.linux-arm64-gnu"), join(cross, "cargo", "aarch64-unknown-linux-gnu", "quick", "process-bridge-supervisor")].find(existsSync);
  if (!existsSync(addon) || !supervisor) {
    console.log(
      `rehearsal: linux-arm64-gnu not published: ${!existsSync(addon) ? `no ${addon}` : "no arm64 supervisor in target/cross-arm64/"} (scripts/cross-arm64.sh builds it); x64 only`,
    );
    return { dir, arm64: false };
  }
  const arm = join(dir, "bindings-aarch64-unknown-linux-gnu");
  mkdirSync(arm, { recursive: true });
  copyFileSync(addon, join(arm, "process-bridge-native.linux-arm64-gnu.node"));
  copyFileSync(supervisor, join(arm, "process-bridge-supervisor.linux-arm64-gnu"));
  return { dir, arm64: true };
}

/** Breaks the staged linux-x64-gnu package as a bad release would: `files` without the supervisor, or the supervisor not executable. */
function breakPackage(staging, how, newVersion) {
  const platformDir = join(staging, "npm", "linux-x64-gnu");
  const manifestPath = join(platformDir, "package.json");
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
  if (how === "files") manifest.files = manifest.files.filter((file) => !file.startsWith("process-bridge-supervisor."));
  if (how === "mode") chmodSync(join(platformDir, "process-bridge-supervisor.linux-x64-gnu"), 0o644);
  writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
  if (newVersion) {
    for (const path of [join(staging, "package.json"), ...readdirSync(join(staging, "npm")).map((p) => join(staging, "npm", p, "package.json"))]) {
      const json = JSON.parse(readFileSync(path, "utf8"));
      json.version = newVersion;
      writeFileSync(path, `${JSON.stringify(json, null, 2)}\n`);
    }
  }
}

// ---- the package managers ----------------------------------------------------

/**
 * The platform packages on disk in a project (node_modules, .pnpm, Yarn's
 * cache and unplugged folders). Not the managers' own caches the rehearsal
 * puts in the project (`.cache-*`): Yarn keeps there the registry metadata
 * of every optional dependency it resolved, whose files are named after
 * the package but hold no package.
 */
function platformPackagesIn(dir, found = new Set(), depth = 0) {
  if (depth > 8) return found;
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return found;
  }
  for (const entry of entries) {
    if (depth === 0 && entry.name.startsWith(".cache-")) continue;
    const match = /process-bridge-native-((?:linux|darwin|win32)-(?:x64|arm64)(?:-(?:gnu|musl|msvc))?)/.exec(entry.name);
    if (match) found.add(match[1]);
    if (entry.isDirectory() && !entry.isSymbolicLink()) platformPackagesIn(join(dir, entry.name), found, depth + 1);
  }
  return found;
}

/**
 * A Yarn 4 project's .yarnrc.yml. `preapproved`: the README's exemption of
 * this package from Yarn's age gate (`npmMinimalAgeGate`), which a version
 * published minutes ago meets; without it the install must be refused.
 */
function yarnrc(registry, linker, preapproved = true) {
  return [
    `nodeLinker: ${linker}`,
    `npmRegistryServer: "${registry.url}"`,
    'unsafeHttpWhitelist: ["127.0.0.1"]',
    ...(preapproved ? ["npmPreapprovedPackages:", '  - "@agentlanejs/process-bridge-native*"'] : []),
    "enableGlobalCache: false",
    "enableTelemetry: false",
    "",
  ].join("\n");
}

function managers(tools, registry) {
  const bin = "process-bridge-native";
  const yarn = (linker) => ({
    files: { ".yarnrc.yml": yarnrc(registry, linker), "yarn.lock": "" },
    install: (spec) => [tools.yarn, ["add", spec]],
    exec: (args) => [tools.yarn, ["run", bin, ...args]],
    node: (args) => [tools.yarn, ["node", ...args]],
  });
  const node = (args) => [process.execPath, args];
  return {
    npm: {
      install: (spec, dir) => ["npm", ["install", spec, "--no-audit", "--no-fund", `--cache=${join(dir, ".cache-npm")}`]],
      exec: (args) => ["npx", ["--no-install", bin, ...args]],
      node,
    },
    pnpm: {
      install: (spec, dir) => [tools.pnpm, ["add", spec, `--store-dir=${join(dir, ".cache-pnpm")}`]],
      exec: (args) => [tools.pnpm, ["exec", bin, ...args]],
      node,
    },
    "yarn node-modules": yarn("node-modules"),
    "yarn pnp": yarn("pnp"),
    bun: {
      files: { "bunfig.toml": `[install]\nregistry = "${registry.url}/"\n` },
      install: (spec) => [tools.bun, ["add", spec]],
      exec: (args) => [tools.bun, ["x", bin, ...args]],
      node,
    },
  };
}

/** A fresh project with nothing else: the package.json, the manager's own files, the registry. */
function freshProject(name, files = {}) {
  const dir = join(work, name.replace(/\W+/g, "-"));
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "package.json"), `${JSON.stringify({ name: `rehearsal-${name.replace(/\W+/g, "-")}`, version: "1.0.0", private: true }, null, 2)}\n`);
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text);
  copyFileSync(probe, join(dir, "probe.cjs"));
  return dir;
}

/**
 * A manager's environment: this process's, without the npm_config_* that
 * `npm test` (npm run) sets for its scripts (a user's project has none; with
 * npm's `userconfig` and `registry` among them pnpm asked the public
 * registry), and with the local registry's.
 */
function managerEnv(registry, dir) {
  const inherited = Object.fromEntries(Object.entries(process.env).filter(([name]) => !/^npm_config_/i.test(name)));
  return {
    ...inherited,
    npm_config_registry: `${registry.url}/`,
    npm_config_userconfig: registry.npmrc,
    BUN_INSTALL_CACHE_DIR: join(dir, ".cache-bun"),
    YARN_GLOBAL_FOLDER: join(dir, ".cache-yarn"),
    UV_OFFLINE: "1",
  };
}

/** Runs the probe with a manager's runtime; records each of its steps. */
async function runProbe(name, platform, command, env, dir) {
  const result = await exec(command[0], command[1], { cwd: dir, env });
  const steps = result.stdout.split("\n").filter((line) => line.startsWith("{")).map((line) => JSON.parse(line));
  for (const step of steps) record(name, step.step, step.ok, step.ok ? "" : step.detail);
  if (steps.length === 0 || result.code !== 0) record(name, "probe", false, tail(result));
}

async function rehearseManager(name, manager, registry) {
  const dir = freshProject(name, manager.files);
  const env = managerEnv(registry, dir);
  const install = await exec(...manager.install(PKG, dir), { cwd: dir, env });
  record(name, "install", install.code === 0, install.code === 0 ? "" : tail(install));
  if (install.code !== 0) return;
  const found = [...platformPackagesIn(dir)].sort();
  record(name, "only-its-platform", found.length === 1 && found[0] === "linux-x64-gnu", `found: ${found.join(", ") || "none"}`);
  await runProbe(name, "linux-x64-gnu", manager.node(["probe.cjs", "linux-x64-gnu", python, backendDir]), env, dir);
  const help = await exec(...manager.exec(["check", "--help"]), { cwd: dir, env });
  record(name, "help", help.code === 0 && help.stdout.startsWith("usage: process-bridge-native check"), help.code === 0 ? "" : tail(help));
  const check = await exec(...manager.exec(["check", "--project-dir", backendDir, "--", python, "-m", "agentlane_process_bridge", "--app", "demo_app:create_backend"]), { cwd: dir, env });
  const checked = check.code === 0 && check.stdout.includes("supervisor ok: the backend ran supervised") && /check passed\n$/.test(check.stdout);
  record(name, "check", checked, checked ? "" : tail(check));
}

/** Release day under Yarn 4's default age gate, without the README's exemption: refused with YN0016. */
async function rehearseYarnAgeGate(tools, registry) {
  const name = "yarn (age gate)";
  const dir = freshProject(name, { ".yarnrc.yml": yarnrc(registry, "node-modules", false), "yarn.lock": "" });
  const install = await exec(tools.yarn, ["add", PKG], { cwd: dir, env: managerEnv(registry, dir) });
  const refused = install.code !== 0 && /YN0016/.test(install.stdout + install.stderr);
  record(name, "refused on release day (YN0016)", refused, refused ? "" : `expected a YN0016 refusal; ${tail(install)}`);
}

/** The broken release: the check must fail and say why. */
async function rehearseBroken(registry, brokenVersion) {
  const name = "npm (broken release)";
  const dir = freshProject(name);
  const env = managerEnv(registry, dir);
  const install = await exec("npm", ["install", `${PKG}@${brokenVersion}`, "--no-audit", "--no-fund", `--cache=${join(dir, ".cache-npm")}`], { cwd: dir, env });
  record(name, "install", install.code === 0, install.code === 0 ? "" : tail(install));
  if (install.code !== 0) return;
  const check = await exec("npx", ["--no-install", "process-bridge-native", "check", "--project-dir", backendDir, "--", python, "-m", "agentlane_process_bridge", "--app", "demo_app:create_backend"], { cwd: dir, env });
  const failedRight = check.code === 1 && check.stdout.includes("supervisor FAILED (supervisor-missing, ENOENT)") && /check failed\n$/.test(check.stdout);
  record(name, "check fails (supervisor missing)", failedRight, failedRight ? "" : `expected exit 1 naming the missing supervisor; ${tail(check)}`);
}

/** linux-arm64-gnu: npm resolves it for an arm64 install; the probe runs on arm64 Node under qemu. */
async function rehearseArm64(registry) {
  const name = "npm arm64";
  const dir = freshProject(name);
  const env = managerEnv(registry, dir);
  const install = await exec("npm", ["install", PKG, "--cpu=arm64", "--os=linux", "--libc=glibc", "--no-audit", "--no-fund", `--cache=${join(dir, ".cache-npm")}`], { cwd: dir, env });
  record(name, "install", install.code === 0, install.code === 0 ? "" : tail(install));
  if (install.code !== 0) return;
  const found = [...platformPackagesIn(dir)].sort();
  record(name, "only-its-platform", found.length === 1 && found[0] === "linux-arm64-gnu", `found: ${found.join(", ") || "none"}`);
  if (!readFileSync("/proc/sys/fs/binfmt_misc/qemu-aarch64", { encoding: "utf8", flag: "r" }).startsWith("enabled")) {
    record(name, "qemu", false, "binfmt_misc has no enabled qemu-aarch64 entry");
    return;
  }
  const { nodeBinary } = await import("./node-binaries.mjs");
  const armNode = nodeBinary("arm64", process.env.ARM64_NODE ?? "20");
  // Children (the testing kit's backend) run on the same emulated Node.
  const armEnv = { ...env, PATH: `${dirname(armNode)}:${env.PATH}` };
  await runProbe(name, "linux-arm64-gnu", [armNode, ["probe.cjs", "linux-arm64-gnu", python, backendDir]], armEnv, dir);
}

// ---- the run -------------------------------------------------------------------

async function main() {
  const tools = installTools();
  const artifacts = collectArtifacts();
  const registry = await startRegistry(tools.verdaccio);
  try {
    // The registry's token, for every npm of this run (the publishes in this process too).
    process.env.NPM_CONFIG_USERCONFIG = registry.npmrc;
    const env = process.env;
    const breakAs = process.env.PBN_REHEARSAL_BREAK;
    if (breakAs) {
      console.log(`rehearsal: PBN_REHEARSAL_BREAK=${breakAs}: the release is published broken`);
      publish({ artifacts: artifacts.dir, registry: `${registry.url}/`, rehearsal: true, beforePublish: (staging) => breakPackage(staging, breakAs) });
    } else {
      // The release's publish step, as release.yml runs it.
      const published = await exec(process.execPath, [join(root, "scripts", "publish.mjs"), "--rehearsal", "--artifacts", artifacts.dir, "--registry", `${registry.url}/`], { cwd: root, env });
      process.stdout.write(published.stdout.replace(/^/gm, "  "));
      record("publish", "release", published.code === 0, published.code === 0 ? "" : tail(published));
      if (published.code !== 0) return;
    }
    const brokenVersion = `${version}-broken.0`;
    const log = [];
    publish({ artifacts: artifacts.dir, registry: `${registry.url}/`, rehearsal: true, tag: "broken", log: (line) => log.push(line), beforePublish: (staging) => breakPackage(staging, "files", brokenVersion) });

    const all = managers(tools, registry);
    await Promise.all([
      ...Object.entries(all).map(([name, manager]) => rehearseManager(name, manager, registry)),
      rehearseBroken(registry, brokenVersion),
      rehearseYarnAgeGate(tools, registry),
      artifacts.arm64 ? rehearseArm64(registry) : Promise.resolve(),
    ]);
  } finally {
    registry.stop();
  }
}

let crashed = false;
try {
  await main();
} catch (error) {
  crashed = true;
  record("rehearsal", "set-up", false, error instanceof Error ? error.message : String(error));
}
finish(work, crashed);
