#!/usr/bin/env node
// Compares two folders of corpus verdicts (__test__/verdicts.ts), e.g. from
// the x86_64 and the aarch64 build of the addon:
//
//   node scripts/compare-verdicts.mjs <folder A> <folder B>
//
// One check per corpus (`<name>.tsv`): both folders have it, with the same
// number of verdicts, every one identical. Prints a line per corpus, the
// first differences, and last `<passed> <failed>`; exits 1 on any failure.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";

const [a, b] = process.argv.slice(2);
if (!a || !b) {
  console.error("usage: node scripts/compare-verdicts.mjs <folder A> <folder B>");
  process.exit(2);
}
const list = (dir) => (existsSync(dir) ? readdirSync(dir).filter((f) => f.endsWith(".tsv")) : []);
const names = [...new Set([...list(a), ...list(b)])].sort();
let passed = 0;
let failed = 0;
if (names.length === 0) {
  console.log(`   no verdicts in ${a} or ${b}`);
  failed += 1;
}
for (const name of names) {
  const corpus = basename(name, ".tsv");
  const pathA = join(a, name);
  const pathB = join(b, name);
  if (!existsSync(pathA) || !existsSync(pathB)) {
    console.log(`   ${corpus}: missing in ${existsSync(pathA) ? b : a}`);
    failed += 1;
    continue;
  }
  const rowsA = readFileSync(pathA, "utf8").trimEnd().split("\n");
  const rowsB = readFileSync(pathB, "utf8").trimEnd().split("\n");
  const differences = [];
  for (let i = 0; i < Math.max(rowsA.length, rowsB.length); i++) {
    if (rowsA[i] !== rowsB[i]) differences.push(i);
  }
  const accepted = rowsA.filter((row) => row.split("\t")[1]?.startsWith("ok ")).length;
  if (differences.length === 0 && rowsA.length > 0) {
    console.log(`   ${corpus}: ${rowsA.length} verdicts identical (${accepted} accepted, ${rowsA.length - accepted} rejected)`);
    passed += 1;
  } else {
    console.log(`   ${corpus}: ${differences.length} of ${Math.max(rowsA.length, rowsB.length)} verdicts differ`);
    for (const i of differences.slice(0, 5)) console.log(`     #${i}\n       A ${rowsA[i] ?? "(none)"}\n       B ${rowsB[i] ?? "(none)"}`);
    failed += 1;
  }
}
console.log(`${passed} ${failed}`);
process.exit(failed === 0 ? 0 : 1);
