#!/usr/bin/env node
// Puts each built supervisor into its platform package, beside the addon
// (lib/spawn/supervisor.ts looks there), and lists it in that package's
// `files` so npm publishes it. The release's publish job runs it after
// `napi artifacts`; __test__/package.test.ts stages a package with it.
//
//   node scripts/stage-supervisor.mjs <artifacts dir> <npm dir>
//
// Every `process-bridge-supervisor.<platform>` under <artifacts dir> (one
// level of subfolders, as download-artifact leaves them) goes to
// <npm dir>/<platform>/.
import { chmodSync, copyFileSync, existsSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const PREFIX = "process-bridge-supervisor.";

/** Copies one supervisor into a platform package folder and lists it in its `files`. */
export function stageSupervisor(file, packageDir) {
  const name = basename(file);
  if (!name.startsWith(PREFIX)) throw new Error(`${file} is not a process-bridge-supervisor.<platform> file`);
  const manifestPath = join(packageDir, "package.json");
  const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
  copyFileSync(file, join(packageDir, name));
  chmodSync(join(packageDir, name), 0o755);
  manifest.files = [...new Set([...(manifest.files ?? []), name])];
  writeFileSync(manifestPath, `${JSON.stringify(manifest, null, 2)}\n`);
  return join(packageDir, name);
}

function supervisorsUnder(dir) {
  const found = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) {
      for (const inner of readdirSync(path)) if (inner.startsWith(PREFIX)) found.push(join(path, inner));
    } else if (entry.startsWith(PREFIX)) {
      found.push(path);
    }
  }
  return found;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const [artifacts, npmDir] = process.argv.slice(2);
  if (!artifacts || !npmDir) {
    console.error("usage: node scripts/stage-supervisor.mjs <artifacts dir> <npm dir>");
    process.exit(2);
  }
  const files = supervisorsUnder(artifacts);
  if (files.length === 0) {
    console.error(`stage-supervisor: no ${PREFIX}<platform> file under ${artifacts}`);
    process.exit(1);
  }
  for (const file of files) {
    const packageDir = join(npmDir, basename(file).slice(PREFIX.length));
    if (!existsSync(join(packageDir, "package.json"))) {
      console.error(`stage-supervisor: no platform package ${packageDir} for ${file}`);
      process.exit(1);
    }
    console.log(`stage-supervisor: ${stageSupervisor(file, packageDir)}`);
  }
}
