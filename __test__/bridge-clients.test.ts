/**
 * agentlane-bridge from other languages: each example client of
 * examples/clients/ runs the two-step check against the real demo backend
 * (Python with both codecs, Node with both codecs, Go's standard library,
 * curl), the Go library (clients/go) passes its own `go test` and its
 * example runs, and the contract's tooling holds (buf lint and breaking,
 * generated code current). Installed by scripts/setup-bridge-clients.sh.
 */
import { execFile } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { check } from "../examples/clients/node/check.mjs";
import { bridgeBinary, demoArgs, repoRoot } from "./bridge-harness";

const run = promisify(execFile);
const clients = join(repoRoot, "examples/clients");
const env = { ...process.env, AGENTLANE_BRIDGE: bridgeBinary };

/** Runs a client's check; returns its stdout (which must end with `check: passed`). */
async function runCheck(command: string, args: string[], cwd: string): Promise<string> {
  const { stdout } = await run(command, [...args, "--", ...demoArgs()], { cwd, env, timeout: 120_000 }).catch((error) => {
    throw new Error(`${command} ${args.join(" ")} failed:\n${error.stdout}\n${error.stderr}`);
  });
  expect(stdout.trim().split("\n").at(-1)).toBe("check: passed");
  expect(stdout).toMatch(/^step 1: ok/m);
  expect(stdout.match(/^step 2: ok/gm)).toHaveLength(2);
  return stdout;
}

describe("agentlane-bridge: clients in other languages run the two-step check", () => {
  for (const codec of ["--proto", "--json"]) {
    it(`Python (connectrpc, generated stubs, ${codec.slice(2)})`, async () => {
      const out = await runCheck(join(repoRoot, ".venv-clients/bin/python"), ["check.py", codec], join(clients, "python"));
      expect(out).toContain('final answer "All done. Note not saved: Denied by the Python client."');
    });
  }

  for (const json of [false, true]) {
    it(`Node (connect-node, generated code, ${json ? "json" : "proto"})`, async () => {
      const lines: string[] = [];
      const result = await check(demoArgs(), { json, bridge: bridgeBinary, log: (line) => lines.push(line) });
      expect(result.backendVersion).toBe("0.22.0");
      expect(result.runs.map((r) => r.finalOutput)).toEqual([
        "All done. Saved note note.txt (34 characters).",
        "All done. Note not saved: Denied by the Node client.",
      ]);
      expect(lines).toHaveLength(3);
    });
  }

  it("Go (standard library only)", async () => {
    const out = await runCheck("go", ["run", "."], join(clients, "go"));
    expect(out).toContain('final answer "All done. Note not saved: Denied by the Go client."');
  });

  it("curl (unary calls, guards, and the conversation)", async () => {
    const out = await runCheck("bash", ["check.sh"], join(clients, "curl"));
    expect(out).toContain("Origin, foreign Host -> 403; GET -> 405");
  });
});

/** The top-level tests of clients/go (both packages); each must run and pass (a test that vanished fails here too). */
const goLibraryTests = [
  "TestDemoConversationApprovedByTheHandler",
  "TestConcurrentApprovals",
  "TestControlCallsAndRefusals",
  "TestDiscoveryTokenAndClose",
  "TestProgramExitLeavesNoProcess",
  "TestStartFailures",
  "TestBackendDeathEndsTheStream",
  "TestConversationsDoNotCross",
  "TestConversationLimit",
  "TestWarmConversationWithAnApproval",
  "TestHostileWire",
  "TestConfigureFailureOfGarbage",
  "TestReadyTimeoutOption",
  "TestSharedHandlerTellsConversationsApart",
  "TestOldImportPathIsTheSameLibrary",
  "TestHostToolsThroughTheBridge",
  "TestHostToolBesideAnApproval",
  "TestAFactoryWithoutTheModuleIsRefused",
  "TestABridgeRestartLosesNoCommittedTurn",
  "TestSnapshotsRefusedAndRequired",
  "TestSnapshotsThroughCancelAndDivergingResumes",
  "TestDefaultConversationToolsFromAFile",
];

describe("agentlane-bridge: the Go library (clients/go)", () => {
  const goEnv = { ...env, GOPROXY: "off" };

  it("go test passes against the real bridge and backend", async () => {
    const { stdout } = await run("go", ["test", "-count=1", "-json", "./..."], {
      cwd: join(repoRoot, "clients/go"),
      env: goEnv,
      timeout: 240_000,
      maxBuffer: 64 * 1024 * 1024,
    }).catch((error) => {
      const failed = String(error.stdout)
        .split("\n")
        .filter((line) => line.includes('"Action":"output"'))
        .map((line) => JSON.parse(line).Output)
        .join("");
      throw new Error(`go test failed:\n${failed.slice(-8000)}\n${error.stderr}`);
    });
    const results = stdout
      .split("\n")
      .filter((line) => line.startsWith("{"))
      .map((line) => JSON.parse(line) as { Action: string; Test?: string })
      .filter((event) => event.Test !== undefined && !event.Test.includes("/") && ["pass", "fail", "skip"].includes(event.Action));
    const outcome = Object.fromEntries(results.map((event) => [event.Test, event.Action]));
    expect(outcome).toEqual(Object.fromEntries(goLibraryTests.map((name) => [name, "pass"])));
  }, 300_000);

  it("the README's Go example is examples/clients/go-library/main.go, and it runs", async () => {
    const readme = readFileSync(join(repoRoot, "README.md"), "utf8");
    const at = readme.indexOf("<!-- snippet: go-library ");
    expect(at).toBeGreaterThanOrEqual(0);
    const block = /```go\n([\s\S]*?)```/.exec(readme.slice(at))!;
    expect(block[1]).toBe(readFileSync(join(clients, "go-library/main.go"), "utf8"));
    const { stdout } = await run("go", ["run", "."], { cwd: join(clients, "go-library"), env: goEnv, timeout: 120_000 });
    // Two conversations at once, each with its own decision.
    expect(stdout).toBe("alice: All done. Saved note note.txt (37 characters).\nbob: All done. Note not saved: Bob's notebook is full.\n");
  }, 150_000);
});

describe("agentlane-bridge: the contract's tooling", () => {
  it("buf lint passes, buf breaking finds no break against the released contract, the generated code is current", async () => {
    const { stdout } = await run("bash", ["scripts/proto.sh", "--check"], { cwd: repoRoot, timeout: 120_000 });
    expect(stdout).toContain("proto: lint ok, no breaking change against proto/released/v1.binpb, generated code current");
  });

  it("buf breaking does catch a break (a field renumbered, an RPC removed)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "bridge-proto-"));
    try {
      cpSync(join(repoRoot, "proto"), dir, { recursive: true });
      const file = join(dir, "agentlane/bridge/v1/bridge.proto");
      const buf = join(repoRoot, "node_modules/.bin/buf");
      const released = join(repoRoot, "proto/released/v1.binpb");
      const original = readFileSync(file, "utf8");
      for (const broken of [original.replace("string text = 1;", "string text = 7;"), original.replace(/ {2}rpc Reset\(.*\n/, "")]) {
        expect(broken).not.toBe(original);
        writeFileSync(file, broken);
        const outcome = await run(buf, ["breaking", dir, "--against", released]).then(
          () => "no break found",
          (error) => String(error.stdout),
        );
        expect(outcome).not.toBe("no break found");
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
