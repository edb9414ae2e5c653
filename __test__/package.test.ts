/**
 * The installable package: `npm pack` the main package and the platform
 * package (as the release publishes them), install both tarballs into a
 * fresh project, and complete a conversation there. Without a binary for
 * the platform, the loader's error names the platform and what to do.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "./helpers";
// @ts-expect-error: a plain ES module script, without types.
import { stageSupervisor } from "../scripts/stage-supervisor.mjs";

const scratch = mkdtempSync(join(tmpdir(), "pbn-package-"));
let mainTarball = "";
let platformTarball = "";
/** This machine's platform package (npm/<platform>). */
let platform = "";

function npm(args: string[], cwd: string): string {
  return execFileSync("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], { cwd, encoding: "utf8" });
}

function project(name: string, tarballs: string[]): string {
  const dir = join(scratch, name);
  mkdirSync(dir);
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name, private: true, version: "1.0.0" }));
  npm(["install", ...tarballs], dir);
  return dir;
}

/**
 * Runs `body` in `dir` as CommonJS (`<name>.cjs`, after `cjs`) and as an ES
 * module (`<name>.mjs`, after `esm`): each must print exactly `stdout` and
 * nothing on stderr.
 */
function inBothModuleSystems(dir: string, name: string, loads: { cjs: string; esm: string }, body: string, stdout: string): void {
  for (const [extension, load] of [["cjs", loads.cjs], ["mjs", loads.esm]] as const) {
    const script = join(dir, `${name}.${extension}`);
    writeFileSync(script, `${load}\n${body}`);
    const result = spawnSync(process.execPath, [script], { cwd: dir, encoding: "utf8", timeout: 60_000 });
    expect(result.stderr, script).toBe("");
    expect(result.stdout, script).toBe(stdout);
  }
}

beforeAll(() => {
  mainTarball = join(scratch, npm(["pack", "--pack-destination", scratch], repoRoot).trim().split("\n").at(-1)!);
  platform = readdirSync(join(repoRoot, "npm")).find((d) => d === `${process.platform}-${process.arch}-gnu` || d === `${process.platform}-${process.arch}`) ?? "";
  if (!platform) throw new Error(`no npm/ folder for ${process.platform}-${process.arch}`);
  // This platform's binary: scripts/cross-arm64.sh puts an arm64 one beside it for a while.
  const binary = `process-bridge-native.${platform}.node`;
  const staged = join(scratch, "platform-package");
  mkdirSync(staged);
  copyFileSync(join(repoRoot, "npm", platform, "package.json"), join(staged, "package.json"));
  copyFileSync(join(repoRoot, binary), join(staged, binary));
  // The supervisor goes in the same package, as the release's publish job puts it there.
  stageSupervisor(join(repoRoot, `process-bridge-supervisor.${platform}`), staged);
  platformTarball = join(scratch, npm(["pack", "--pack-destination", scratch], staged).trim().split("\n").at(-1)!);
}, 120_000);

afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe("the packed package", () => {
  it("ships the built API, the loader and the Rust sources to build from, not binaries or tests", () => {
    const listing = execFileSync("tar", ["-tzf", mainTarball], { encoding: "utf8" }).split("\n");
    expect(listing).toContain("package/dist/index.js");
    expect(listing).toContain("package/dist/index.mjs");
    expect(listing).toContain("package/dist/index.d.ts");
    expect(listing).toContain("package/index.js");
    // For scripts/build-from-source.mjs on a platform without a prebuilt binary (source-build.test.ts).
    for (const file of ["scripts/build-from-source.mjs", "Cargo.toml", "Cargo.lock", "src/lib.rs", "crates/bridge-core/src/lib.rs"]) {
      expect(listing).toContain(`package/${file}`);
    }
    expect(listing.some((f) => f.endsWith(".node") || /\/(tests|fuzz|examples|__test__|bench)\//.test(f))).toBe(false);
  });

  it("installs into a fresh project and completes a conversation, via require and import", () => {
    const dir = project("consumer", [mainTarball, platformTarball]);
    const conversation = `
      const child = spawnBridgeProcess(
        { command: ${JSON.stringify(join(repoRoot, ".venv", "bin", "python"))}, args: ["-m", "agentlane_process_bridge", "--app", "demo_app:create_backend"], cwd: ${JSON.stringify(join(repoRoot, "examples", "backend"))} },
        {
          onEvent(event) {
            if (event.type === "ready") channel.send({ type: "prompt", text: "save this" });
            if (event.type === "run_event" && event.event.type === "tool_approval" && event.event.payload.event.record.status === "pending") {
              channel.send({ type: "approve", id: event.event.payload.event.record.request_id, allowed: true });
            }
            if (event.type === "run_complete") { console.log("final:", event.final_output); channel.shutdown(); }
          },
          onDecodeError(error) { console.log("decode error", error.message); },
          onExit(code) { console.log("exit", code); },
        },
      );
      const channel = createBridgeChannel(child);
    `;
    inBothModuleSystems(
      dir,
      "run",
      {
        cjs: 'const { spawnBridgeProcess, createBridgeChannel } = require("@agentlanejs/process-bridge-native");',
        esm: 'import { spawnBridgeProcess, createBridgeChannel } from "@agentlanejs/process-bridge-native";',
      },
      conversation,
      "final: All done. Saved note note.txt (9 characters).\nexit 0\n",
    );
    // One addon instance and one error class for both module systems.
    const identity = spawnSync(
      process.execPath,
      ["--input-type=module", "-e", 'import { createRequire } from "node:module"; import * as esm from "@agentlanejs/process-bridge-native"; const cjs = createRequire(import.meta.url)("@agentlanejs/process-bridge-native"); console.log(esm.BridgeDecodeError === cjs.BridgeDecodeError);'],
      { cwd: dir, encoding: "utf8" },
    );
    expect(identity.stdout.trim()).toBe("true");
  });

  it("ships the supervisor in the platform package", () => {
    const listing = execFileSync("tar", ["-tzf", platformTarball], { encoding: "utf8" }).split("\n");
    expect(listing).toContain(`package/process-bridge-supervisor.${platform}`);
    expect(listing).toContain(`package/process-bridge-native.${platform}.node`);
  });

  it("serves the testing kit as ./testing, via require and import, with its backend inside the package", () => {
    const dir = join(scratch, "consumer");
    // Supervised: the supervisor was found in the platform package.
    inBothModuleSystems(
      dir,
      "kit",
      {
        cjs: 'const { createAgentSession } = require("@agentlanejs/process-bridge-native"); const { scriptedBackend } = require("@agentlanejs/process-bridge-native/testing");',
        esm: 'import { createAgentSession } from "@agentlanejs/process-bridge-native"; import { scriptedBackend } from "@agentlanejs/process-bridge-native/testing";',
      },
      `
      const fake = scriptedBackend({ runs: [{ steps: [{ text: "Hi from the kit." }] }] });
      createAgentSession({ backend: fake.backend }).then(async (session) => {
        const result = await session.run("hello");
        await session.close();
        console.log(result.finalOutput, fake.commands().map((c) => c.type).join(","), session.process.mode);
        fake.dispose();
      });
    `,
      "Hi from the kit. prompt,shutdown supervised\n",
    );
  });

  it("serves the PostgreSQL store as ./stores/postgres, via require and import, without installing pg (an optional peer)", () => {
    const dir = join(scratch, "consumer");
    expect(existsSync(join(dir, "node_modules", "pg"))).toBe(false);
    inBothModuleSystems(
      dir,
      "stores",
      {
        cjs: 'const { postgresStore, postgresSchema } = require("@agentlanejs/process-bridge-native/stores/postgres"); const { diskStore, memoryStore } = require("@agentlanejs/process-bridge-native");',
        esm: 'import { postgresStore, postgresSchema } from "@agentlanejs/process-bridge-native/stores/postgres"; import { diskStore, memoryStore } from "@agentlanejs/process-bridge-native";',
      },
      'console.log(typeof postgresStore, postgresSchema().split("\\n")[0], typeof diskStore, typeof memoryStore);',
      'function CREATE TABLE IF NOT EXISTS "agentlane_snapshots" ( function function\n',
    );
  });

  it("a platform package that lost its supervisor (gone, or not executable): the session says so once, with a code, and check fails naming it", () => {
    const dir = project("lost-supervisor", [mainTarball, platformTarball]);
    const supervisor = join(dir, "node_modules", "@agentlanejs", `process-bridge-native-${platform}`, `process-bridge-supervisor.${platform}`);
    const backend = { command: join(repoRoot, ".venv", "bin", "python"), args: ["-m", "agentlane_process_bridge", "--app", "demo_app:create_backend"], cwd: join(repoRoot, "examples", "backend") };
    writeFileSync(
      join(dir, "session.cjs"),
      `const { createAgentSession } = require("@agentlanejs/process-bridge-native");
      (async () => {
        const seen = [];
        for (let i = 0; i < 2; i++) {
          const session = await createAgentSession({ backend: ${JSON.stringify(backend)}, onDiagnostic: (d) => { if (d.kind === "supervisor-missing") seen.push(d.code + " " + d.path); } });
          seen.push(session.process.mode);
          await session.close();
        }
        console.log(seen.join("\\n"));
      })();`,
    );
    const cli = join(dir, "node_modules", ".bin", "process-bridge-native");
    for (const [breakIt, errno] of [[() => chmodSync(supervisor, 0o644), "EACCES"], [() => rmSync(supervisor), "ENOENT"]] as const) {
      breakIt();
      const session = spawnSync(process.execPath, ["session.cjs"], { cwd: dir, encoding: "utf8", timeout: 60_000 });
      expect(session.stderr).toBe("");
      // One diagnostic per session started (each says so), and the mode it fell back to.
      expect(session.stdout).toBe(`${errno} ${supervisor}\ngrouped\n${errno} ${supervisor}\ngrouped\n`);
      const check = spawnSync(cli, ["check", "--", backend.command, ...backend.args], { cwd: backend.cwd, encoding: "utf8", timeout: 60_000 });
      expect(check.status).toBe(1);
      expect(check.stdout).toContain(`process-bridge-supervisor.${platform}`);
      expect(check.stdout.trim().split("\n").at(-1)).toBe("check failed");
    }
  });

  it("explains a missing platform binary: names the platform and what to do", () => {
    const dir = project("no-binary", [mainTarball]);
    const result = spawnSync(process.execPath, ["-e", 'require("@agentlanejs/process-bridge-native")'], { cwd: dir, encoding: "utf8" });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain(`has no native binary for this platform (${process.platform}-${process.arch}, Node ${process.version})`);
    expect(result.stderr).toContain("@agentlanejs/process-bridge-native-<platform>");
    expect(result.stderr).toContain("reinstall without --no-optional/--omit=optional");
  });
});
