#!/usr/bin/env node
// The main job (`npm run demo`): works on a fresh clone. Installs what is
// missing (npm packages, the addon (quick profile) and TypeScript build when their
// sources changed, the Python 3.12 virtualenv with agentlane==0.22.0), then
// runs the demo host: a real conversation with the demo backend.
import { spawn, spawnSync } from "node:child_process";
import { existsSync, readdirSync, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

function step(what, command, args) {
  const result = spawnSync(command, args, { cwd: root, stdio: ["ignore", "inherit", "inherit"] });
  if (result.error || result.status !== 0) {
    console.error(`demo: ${what} failed (${result.error?.message ?? `exit ${result.status}`}).`);
    pythonSetup?.kill();
    process.exit(1);
  }
}

/** Newest modification time of the files under `dir` (recursively). */
function newest(dir) {
  let time = 0;
  for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
    const path = join(dir, entry.name);
    time = Math.max(time, entry.isDirectory() ? newest(path) : statSync(join(root, path)).mtimeMs);
  }
  return time;
}

const built = (file) => (existsSync(join(root, file)) ? statSync(join(root, file)).mtimeMs : 0);

// The Python setup (mostly downloads and pip) runs beside the builds (CPU);
// a failed build ends it too.
let pythonSetup;
const python = new Promise((resolve) => {
  const child = (pythonSetup = spawn("bash", ["scripts/setup-python.sh"], { cwd: root, stdio: ["ignore", "inherit", "inherit"] }));
  child.on("error", (error) => resolve(error.message));
  child.on("exit", (code) => resolve(code === 0 ? null : `exit ${code}`));
});

if (!existsSync(join(root, "node_modules", ".package-lock.json"))) {
  step("installing npm packages", "npm", ["ci", "--no-audit", "--no-fund"]);
}
const addon = readdirSync(root).find((f) => f.endsWith(".node"));
if (!addon || built(addon) < Math.max(newest("src"), newest("crates/bridge-core/src"), newest("crates/bridge-host-channel/src"), newest("crates/bridge-prefork/src"), newest("crates/bridge-prefork/python"), newest("crates/bridge-launch/src"))) {
  // The quick profile (Cargo.toml): the release's optimisation without LTO
  // (a fresh build in about 95 s on an idle 2-core machine, the tools'
  // schema checks' jsonschema included); `npm run build`
  // replaces it with the release build.
  step("building the native addon", "npx", ["napi", "build", "--platform", "--profile", "quick", "--no-const-enum"]);
}
if (built("dist/index.js") < newest("lib")) {
  step("building the TypeScript layer", "npm", ["run", "--silent", "build:ts"]);
}
const pythonFailed = await python;
if (pythonFailed) {
  console.error(`demo: setting up the Python backend (Python 3.12 + agentlane==0.22.0) failed (${pythonFailed}).`);
  process.exit(1);
}

const host = spawnSync(process.execPath, [join(root, "examples", "demo-host.mjs"), ...process.argv.slice(2)], { stdio: "inherit" });
process.exit(host.status ?? 1);
