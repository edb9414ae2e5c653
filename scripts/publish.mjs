#!/usr/bin/env node
// Publishes the package: the main package and one package per platform
// (npm/<platform>/: its addon and, on Unix, its supervisor). The release
// job's publish step runs it (.github/workflows/release.yml), and so does
// the publish rehearsal (scripts/rehearse-publish.mjs, `npm test`), against
// a local registry: one script, so that the rehearsal publishes what a
// release publishes.
//
//   node scripts/publish.mjs --artifacts <dir> [--registry <url>] [--rehearsal] [--keep]
//
// <dir> holds the builds as the release's download-artifact leaves them
// (one level of subfolders): `process-bridge-native.<platform>.node` and
// `process-bridge-supervisor.<platform>`. `npm run build:ts` must have run.
//
// It works in a staging copy of what the main package publishes (`npm pack`'s
// file list, package.json and npm/), so the checkout is left as it was:
//  1. `napi artifacts` puts each addon in its platform package;
//  2. scripts/stage-supervisor.mjs puts each supervisor beside it;
//  3. `npm publish --access public`, whose prepublishOnly (`napi prepublish
//     -t npm`) publishes every platform package first and writes them into
//     the main package's optionalDependencies.
// A release needs all of package.json's napi targets built (napi refuses
// otherwise). `--rehearsal` publishes the platforms built here only: it
// narrows the napi targets in the staging copy (the way napi supports) and
// says which it skipped. A Unix platform whose supervisor is missing is
// refused in both modes: its package would run backends without containment.
import { execFileSync } from "node:child_process";
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { stageSupervisor } from "./stage-supervisor.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const ADDON = /^process-bridge-native\.([a-z0-9-]+)\.node$/;
const SUPERVISOR = /^process-bridge-supervisor\.([a-z0-9-]+)$/;

/** napi-rs's platform name of a target triple: x86_64-unknown-linux-gnu → linux-x64-gnu. */
export function platformOf(triple) {
  const [cpu, , os, abi] = triple.split("-");
  const arch = { x86_64: "x64", aarch64: "arm64" }[cpu] ?? cpu;
  if (os === "linux") return `linux-${arch}-${abi}`;
  if (os === "darwin") return `darwin-${arch}`;
  if (os === "windows") return `win32-${arch}-${abi}`;
  throw new Error(`publish: unknown target ${triple}`);
}

/** The addons and supervisors under `dir` (and its direct subfolders), by platform. */
export function artifactsIn(dir) {
  const found = { addons: new Map(), supervisors: new Map() };
  const look = (folder) => {
    for (const entry of readdirSync(folder)) {
      const path = join(folder, entry);
      if (statSync(path).isDirectory()) {
        if (folder === dir) look(path);
        continue;
      }
      const addon = ADDON.exec(entry);
      if (addon) found.addons.set(addon[1], path);
      const supervisor = SUPERVISOR.exec(entry);
      if (supervisor) found.supervisors.set(supervisor[1], path);
    }
  };
  look(dir);
  return found;
}

/**
 * Publishes from `artifacts` to `registry` (npm's configured one when
 * undefined). `beforePublish(stagingDir)` may change the staging copy
 * before `npm publish` (the rehearsal's broken package). Returns the
 * platforms published. `tag`: the dist-tag of every package (npm's
 * `latest` when undefined; a prerelease version needs one).
 */
export function publish({ artifacts, registry, rehearsal = false, keep = false, tag, beforePublish, log = console.log }) {
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  const found = artifactsIn(artifacts);
  const targets = manifest.napi.targets;
  const built = targets.filter((triple) => found.addons.has(platformOf(triple)));
  const missing = targets.filter((triple) => !built.includes(triple));
  if (built.length === 0) throw new Error(`publish: no process-bridge-native.<platform>.node under ${artifacts}`);
  if (missing.length > 0) {
    if (!rehearsal) throw new Error(`publish: no build for ${missing.map(platformOf).join(", ")} under ${artifacts} (a release publishes every napi target)`);
    log(`publish: --rehearsal: skipping ${missing.map(platformOf).join(", ")} (not built here)`);
  }
  for (const triple of built) {
    const platform = platformOf(triple);
    if (!platform.startsWith("win32-") && !found.supervisors.has(platform)) {
      throw new Error(`publish: no process-bridge-supervisor.${platform} under ${artifacts}: its platform package would run backends unsupervised`);
    }
  }

  const staging = mkdtempSync(join(tmpdir(), "pbn-publish-"));
  try {
    // What the main package publishes, as npm itself lists it.
    const [packed] = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts", "--loglevel=error"], { cwd: root, encoding: "utf8" }));
    for (const { path } of packed.files) {
      mkdirSync(dirname(join(staging, path)), { recursive: true });
      copyFileSync(join(root, path), join(staging, path));
    }
    const platforms = built.map(platformOf);
    for (const platform of platforms) cpSync(join(root, "npm", platform), join(staging, "npm", platform), { recursive: true });
    const staged = JSON.parse(readFileSync(join(staging, "package.json"), "utf8"));
    staged.napi.targets = built;
    writeFileSync(join(staging, "package.json"), `${JSON.stringify(staged, null, 2)}\n`);

    const env = { ...process.env, PATH: `${join(root, "node_modules", ".bin")}${delimiter}${process.env.PATH}` };
    if (registry) env.npm_config_registry = registry;
    // Read by napi's own `npm publish` of each platform package too.
    if (tag) env.npm_config_tag = tag;
    // A rehearsal creates no GitHub release (napi prepublish does, given GITHUB_REPOSITORY).
    if (rehearsal) delete env.GITHUB_REPOSITORY;
    const run = (command, args) => execFileSync(command, args, { cwd: staging, env, stdio: ["ignore", "inherit", "inherit"] });
    // napi prepublish reads the head commit's message (for that release): the
    // staging copy is a repository of one commit, the checkout's message.
    const message = execFileSync("git", ["log", "-1", "--pretty=%B"], { cwd: root, encoding: "utf8" });
    run("git", ["init", "--quiet"]);
    run("git", ["add", "--all"]);
    run("git", ["-c", "user.name=publish", "-c", "user.email=publish@localhost", "commit", "--quiet", "--no-verify", "--message", message]);
    run("napi", ["artifacts", "--output-dir", resolve(artifacts), "--npm-dir", "npm"]);
    for (const platform of platforms) {
      const supervisor = found.supervisors.get(platform);
      if (supervisor) log(`publish: ${stageSupervisor(supervisor, join(staging, "npm", platform))}`);
    }
    beforePublish?.(staging);
    run("npm", ["publish", "--access", "public", ...(registry ? ["--registry", registry] : [])]);
    log(`publish: ${staged.name}@${JSON.parse(readFileSync(join(staging, "package.json"), "utf8")).version} and ${platforms.join(", ")}${registry ? ` to ${registry}` : ""}`);
    return platforms;
  } finally {
    if (keep) log(`publish: staging copy kept in ${staging}`);
    else rmSync(staging, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      artifacts: { type: "string" },
      registry: { type: "string" },
      rehearsal: { type: "boolean" },
      keep: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  const usage = "usage: node scripts/publish.mjs --artifacts <dir> [--registry <url>] [--rehearsal] [--keep]";
  if (values.help) {
    console.log(usage);
    process.exit(0);
  }
  if (!values.artifacts || !existsSync(values.artifacts)) {
    console.error(usage);
    process.exit(2);
  }
  try {
    publish({ artifacts: values.artifacts, registry: values.registry, rehearsal: values.rehearsal, keep: values.keep });
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
}
