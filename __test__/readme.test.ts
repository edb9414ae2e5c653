/**
 * The README's snippets run as written (issues "Hangs, leaks and wrong
 * results" and 19, item 4): every `js`/`ts` block of the README is marked
 * `<!-- snippet: name -->` and run here, copied literally into a file in the
 * package root (so that the package's own name resolves to it), from the
 * repository root, as a reader would: the real demo backend through
 * `uv run` or the venv's Python, no unhandled rejection, and an exit by
 * itself. TypeScript blocks are transpiled (types dropped) first.
 */
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import { repoRoot } from "./helpers";
import { startPostgres } from "../scripts/postgres-server.mjs";

const readme = readFileSync(join(repoRoot, "README.md"), "utf8");

/** The code block after `<!-- snippet: name … -->` in the README. */
function snippet(name: string, lang = "js|ts"): { code: string; lang: string } {
  const at = readme.indexOf(`<!-- snippet: ${name} `);
  expect(at, `README has the ${name} snippet`).toBeGreaterThanOrEqual(0);
  const block = new RegExp("```(" + lang + ")\\n([\\s\\S]*?)```").exec(readme.slice(at))!;
  return { lang: block[1], code: block[2] };
}

/** Runs a snippet as written, from the repository root; its output. */
function runSnippet(name: string, env: Record<string, string> = {}): { status: number | null; stdout: string; stderr: string } {
  const { code, lang } = snippet(name);
  const js = lang === "ts" ? ts.transpileModule(code, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText : code;
  const file = join(repoRoot, `.readme-snippet-${name}-${process.pid}.mjs`);
  writeFileSync(file, js);
  try {
    const result = spawnSync(process.execPath, ["--unhandled-rejections=strict", file], {
      cwd: repoRoot,
      env: { ...process.env, PATH: `${join(repoRoot, ".venv", "bin")}:${process.env.PATH}`, UV_OFFLINE: "1", ...env },
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(result.stderr, name).not.toMatch(/Unhandled|unhandled/);
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  } finally {
    rmSync(file, { force: true });
  }
}

describe("README examples", () => {
  it("every js and ts block is a marked snippet that a test runs or checks", () => {
    const blocks = [...readme.matchAll(/(<!-- snippet: ([\w-]+) [^\n]*-->\n)?```(js|ts)\n/g)];
    expect(blocks.length).toBeGreaterThanOrEqual(6);
    const unmarked = blocks.filter((block) => block[1] === undefined).map((block) => readme.slice(block.index, block.index + 80));
    expect(unmarked).toEqual([]);
    expect(blocks.map((block) => block[2]).sort()).toEqual(["attach", "decode", "host-tools", "resume", "session", "session-venv", "shared-warm", "stores", "stores-postgres", "stream", "testing", "warm"]);
  });

  it("the shared warm server's example is __test__/fixtures/shared-warm/global-setup.mjs, which warm-servers.test.ts runs", () => {
    expect(snippet("shared-warm").code).toBe(readFileSync(join(repoRoot, "__test__", "fixtures", "shared-warm", "global-setup.mjs"), "utf8"));
  });

  it("the testing kit's example is examples/testing/app.test.ts, which the suite runs", () => {
    expect(snippet("testing").code).toBe(readFileSync(join(repoRoot, "examples", "testing", "app.test.ts"), "utf8"));
  });

  it("the decode snippet: the tool result, the failing field, null, and the encoded command", () => {
    const result = runSnippet("decode");
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toBe('saved\nnull\n{"type":"prompt","text":"List the files","protocol_version":"1.0"}\n');
    expect(result.stderr).toBe("invalid-payload [ 'event.payload.tool_call.id' ]\n");
  });
});

describe.runIf(existsSync(join(repoRoot, ".venv", "bin", "python")))("README snippets of the application's own tools and state", () => {
  it("the host-tools snippet: the agent calls the application's lookup, its result in the final answer", () => {
    const result = runSnippet("host-tools");
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toBe('Results: {"name": "Ada Lovelace", "plan": "gold"}\n');
  }, 90_000);

  it("the resume snippet: a conversation resumed from its snapshot remembers its turns", () => {
    const result = runSnippet("resume");
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toBe("Seen 3 user messages: one | two | history\n");
  }, 90_000);
});

describe("README snippets of the conversation stores", () => {
  it("the stores snippet: the conflict of a writer that missed the first save, the load, the delete", () => {
    const result = runSnippet("stores");
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toBe("revision-conflict null 1\n1 [ 'user', 'assistant' ]\n[]\n");
  });

  it("the PostgreSQL snippet runs as written on a private server, its connection in PG* variables", async () => {
    const server = await startPostgres();
    try {
      const result = runSnippet("stores-postgres", server.env);
      expect(result.status, result.stderr).toBe(0);
      expect([result.stdout, result.stderr]).toEqual(["no snapshot yet\n", ""]);
    } finally {
      await server.dispose();
    }
  }, 90_000);
});

describe.runIf(existsSync(join(repoRoot, ".venv", "bin", "uv")))("README snippets with the real backend", () => {
  it("the session snippet runs the demo backend as written and exits by itself", () => {
    const result = runSnippet("session");
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^0\.22\.0 \{ model: 'demo-small' \}\n/);
    expect(result.stdout).toContain("[tool start: save_note]");
    expect(result.stdout).toContain("[tool end: save_note]");
    expect(result.stdout.trim().split("\n").at(-1)).toBe("completed");
    // The final answer is printed once: the streamed text is not repeated by the last chunk.
    const answer = /All done\. Saved note \S+ \(\d+ characters\)\./.exec(result.stdout)?.[0];
    expect(answer).toBeDefined();
    expect(result.stdout.split(answer!).length - 1).toBe(1);
  }, 90_000);

  it("the venv snippet (no uv) runs from the repository root", () => {
    const result = runSnippet("session-venv");
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^completed All done\. Saved note \S+ \(\d+ characters\)\.\n$/);
  }, 90_000);

  it("the stream snippet: text, the tool's start and end, and the result last", () => {
    const result = runSnippet("stream");
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toContain("start save_note");
    expect(result.stdout).toContain("end save_note");
    // The streamed text (no newline of its own), then the result's status.
    expect(result.stdout).toMatch(/All done\. Saved note \S+ \(\d+ characters\)\.completed\n$/);
  }, 90_000);

  it("the check snippet: each command passes", () => {
    const { code } = snippet("check", "sh");
    const commands = code.split("\n").filter((line) => line.startsWith("node "));
    expect(commands).toHaveLength(3);
    for (const command of commands) {
      const result = spawnSync("bash", ["-c", command], {
        cwd: repoRoot,
        env: { ...process.env, PATH: `${join(repoRoot, ".venv", "bin")}:${process.env.PATH}`, UV_OFFLINE: "1" },
        encoding: "utf8",
        timeout: 60_000,
      });
      expect(result.status, `${command}\n${result.stdout}${result.stderr}`).toBe(0);
      expect(result.stdout).toMatch(/check passed/);
    }
  }, 120_000);

  it("the warm snippet: three conversations forked from one prewarmed server, each completed, and the host exits by itself", () => {
    const result = runSnippet("warm");
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toBe("demo_app:create_backend 0.22.0\n[ 'warm', 'warm', 'warm' ]\n[ 'completed', 'completed', 'completed' ]\n");
  }, 90_000);

  it("the attach snippet: a session on a process started through sh -c", () => {
    const result = runSnippet("attach");
    expect(result.status, result.stderr).toBe(0);
    expect(result.stdout).toMatch(/^\{\s*mode: 'attached',\s*start: 'attached',\s*pid: \d+,\s*processGroup: undefined,\s*supervisorPid: undefined\s*\}\ncompleted\n$/);
  }, 90_000);
});
