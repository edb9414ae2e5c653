/**
 * Large strings cross into JavaScript as V8 external strings where Node has
 * the Node-API functions for them (node_api_create_external_string_latin1
 * and _utf16: from Node 20.4, experimental on 20), and are copied where it
 * has not: src/external.rs looks the functions up at run time. On the oldest
 * Node `engines` admits and on every tested major (official Linux builds from
 * the npm registry, cached by scripts/node-binaries.mjs), this reads the
 * Node binary's dynamic symbol table, then asks V8 what the reader handed
 * over: external strings exactly where the symbols exist, copies elsewhere,
 * and the same text either way.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { join } from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { nodeBinary, oldestNode, testedNodeMajors } from "../scripts/node-binaries.mjs";
import { repoRoot } from "./helpers";

const versions = [oldestNode, ...testedNodeMajors];
const binaries = new Map<string, string>();
// The official Node builds on npm are for glibc Linux on these CPUs.
const arch = process.arch === "x64" || process.arch === "arm64" ? process.arch : null;
const glibc = process.platform === "linux" && Boolean((process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header?.glibcVersionRuntime);

/** Whether the binary exports both Node-API external string functions. */
function hasExternalStrings(binary: string): boolean {
  const symbols = execFileSync("nm", ["-D", "--defined-only", binary], { encoding: "utf8", maxBuffer: 256 * 1024 * 1024 });
  const names = new Set(symbols.split("\n").map((row) => row.trim().split(/\s+/).at(-1)));
  const latin1 = names.has("node_api_create_external_string_latin1");
  const utf16 = names.has("node_api_create_external_string_utf16");
  expect(latin1).toBe(utf16); // both or neither: the addon needs the pair
  return latin1;
}

/** V8's string types of the ASCII and the non-ASCII lifted string, and whether both came through intact. */
function probe(binary: string): { latin1: string; utf16: string; intact: boolean; node: string } {
  const result = spawnSync(binary, ["--allow-natives-syntax", join(repoRoot, "__test__/fixtures/external-probe.js"), repoRoot], {
    encoding: "utf8",
    timeout: 60_000,
    maxBuffer: 64 * 1024 * 1024,
  });
  expect(result.stderr).toBe("");
  expect(result.status).toBe(0);
  const types = [...result.stdout.matchAll(/^ - type: (\w+)$/gm)].map((m) => m[1]);
  const summary = JSON.parse(/^PROBE (.*)$/m.exec(result.stdout)![1]);
  expect(types).toHaveLength(2);
  return { latin1: types[0], utf16: types[1], ...summary };
}

describe.runIf(glibc && arch)("external strings: the fast path where Node has it, the copy where not", () => {
  beforeAll(() => {
    for (const version of versions) binaries.set(version, nodeBinary(arch!, version));
  }, 300_000);

  it.each(versions)("Node %s", (version) => {
    const binary = binaries.get(version)!;
    const present = hasExternalStrings(binary);
    const seen = probe(binary);
    expect(seen.intact).toBe(true);
    if (present) {
      expect(seen.latin1).toMatch(/^EXTERNAL_ONE_BYTE_STRING_TYPE$/);
      expect(seen.utf16).toMatch(/^EXTERNAL_(TWO_BYTE_)?STRING_TYPE$/);
    } else {
      expect(seen.latin1).not.toMatch(/EXTERNAL/);
      expect(seen.utf16).not.toMatch(/EXTERNAL/);
      expect(seen.latin1).toMatch(/ONE_BYTE/);
    }
    console.log(`${seen.node}: symbols ${present ? "present" : "missing"}; ASCII string ${seen.latin1}, other ${seen.utf16}`);
  });

  it("covers both paths: the oldest admitted Node lacks the functions, every tested major has them", () => {
    expect(hasExternalStrings(binaries.get(oldestNode)!)).toBe(false);
    for (const major of testedNodeMajors) expect(hasExternalStrings(binaries.get(major)!)).toBe(true);
  });
});
