/**
 * The main job (examples/demo-host.mjs, what `npm run demo` runs): a real
 * conversation with the real demo backend, and a clear message when the
 * control path fails.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { repoRoot } from "./helpers";

const host = join(repoRoot, "examples", "demo-host.mjs");
const python = join(repoRoot, ".venv", "bin", "python");
const scratch = mkdtempSync(join(tmpdir(), "pbn-demo-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

function runDemo(env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [host], { env: { ...process.env, ...env }, encoding: "utf8", timeout: 60_000 });
  return { code: result.status, out: result.stdout, err: result.stderr };
}

describe("the demo host", () => {
  // Spawned, and forked from a prefork server (DEMO_WARM=1).
  it.each(["cold", "warm"] as const)("runs a real conversation (%s): streamed text, an approved tool call, the host's own tool, the results, the answer, a clean exit", (startMode) => {
    const { code, out, err } = runDemo(startMode === "warm" ? { DEMO_WARM: "1" } : {});
    expect(err).toBe("");
    expect(code).toBe(0);
    expect(out).toMatch(new RegExp(`backend ready: agentlane 0\\.22\\.0, protocol 1\\.0, .*, started ${startMode}$`, "m"));
    expect(out).toContain("[approval needed] save_note: create_file /notes/note.txt (Saving notes needs your approval.)");
    expect(out).toContain("[host] approving");
    expect(out).toContain("[approval resolved] allow");
    expect(out).toContain('[tool result] "Saved note note.txt (44 characters)."');
    // The host's own tool (the host channel): its handler ran here, and its result reached the answer.
    expect(out).toContain('[host tool] lookup("process bridge"): answered by this process');
    expect(out).toContain(`[tool result] "The host's notes on process bridge: it hosts AgentLane agents from Node."`);
    expect(out).toContain(`final answer: "All done. Saved note note.txt (44 characters). The host's notes on process bridge: it hosts AgentLane agents from Node."`);
    expect(out).toMatch(/host tool called +\d+ ms/);
    expect(out).toMatch(/session closed +\d+ ms/);
    expect(out).toMatch(/events decoded +50/);
    // The streamed text arrived in order, before the tool call.
    expect(out.indexOf("Sure, I will save that as a note.")).toBeLessThan(out.indexOf("[tool call] save_note"));
  });

  it("says when Python is missing", () => {
    const { code, err } = runDemo({ DEMO_PYTHON: join(scratch, "no-python") });
    expect(code).toBe(1);
    expect(err).toContain("demo: cannot start Python at");
  });

  it("says when the backend fails to import", () => {
    const dir = join(scratch, "broken");
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(dir);
    writeFileSync(join(dir, "demo_app.py"), "raise ImportError('demo dependency missing')\n");
    const { code, err } = runDemo({ DEMO_BACKEND_DIR: dir });
    expect(code).toBe(1);
    expect(err).toContain("demo: the backend exited before it was ready: agentlane_process_bridge: demo dependency missing");
  });

  it("says when the backend speaks another protocol version", () => {
    const dir = join(scratch, "future");
    mkdirSync(dir, { recursive: true });
    // A stand-in for the bridge module that announces protocol 2.0.
    writeFileSync(
      join(dir, "agentlane_process_bridge.py"),
      [
        "import sys, time",
        'sys.stdout.write(\'{"protocol_version":"2.0","type":"ready","ts":1,"version":"9.0.0","package":"agentlane-process-bridge","metadata":{}}\\n\')',
        "sys.stdout.flush()",
        "sys.stdin.read()",
      ].join("\n"),
    );
    const { code, err } = runDemo({ DEMO_BACKEND_DIR: dir, DEMO_PYTHON: python });
    expect(code).toBe(1);
    expect(err).toContain("demo: the backend speaks an unsupported protocol version: Unsupported bridge protocol version: 2.0.");
  });
});

describe("the Rust example host (core only, no Node)", () => {
  it("runs the same conversation", () => {
    // The quick profile's (Cargo.toml): `npm test`'s cargo test has built it already.
    execFileSync("cargo", ["build", "--profile", "quick", "-q", "-p", "bridge-core", "--example", "host"], { cwd: repoRoot, stdio: "inherit" });
    const result = spawnSync(join(repoRoot, "target", "quick", "examples", "host"), { encoding: "utf8", timeout: 60_000 });
    expect(result.stderr).toBe("");
    expect(result.status).toBe(0);
    expect(result.stdout).toContain("backend ready: agentlane 0.22.0, protocol 1.0");
    expect(result.stdout).toContain("[approval needed] save_note: create_file -> approving tool-approval-1");
    expect(result.stdout).toContain('[tool result] "Saved note note.txt (44 characters)."');
    expect(result.stdout).toContain('final answer: "All done. Saved note note.txt (44 characters)."');
    expect(result.stdout).toMatch(/36 events, exited exit status: 0/);
  }, 180_000);
});
