/**
 * The README's agentlane-bridge section runs as written (issue 30, items
 * 8 and 9), as __test__/readme.test.ts does for the Node snippets: each
 * `agentlane-bridge` command of the `bridge-run` block from the repository
 * root (the built bridge first on PATH, then the venv's bin with uv), and
 * the Go program in a folder outside the repository with the README's
 * go.mod, vetted and run. The only edit is the checkout's path in place of
 * `/path/to/process-bridge-native`. The install block (`cargo install`,
 * two release builds) runs with PBN_INSTALL_TEST=1 only, into a temporary
 * root, and its bridge then starts warm with nothing but that root on PATH.
 */
import { execFile, spawn } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { promisify } from "node:util";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { describe, expect, it } from "vitest";
import { ConversationService, StartMode } from "../examples/clients/node/gen/agentlane/bridge/v1/bridge_pb.js";
import { AgentService, approval, bridgeBinary, collect, repoRoot } from "./bridge-harness";

const run = promisify(execFile);
const readme = readFileSync(join(repoRoot, "README.md"), "utf8");
const checkout = "/path/to/process-bridge-native";

/** The code block after `<!-- snippet: name … -->`. */
function snippet(name: string): string {
  const at = readme.indexOf(`<!-- snippet: ${name} `);
  expect(at, `README has the ${name} snippet`).toBeGreaterThanOrEqual(0);
  return /```\w*\n([\s\S]*?)```/.exec(readme.slice(at))![1];
}

const env = (path: string) => ({
  ...process.env,
  PATH: `${path}:${join(repoRoot, ".venv", "bin")}:${process.env.PATH}`,
  UV_OFFLINE: "1",
  GOPROXY: "off",
});

/** Runs a serving command line with bash; resolves with its discovery line and a way to end it. */
function serve(line: string, path: string): Promise<{ info: any; stderr: string[]; end: () => Promise<number | null> }> {
  const child = spawn("bash", ["-c", line], { cwd: repoRoot, env: env(path), stdio: ["pipe", "pipe", "pipe"] });
  const stderr: string[] = [];
  createInterface({ input: child.stderr! }).on("line", (l) => stderr.push(l));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`no discovery line from ${line}\n${stderr.join("\n")}`));
    }, 90_000);
    createInterface({ input: child.stdout! }).once("line", (first) => {
      clearTimeout(timer);
      const match = /^agentlane-bridge (ready|failed) (.*)$/.exec(first);
      if (match?.[1] !== "ready") {
        child.kill("SIGKILL");
        return reject(new Error(`${line}\n${first}\n${stderr.join("\n")}`));
      }
      resolve({
        info: JSON.parse(match[2]),
        stderr,
        end: () => {
          child.stdin!.end();
          return exited;
        },
      });
    });
  });
}

/**
 * Checks a served bridge with real calls (connect-es): a demo run in its
 * default conversation, or in a warm one created, its approval allowed.
 */
async function exercise(info: any): Promise<void> {
  const token = readFileSync(info.tokenFile, "utf8").trim();
  const transport = createConnectTransport({
    baseUrl: info.url,
    httpVersion: "1.1",
    interceptors: [(next) => (request) => (request.header.set("Authorization", `Bearer ${token}`), next(request))],
  });
  const conversations = createClient(ConversationService, transport);
  const agent = createClient(AgentService, transport);
  let conversationId = "";
  if (info.backend === null) {
    expect(info.capabilities).toContain("warm");
    const { conversation } = await conversations.createConversation({});
    expect(conversation!.startMode).toBe(StartMode.WARM);
    conversationId = conversation!.id;
  }
  const run = await collect(agent.prompt({ text: "Please save a note: the README runs.", conversationId }), async (event) => {
    const pending = approval(event, "pending");
    if (pending) await agent.approve({ id: event.approvalId!, allowed: true });
  });
  expect(run.error).toBeUndefined();
  expect(run.events.at(-1)!.event.final_output).toMatch(/^All done\. Saved note note\.txt/);
}

describe("README: agentlane-bridge commands run as written", () => {
  const lines = snippet("bridge-run")
    .split("\n")
    .filter((line) => line.startsWith("agentlane-bridge "));

  it("the block has the serving forms and the check", () => {
    expect(lines).toHaveLength(4);
    expect(lines.filter((line) => line.startsWith("agentlane-bridge check "))).toHaveLength(1);
  });

  for (const line of lines.filter((l) => !l.startsWith("agentlane-bridge check "))) {
    it(line.slice("agentlane-bridge ".length), async () => {
      const served = await serve(line, dirname(bridgeBinary));
      if (served.info.backend && line.includes(" --python .venv/bin/python")) {
        // The Python meant: the working directory's venv, not one in --project-dir.
        const argv = readFileSync(`/proc/${served.info.backend.pid}/cmdline`, "utf8").split("\0");
        expect(argv[0]).toBe(join(repoRoot, ".venv/bin/python"));
      }
      await exercise(served.info);
      expect(await served.end()).toBe(0);
    }, 120_000);
  }

  it("agentlane-bridge check passes", async () => {
    const line = lines.find((l) => l.startsWith("agentlane-bridge check "))!;
    const { stdout } = await run("bash", ["-c", line], { cwd: repoRoot, env: env(dirname(bridgeBinary)), timeout: 120_000 });
    expect(stdout.trim().split("\n").at(-1)).toBe("check: passed");
  }, 150_000);
});

describe("README: the Go program, outside the repository", () => {
  it("go.mod as shown, main.go as shown: go vet passes and the program runs", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agents-"));
    try {
      writeFileSync(join(dir, "go.mod"), snippet("go-mod").replaceAll(checkout, repoRoot));
      writeFileSync(join(dir, "main.go"), snippet("go-library"));
      let output = "";
      for (const line of snippet("go-run").trim().split("\n")) {
        const { stdout } = await run("bash", ["-c", line.replaceAll(checkout, repoRoot)], { cwd: dir, env: env(dirname(bridgeBinary)), timeout: 180_000 });
        output += stdout;
      }
      expect(output).toBe("alice: All done. Saved note note.txt (37 characters).\nbob: All done. Note not saved: Bob's notebook is full.\n");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 240_000);
});

describe.runIf(process.env.PBN_INSTALL_TEST === "1")("README: installing the bridge (PBN_INSTALL_TEST=1)", () => {
  it("the cargo install line installs both binaries; the bridge finds its supervisor beside itself and starts warm", async () => {
    const root = mkdtempSync(join(tmpdir(), "bridge-install-"));
    try {
      const line = snippet("bridge-install").trim();
      const commands = line.split(" && ").map((command) => `${command} --root ${root}`);
      expect(commands).toHaveLength(2);
      for (const command of commands) await run("bash", ["-c", command], { cwd: repoRoot, timeout: 1_800_000 });
      const served = await serve(
        "agentlane-bridge --app demo_app:create_backend --project-dir examples/backend --python .venv/bin/python --warm --no-default-conversation --warm-fallback error",
        join(root, "bin"),
      );
      await exercise(served.info);
      expect(await served.end()).toBe(0);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  }, 2_000_000);
});
