/**
 * The two-step check (`checkBackend` and `process-bridge-native check`),
 * against the real demo backend: step 1 starts it and checks `ready`; step
 * 2 runs one prompt whose approval the given policy answers; no process is
 * left behind.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { checkBackend } from "../lib/index";
import { repoRoot } from "./helpers";

const python = join(repoRoot, ".venv", "bin", "python");
const demoDir = join(repoRoot, "examples", "backend");
const demo = { command: python, args: ["-m", "agentlane_process_bridge", "--app", "demo_app:create_backend"], cwd: demoDir };
const cli = join(repoRoot, "dist", "cli.js");
/** The demo backend with the host channel's module importable (the package's python/). */
const demoWithModule = { ...demo, env: { ...process.env, PYTHONPATH: join(repoRoot, "python", "src") } };

describe.runIf(existsSync(python))("checkBackend", () => {
  it("step 1 only: ready, protocol 1.x, nothing left running", async () => {
    const report = await checkBackend(demo);
    expect(report.ok).toBe(true);
    expect(report.start.ready).toMatchObject({ version: "0.22.0", package: "agentlane-process-bridge" });
    expect(report.run).toBeUndefined();
    expect(report.processesLeft).toBe(0);
  });

  it("step 2: the policy's decision shows in the tool result and the final answer (allowed, then denied)", async () => {
    const allowed = await checkBackend(demo, { prompt: "Save a note about the check.", approvals: () => true });
    expect(allowed.ok).toBe(true);
    expect(allowed.run?.approvals.map((a) => [a.tool, a.allowed])).toEqual([["save_note", true]]);
    expect(allowed.run?.tools[0]).toMatchObject({ tool: "save_note", ok: true });
    expect(String(allowed.run?.tools[0].result)).toMatch(/^Saved note /);
    expect(allowed.run?.result).toMatchObject({ status: "completed", finalOutput: expect.stringContaining("Saved note") });

    const denied = await checkBackend(demo, { prompt: "Save a note about the check.", approvals: () => ({ allowed: false, reason: "Not today." }) });
    expect(denied.run?.approvals.map((a) => [a.allowed, a.reason])).toEqual([[false, "Not today."]]);
    expect(JSON.stringify(denied.run?.tools[0].result)).toContain("Not today.");
    expect(denied.processesLeft).toBe(0);
  });

  it("step 3 (hostTool): the agent calls the host's own lookup tool and its result, the check's token, reaches the final answer", async () => {
    const report = await checkBackend(demoWithModule, { prompt: "Save a note.", approvals: () => true, hostTool: true });
    expect(report.ok).toBe(true);
    expect(report.hostTool).toMatchObject({ ok: true, called: true });
    expect(String(report.hostTool?.finalOutput)).toMatch(/check-token-[0-9a-f]{12}/);
    expect(report.processesLeft).toBe(0);
  });

  it("step 3 says which part failed: a factory without the module (tools-not-taken), an agent that does not call the tool (tool-not-called)", async () => {
    const withoutModule = await checkBackend(demo, { hostTool: true });
    expect(withoutModule.ok).toBe(false);
    expect(withoutModule.start.ok).toBe(true);
    expect(withoutModule.hostTool).toMatchObject({ ok: false, called: false, error: { code: "tools-not-taken" } });
    const hostToolsApp = { ...demoWithModule, args: ["-m", "agentlane_process_bridge", "--app", "host_tools_app:create_backend"], cwd: join(repoRoot, "tests", "e2e", "backends") };
    const notCalled = await checkBackend(hostToolsApp, { hostTool: { prompt: "hello" } });
    expect(notCalled.hostTool).toMatchObject({ ok: false, called: false, finalOutput: "You said: hello", error: { code: "tool-not-called" } });
  });

  it("a backend that does not start: a report, not an exception, with the likely cause", async () => {
    const report = await checkBackend({ ...demo, args: ["-m", "agentlane_process_bridge", "--app", "no_such_app:factory"] });
    expect(report.ok).toBe(false);
    expect(report.start.error).toMatchObject({ code: "exited-before-ready", exitCode: 1 });
    expect(report.start.error?.likelyCause).toMatch(/^The app module failed to import \(No module named 'no_such_app'\)/);
  });
});

describe.runIf(existsSync(python) && existsSync(cli))("process-bridge-native check", () => {
  const env = { ...process.env, PATH: `${join(repoRoot, ".venv", "bin")}:${process.env.PATH}`, UV_OFFLINE: "1" };

  it("the { app, projectDir } form through uv, with a prompt whose approval is allowed: exit 0", () => {
    const result = spawnSync(process.execPath, [cli, "check", "--app", "demo_app:create_backend", "--project-dir", demoDir, "--prompt", "Save a note.", "--allow"], { env, encoding: "utf8" });
    expect(result.status).toBe(0);
    expect(result.stdout).toMatch(/^step 1 ok: the backend is ready in \d+ ms \(agentlane 0\.22\.0, agentlane-process-bridge, protocol 1\.x\)\n/);
    expect(result.stdout).toContain("  approval of save_note: allowed\n");
    expect(result.stdout.trim().split("\n").at(-1)).toBe("check passed");
  });

  it("--host-tool through uv: step 3 ok, the host's tool result in the final answer", () => {
    const result = spawnSync(process.execPath, [cli, "check", "--app", "demo_app:create_backend", "--project-dir", demoDir, "--host-tool"], { env, encoding: "utf8" });
    expect(result.stdout).toMatch(/^step 3 ok: the agent called the host's own tool lookup \(\d+ ms\)$/m);
    expect(result.stdout).toMatch(/final answer: ".*check-token-[0-9a-f]{12}/);
    expect(result.status).toBe(0);
  });

  it("--json, a failing backend: exit 1 and the structured report", () => {
    const result = spawnSync(process.execPath, [cli, "check", "--json", "--", python, "-m", "agentlane_process_bridge", "--app", "broken:app"], { env, encoding: "utf8", cwd: demoDir });
    expect(result.status).toBe(1);
    const report = JSON.parse(result.stdout);
    expect(report.ok).toBe(false);
    expect(report.start.error.code).toBe("exited-before-ready");
  });

  it("--help and -h, with or without check, print the usage on stdout and exit 0; after -- they are the backend's", () => {
    for (const args of [["--help"], ["-h"], ["check", "--help"], ["check", "-h"], ["check", "--app", "x:y", "--help"]]) {
      const result = spawnSync(process.execPath, [cli, ...args], { encoding: "utf8" });
      expect(result.status, args.join(" ")).toBe(0);
      expect(result.stdout).toMatch(/^usage: process-bridge-native check --app module:factory/);
      expect(result.stdout).toContain("-h, --help");
      expect(result.stderr).toBe("");
    }
    // After `--` the words are the backend command's: here a command that does not exist, so the check fails (1), not help (0).
    const passedOn = spawnSync(process.execPath, [cli, "check", "--", "/no/such/backend", "--help"], { encoding: "utf8" });
    expect(passedOn.status).toBe(1);
    expect(passedOn.stdout).not.toMatch(/^usage:/);
  });

  it("a usage error: exit 2", () => {
    const result = spawnSync(process.execPath, [cli, "check"], { encoding: "utf8" });
    expect(result.status).toBe(2);
    expect(result.stderr).toContain("give --app module:factory");
  });
});
