#!/usr/bin/env node
// Builds the native supervisor (crates/bridge-supervisor) and puts it beside
// the addon, as `process-bridge-supervisor.<platform>` in the package root,
// where lib/spawn/supervisor.ts looks for it.
//   node scripts/build-supervisor.mjs [--release | --profile <name>] [--target <triple>]
import { spawnSync } from "node:child_process";
import { copyFileSync, chmodSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
if (process.platform === "win32") {
  console.log("build-supervisor: no supervisor on Windows");
  process.exit(0);
}
const profileAt = process.argv.indexOf("--profile");
const profile = profileAt >= 0 ? process.argv[profileAt + 1] : process.argv.includes("--release") ? "release" : "dev";
const targetAt = process.argv.indexOf("--target");
const target = targetAt >= 0 ? process.argv[targetAt + 1] : undefined;
const args = ["build", "-p", "bridge-supervisor", "--profile", profile, ...(target ? ["--target", target] : [])];
const built = spawnSync("cargo", args, { cwd: root, stdio: "inherit" });
if (built.status !== 0) process.exit(built.status ?? 1);
const { platformName } = await import(join(root, "dist", "spawn", "supervisor.js")).catch(() => ({ platformName: undefined }));
const platform = process.env.SUPERVISOR_PLATFORM ?? (platformName ? platformName() : undefined);
if (!platform) {
  console.error("build-supervisor: build the TypeScript layer first (dist/), or set SUPERVISOR_PLATFORM");
  process.exit(1);
}
const from = join(root, "target", ...(target ? [target] : []), profile === "dev" ? "debug" : profile, "process-bridge-supervisor");
const to = join(root, `process-bridge-supervisor.${platform}`);
copyFileSync(from, to);
chmodSync(to, 0o755);
console.log(`build-supervisor: ${to}`);
