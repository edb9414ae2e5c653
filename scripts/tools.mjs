#!/usr/bin/env node
// The package managers, runtimes and registry that the publish rehearsal
// (scripts/rehearse-publish.mjs) and the runtime suites
// (scripts/test-runtimes.mjs) run, pinned, from the npm registry, installed
// once into node_modules/.cache (not devDependencies: only those two steps
// need them, and Verdaccio alone brings ~300 packages).
//
//   node scripts/tools.mjs            installs them (idempotent), prints each path
//
// Verdaccio 6.8.0 is the newest that runs on Node 20 (6.10 wants 22); it
// installs there only with node-fetch overridden to 2.7.0.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { cacheDir } from "./node-binaries.mjs";

export const toolVersions = {
  verdaccio: "6.8.0",
  pnpm: "12.4.2",
  "@yarnpkg/cli-dist": "4.18.1",
  bun: "1.4.4",
  deno: "2.9.6",
};

export const toolsDir = join(cacheDir, "tools");

const manifest = {
  name: "process-bridge-native-tools",
  private: true,
  dependencies: toolVersions,
  overrides: { "node-fetch": "2.7.0" },
};

/** Installs the pinned tools when the cache does not hold exactly them; returns their paths. */
export function installTools() {
  const manifestPath = join(toolsDir, "package.json");
  const wanted = `${JSON.stringify(manifest, null, 2)}\n`;
  const stamp = join(toolsDir, "node_modules", ".installed");
  if (!existsSync(stamp) || !existsSync(manifestPath) || readFileSync(manifestPath, "utf8") !== wanted) {
    mkdirSync(toolsDir, { recursive: true });
    writeFileSync(manifestPath, wanted);
    // bun's and deno's packages pick their platform binary by optional
    // dependencies; their install scripts only link it (allowed explicitly).
    execFileSync("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", "--no-package-lock"], {
      cwd: toolsDir,
      stdio: ["ignore", "inherit", "inherit"],
    });
    writeFileSync(stamp, `${JSON.stringify(toolVersions)}\n`);
  }
  return toolPaths();
}

/** Each tool's command (its package's `bin`, linked in the cache's node_modules/.bin). */
export function toolPaths() {
  const bin = join(toolsDir, "node_modules", ".bin");
  return {
    verdaccio: join(bin, "verdaccio"),
    pnpm: join(bin, "pnpm"),
    yarn: join(bin, "yarn"),
    bun: join(bin, "bun"),
    deno: join(bin, "deno"),
  };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  for (const [name, path] of Object.entries(installTools())) console.log(`${name}: ${path}`);
}
