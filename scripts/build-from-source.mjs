#!/usr/bin/env node
// Builds the native addon from the Rust sources this package ships, for a
// platform without a prebuilt binary (or to use your own build):
//
//   node node_modules/@agentlanejs/process-bridge-native/scripts/build-from-source.mjs
//
// Needs a Rust toolchain (cargo, Rust 1.88 or newer) and a C linker. Runs
// `cargo build --release --locked` on the package's own Cargo.toml and
// Cargo.lock, then puts the library where the package's loader (index.js)
// looks first for this platform: `process-bridge-native.<platform>.node` in
// the package folder; on Unix, the process supervisor too
// (`process-bridge-supervisor.<platform>` beside it, where
// lib/spawn/supervisor.ts looks). Cargo's output goes to `target/` there, or to
// CARGO_TARGET_DIR; it can be deleted afterwards.
import { spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, renameSync } from "node:fs";
import Module, { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const packageDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);

/**
 * The file name the loader tries first on this machine, asked of the loader
 * itself (it knows the platform, CPU and C library names napi-rs uses), by
 * watching which `./process-bridge-native.*.node` it requires.
 */
function wantedFileName() {
  const asked = [];
  const original = Module.prototype.require;
  Module.prototype.require = function (id) {
    if (/^\.\/process-bridge-native\.[\w-]+\.node$/.test(id)) asked.push(id.slice(2));
    return original.apply(this, arguments);
  };
  try {
    require(join(packageDir, "index.js"));
  } catch {
    // Expected when no binary loads yet.
  } finally {
    Module.prototype.require = original;
  }
  if (asked.length === 0) {
    throw new Error(`the loader asked for no process-bridge-native.*.node file on ${process.platform}-${process.arch}: napi-rs has no name for this platform`);
  }
  return asked[0];
}

const fileName = wantedFileName();
console.log(`building ${fileName} from the sources in ${packageDir}`);

const cargo = process.env.CARGO ?? "cargo";
const build = spawnSync(
  cargo,
  ["build", "--release", "--locked", "-p", "process-bridge-native", "--message-format=json-render-diagnostics"],
  { cwd: packageDir, stdio: ["ignore", "pipe", "inherit"], encoding: "utf8", maxBuffer: 256 * 1024 * 1024 },
);
if (build.error) {
  console.error(`could not run ${cargo} (${build.error.message}): install Rust from https://rustup.rs, then run this again`);
  process.exit(1);
}
if (build.status !== 0) {
  console.error(`cargo build failed (exit ${build.status})`);
  process.exit(1);
}
// The cdylib's path, from cargo's own report (lib prefix and suffix differ per OS).
const library = build.stdout
  .split("\n")
  .filter((line) => line.startsWith("{"))
  .map((line) => JSON.parse(line))
  .filter((message) => message.reason === "compiler-artifact" && message.target?.name === "process_bridge_native" && message.target.kind.includes("cdylib"))
  .flatMap((message) => message.filenames)
  .find((file) => /\.(so|dylib|dll)$/.test(file));
if (!library || !existsSync(library)) {
  console.error("cargo built no process_bridge_native library");
  process.exit(1);
}
const destination = join(packageDir, fileName);
// A fresh file renamed into place: a process may have the old one mapped.
const staging = `${destination}.${process.pid}.tmp`;
copyFileSync(library, staging);
renameSync(staging, destination);
console.log(`wrote ${destination}`);

// The supervisor (not on Windows): without it, spawnBridgeProcess falls back
// to a process group, which a backend's own setsid() escapes.
if (process.platform !== "win32") {
  const supervisor = spawnSync(
    cargo,
    ["build", "--release", "--locked", "-p", "bridge-supervisor", "--message-format=json-render-diagnostics"],
    { cwd: packageDir, stdio: ["ignore", "pipe", "inherit"], encoding: "utf8", maxBuffer: 256 * 1024 * 1024 },
  );
  if (supervisor.status !== 0) {
    console.error(`cargo build of the supervisor failed (exit ${supervisor.status})`);
    process.exit(1);
  }
  const executable = supervisor.stdout
    .split("\n")
    .filter((line) => line.startsWith("{"))
    .map((line) => JSON.parse(line))
    .find((message) => message.reason === "compiler-artifact" && message.target?.name === "process-bridge-supervisor" && message.executable)?.executable;
  if (!executable) {
    console.error("cargo built no process-bridge-supervisor executable");
    process.exit(1);
  }
  const { supervisorFileName } = require(join(packageDir, "dist", "spawn", "supervisor.js"));
  const target = join(packageDir, supervisorFileName());
  const staged = `${target}.${process.pid}.tmp`;
  copyFileSync(executable, staged);
  chmodSync(staged, 0o755);
  renameSync(staged, target);
  console.log(`wrote ${target}`);
}
