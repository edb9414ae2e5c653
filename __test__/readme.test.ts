/**
 * The README's session snippet runs as written (issue "Hangs, leaks and
 * wrong results", documentation items): copied literally into a file in the
 * package, it must run the real demo backend through `uv run`, print the
 * streamed answer once, leave no unhandled rejection, and exit by itself.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { repoRoot } from "./helpers";

/** The code block after `<!-- snippet: name … -->` in the README. */
function snippet(name: string): string {
  const readme = readFileSync(join(repoRoot, "README.md"), "utf8");
  const at = readme.indexOf(`<!-- snippet: ${name}`);
  expect(at, `README has the ${name} snippet`).toBeGreaterThanOrEqual(0);
  const block = /```(?:js|ts)\n([\s\S]*?)```/.exec(readme.slice(at));
  return block![1];
}

describe("README examples", () => {
  it("the testing kit's example is examples/testing/app.test.ts, which the suite runs", () => {
    expect(snippet("testing")).toBe(readFileSync(join(repoRoot, "examples", "testing", "app.test.ts"), "utf8"));
  });
});

describe.runIf(existsSync(join(repoRoot, ".venv", "bin", "uv")))("README snippets", () => {
  it("the session snippet runs the demo backend as written and exits by itself", () => {
    // In the package root, so that the package's own name resolves to it.
    const file = join(repoRoot, `.readme-snippet-${process.pid}.mjs`);
    writeFileSync(file, snippet("session"));
    try {
      const result = spawnSync(process.execPath, ["--unhandled-rejections=strict", file], {
        cwd: repoRoot,
        env: { ...process.env, PATH: `${join(repoRoot, ".venv", "bin")}:${process.env.PATH}`, UV_OFFLINE: "1" },
        encoding: "utf8",
        timeout: 60_000,
      });
      expect(result.stderr).not.toMatch(/Unhandled|unhandled/);
      expect(result.status, result.stderr).toBe(0);
      expect(result.stdout).toMatch(/^0\.22\.0 \{ model: 'demo-small' \}\n/);
      expect(result.stdout).toContain("[tool start: save_note]");
      expect(result.stdout).toContain("[tool end: save_note]");
      expect(result.stdout.trim().split("\n").at(-1)).toBe("completed");
      // The final answer is printed once: the streamed text is not repeated by the last chunk.
      const answer = /All done\. Saved note \S+ \(\d+ characters\)\./.exec(result.stdout)?.[0];
      expect(answer).toBeDefined();
      expect(result.stdout.split(answer!).length - 1).toBe(1);
    } finally {
      rmSync(file, { force: true });
    }
  }, 90_000);
});
