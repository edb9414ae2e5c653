#!/usr/bin/env node
// Node.js binaries and native npm packages for other Node versions and
// CPUs (and other npm packages a test step runs), from the npm registry,
// cached under node_modules/.cache.
//
//   node scripts/node-binaries.mjs node <x64|arm64> <version or range>...
//       prints, per argument, the path of that Node's `node` binary
//       (official builds, npm packages `node-linux-<arch>`; `npm install`
//       refuses a foreign CPU's package, so it is packed and unpacked)
//   node scripts/node-binaries.mjs twins <arm64>
//       unpacks, next to each installed `*-linux-x64-gnu` package, its
//       `*-linux-<arch>-gnu` twin at the version package-lock.json lists, so
//       that an emulated Node finds vitest's and vite's native bindings
//
// Both are idempotent: what is cached or unpacked already is not fetched.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, renameSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
export const cacheDir = join(root, "node_modules", ".cache", "process-bridge-native");

/**
 * The Node.js majors the JavaScript suites run on (`npm test`), and the
 * oldest release `engines` admits (20.3.0: before the Node-API external
 * strings of 20.4, so the addon's fallback is what runs there). package.json's
 * `engines` says the same.
 */
export const testedNodeMajors = ["20", "22", "24"];
export const oldestNode = "20.3.0";

/** `npm pack` of one package into `dir`; returns the tarball's path and the resolved version. */
function pack(spec, dir) {
  mkdirSync(dir, { recursive: true });
  const out = execFileSync("npm", ["pack", spec, "--json", "--pack-destination", dir, "--loglevel=error"], {
    cwd: dir,
    encoding: "utf8",
  });
  const [info] = JSON.parse(out);
  return { tarball: join(dir, info.filename), version: info.version };
}

/** Unpacks an npm tarball's `package/` folder as `dest` (atomically: a rename at the end). */
function unpack(tarball, dest) {
  const staging = mkdtempSync(`${dest}.partial-`);
  execFileSync("tar", ["-xzf", tarball, "-C", staging, "--strip-components=1"]);
  rmSync(dest, { recursive: true, force: true });
  renameSync(staging, dest);
  rmSync(tarball, { force: true });
}

/**
 * The `node` binary of the official Linux build of `spec` (an exact version
 * like 20.3.0, or a major like 22 for its latest release) for `arch`.
 */
export function nodeBinary(arch, spec) {
  const base = join(cacheDir, "node");
  const exact = /^\d+\.\d+\.\d+$/.test(spec) ? spec : null;
  if (exact) {
    const binary = join(base, `${arch}-${exact}`, "bin", "node");
    if (existsSync(binary)) return binary;
  }
  const latest = exact ?? latestRelease(arch, spec, base);
  const dest = join(base, `${arch}-${latest}`);
  const binary = join(dest, "bin", "node");
  if (!existsSync(binary)) {
    const { tarball } = pack(`node-linux-${arch}@${latest}`, join(base, "downloads"));
    unpack(tarball, dest);
  }
  return binary;
}

/**
 * The newest release of major `spec`: asked of the registry (one small
 * request), or, when that fails (offline), the newest one in the cache.
 */
function latestRelease(arch, spec, base) {
  let versions;
  try {
    const answer = execFileSync("npm", ["view", `node-linux-${arch}@${spec}`, "version", "--json", "--loglevel=error"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "pipe"],
    });
    versions = [JSON.parse(answer)].flat();
  } catch (error) {
    const prefix = `${arch}-${spec}.`;
    versions = existsSync(base) ? readdirSync(base).filter((d) => d.startsWith(prefix)).map((d) => d.slice(arch.length + 1)) : [];
    if (versions.length === 0) throw error;
  }
  return versions.sort(compareVersions).at(-1);
}

function compareVersions(a, b) {
  const pa = a.split(".").map(Number);
  const pb = b.split(".").map(Number);
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return pa[i] - pb[i];
  return 0;
}

/** An npm package (exact `name@version`) unpacked in the cache without its dependencies; returns its folder. */
export function npmPackage(spec) {
  const dest = join(cacheDir, "packages", spec.replace("/", "+"));
  if (!existsSync(join(dest, "package.json"))) {
    const { tarball } = pack(spec, join(cacheDir, "downloads"));
    mkdirSync(dirname(dest), { recursive: true });
    unpack(tarball, dest);
  }
  return dest;
}

/** Unpacks the `arch` twins of the installed linux-x64-gnu native packages; returns their names. */
export function unpackTwins(arch) {
  const lock = JSON.parse(readFileSync(join(root, "package-lock.json"), "utf8")).packages;
  const twins = [];
  for (const [path, entry] of Object.entries(lock)) {
    if (!path.endsWith("-linux-x64-gnu") || !existsSync(join(root, path))) continue;
    const twinPath = path.replace(/-linux-x64-gnu$/, `-linux-${arch}-gnu`);
    const twin = lock[twinPath];
    if (!twin) continue;
    const dest = join(root, twinPath);
    const installed = join(dest, "package.json");
    if (!existsSync(installed) || JSON.parse(readFileSync(installed, "utf8")).version !== twin.version) {
      const name = twinPath.slice(twinPath.lastIndexOf("node_modules/") + "node_modules/".length);
      const { tarball } = pack(`${name}@${twin.version}`, join(cacheDir, "downloads"));
      mkdirSync(dirname(dest), { recursive: true });
      unpack(tarball, dest);
    }
    twins.push(`${twinPath.replace(/^node_modules\//, "")}@${twin.version} (for ${entry.version})`);
  }
  return twins;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [command, arch, ...specs] = process.argv.slice(2);
  if (!["x64", "arm64"].includes(arch ?? "")) {
    console.error("usage: node scripts/node-binaries.mjs node <x64|arm64> <version>... | twins <arm64>");
    process.exit(2);
  }
  if (command === "node") {
    for (const spec of specs) console.log(nodeBinary(arch, spec));
  } else if (command === "twins") {
    for (const twin of unpackTwins(arch)) console.log(twin);
  } else {
    console.error(`unknown command ${command}`);
    process.exit(2);
  }
}
