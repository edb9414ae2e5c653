/**
 * What a user on a platform without a prebuilt binary gets: the packed
 * package installed into a fresh project with no binary anywhere (as if the
 * platform package had none to give), a loader error that names the command
 * to build one, and that command, which builds the addon with cargo from the
 * Rust sources the package itself ships and puts it where the loader looks.
 *
 * A release build from scratch (unoptimised, see below), so `npm test`
 * runs this file in a step of its own (PBN_SOURCE_BUILD=1), apart from the
 * suites whose timings it would disturb.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { repoRoot } from "./helpers";

// Made in beforeAll: a skipped run (no PBN_SOURCE_BUILD) leaves no empty folder behind.
let scratch = "";
let project = "";
let installed = "";

/** Every `.node` file under `dir`. */
function binaries(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".node"));
}

describe.runIf(process.env.PBN_SOURCE_BUILD === "1")("building the addon from the installed package's sources", () => {
  beforeAll(() => {
    scratch = mkdtempSync(join(tmpdir(), "pbn-source-build-"));
    project = join(scratch, "consumer");
    installed = join(project, "node_modules", "@agentlanejs", "process-bridge-native");
    const npm = (args: string[], cwd: string) =>
      execFileSync("npm", [...args, "--no-audit", "--no-fund", "--loglevel=error"], { cwd, encoding: "utf8" });
    const tarball = join(scratch, npm(["pack", "--pack-destination", scratch], repoRoot).trim().split("\n").at(-1)!);
    mkdirSync(project);
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "consumer", private: true, version: "1.0.0" }));
    npm(["install", tarball], project);
  }, 120_000);

  afterAll(() => scratch && rmSync(scratch, { recursive: true, force: true }));

  it("has no binary to load, and the loader's error gives the command that builds one", () => {
    expect(binaries(join(project, "node_modules"))).toEqual([]);
    const result = spawnSync(process.execPath, ["-e", 'require("@agentlanejs/process-bridge-native")'], { cwd: project, encoding: "utf8" });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain(`has no native binary for this platform (${process.platform}-${process.arch}`);
    expect(result.stderr).toContain(`build from source with a Rust toolchain: \`node ${join(installed, "scripts", "build-from-source.mjs")}\``);
  });

  it("builds it with cargo from the package's own files; the package then decodes and reads a real child", () => {
    const build = spawnSync(process.execPath, [join(installed, "scripts", "build-from-source.mjs")], {
      cwd: project,
      encoding: "utf8",
      timeout: 600_000,
      // Cargo's output outside the scratch folder, so that a second local run
      // is incremental. Unoptimised (the user's command, with the release
      // profile's optimisation, LTO and debug info turned off by cargo's own
      // environment overrides): what this checks is that the package's own
      // files build and load, not the optimisation, which is most of the
      // build's time (opt-level 3 with LTO: over two minutes on 2 cores).
      env: {
        ...process.env,
        CARGO_TARGET_DIR: join(repoRoot, "target", "source-build"),
        CARGO_PROFILE_RELEASE_LTO: "false",
        CARGO_PROFILE_RELEASE_OPT_LEVEL: "0",
        CARGO_PROFILE_RELEASE_DEBUG: "false",
        CARGO_PROFILE_RELEASE_CODEGEN_UNITS: "16",
      },
    });
    expect(build.status, build.stderr).toBe(0);
    const wanted = `process-bridge-native.${process.platform}-${process.arch}${process.platform === "linux" ? "-gnu" : ""}.node`;
    expect(build.stdout).toContain(`wrote ${join(installed, wanted)}`);
    expect(existsSync(join(installed, wanted))).toBe(true);
    const supervisor = `process-bridge-supervisor.${wanted.slice("process-bridge-native.".length, -".node".length)}`;
    expect(build.stdout).toContain(`wrote ${join(installed, supervisor)}`);

    const check = `
      const { decodeBridgeEventLine, encodeBridgeCommand, spawnBridgeProcess } = require("@agentlanejs/process-bridge-native");
      const ready = '{"protocol_version":"1.0","type":"ready","ts":1,"version":"0.22.0","package":"p","metadata":{},"config":{}}';
      console.log("decoded", decodeBridgeEventLine(ready).type);
      process.stdout.write("encoded " + encodeBridgeCommand({ type: "prompt", text: "hi" }));
      let mode;
      spawnBridgeProcess(
        { command: process.execPath, args: ["-e", "console.log(process.argv[1])", ready] },
        { onStarted: (info) => (mode = info.mode), onEvent: (event) => console.log("child", event.type), onExit: (code) => console.log("exit", code, mode) },
      );
    `;
    const run = spawnSync(process.execPath, ["-e", check], { cwd: project, encoding: "utf8", timeout: 30_000 });
    expect(run.stderr).toBe("");
    expect(run.stdout).toBe('decoded ready\nencoded {"type":"prompt","text":"hi","protocol_version":"1.0"}\nchild ready\nexit 0 supervised\n');
  }, 600_000);
});
