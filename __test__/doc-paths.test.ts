/**
 * Every repository path that ARCHITECTURE.md and docs/*.md cite exists
 * (issue 32: the map named files that had become folders). A path is a
 * backquoted or linked token that starts with one of the repository's
 * top-level folders; `#…` anchors and `:line` suffixes are dropped. A
 * crate's section cites its files from the crate (`tests/contract.rs`):
 * a path that is in some crate counts.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "./helpers";

const TOP = readdirSync(repoRoot, { withFileTypes: true })
  .filter((entry) => entry.isDirectory() && !entry.name.startsWith(".") && entry.name !== "node_modules" && entry.name !== "target")
  .map((entry) => entry.name);

/** The repository paths a document cites. */
export function citedPaths(text: string): string[] {
  const tokens = [...text.matchAll(/`([^`\s]+)`/g), ...text.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]);
  const paths = new Set<string>();
  for (const raw of tokens) {
    const token = raw.replace(/^\.\.\//, "").replace(/#.*$/, "").replace(/:\d+$/, "").replace(/[.,;]$/, "");
    const top = token.split("/")[0];
    if (!token.includes("/") || !TOP.includes(top)) continue;
    // Patterns and placeholders are not paths.
    if (/[*<>{}…$]|\.\.\./.test(token)) continue;
    paths.add(token);
  }
  return [...paths];
}

const crates = readdirSync(join(repoRoot, "crates")).map((name) => join(repoRoot, "crates", name));
const exists = (path: string) => existsSync(join(repoRoot, path)) || crates.some((crate) => existsSync(join(crate, path)));

const documents = ["ARCHITECTURE.md", ...readdirSync(join(repoRoot, "docs")).filter((n) => n.endsWith(".md")).map((n) => `docs/${n}`)];

describe("the paths the map and the docs cite", () => {
  it("finds citations (the scan itself works)", () => {
    expect(citedPaths(readFileSync(join(repoRoot, "ARCHITECTURE.md"), "utf8")).length).toBeGreaterThan(50);
    expect(citedPaths("`crates/none/x.rs` and [a](lib/y.ts#z) but not `foo/bar` or `lib/*.ts`")).toEqual(["crates/none/x.rs", "lib/y.ts"]);
  });

  for (const document of documents) {
    it(`${document}: every cited path exists`, () => {
      const missing = citedPaths(readFileSync(join(repoRoot, document), "utf8")).filter((path) => !exists(path));
      expect(missing).toEqual([]);
    });
  }
});
