// What a user's first program does with the installed package, run in a
// fresh project of the publish rehearsal (scripts/rehearse-publish.mjs) by
// the project's own runtime (`node`, `yarn node` under Plug'n'Play, an
// emulated arm64 Node): one JSON line per step, {"step", "ok", "detail"}.
//
//   node probe.cjs <platform> <python> <backend dir>
"use strict";
const { createRequire } = require("node:module");
const { statSync } = require("node:fs");
const { dirname, join } = require("node:path");

const [platform, python, backendDir] = process.argv.slice(2);
const mainName = "@agentlanejs/process-bridge-native";

function report(step, ok, detail) {
  process.stdout.write(`${JSON.stringify({ step, ok, detail })}\n`);
}

async function step(name, body) {
  try {
    const detail = await body();
    report(name, true, detail);
    return true;
  } catch (error) {
    report(name, false, error instanceof Error ? error.message : String(error));
    return false;
  }
}

async function main() {
  let api;
  const loaded = await step("addon", () => {
    api = require(mainName);
    // Decoding runs in the addon: a bad line is its typed error.
    try {
      api.decodeBridgeEventLine("{not json");
    } catch (error) {
      if (!(error instanceof api.BridgeDecodeError)) throw new Error(`decode threw ${error}, not a BridgeDecodeError`);
      return `decode error code ${error.code}`;
    }
    throw new Error("decoding a bad line did not throw");
  });
  let platformDir;
  await step("resolve", () => {
    // As the package's own code resolves it: from the main package.
    const fromMain = createRequire(require.resolve(`${mainName}/package.json`));
    const manifest = fromMain.resolve(`${mainName}-${platform}/package.json`);
    platformDir = dirname(manifest);
    return platformDir;
  });
  await step("exec-bit", () => {
    if (!platformDir) throw new Error("no platform package resolved");
    const file = join(platformDir, `process-bridge-supervisor.${platform}`);
    const mode = statSync(file).mode & 0o777;
    if ((mode & 0o111) !== 0o111) throw new Error(`${file} has mode ${mode.toString(8)}`);
    return `${file} ${mode.toString(8)}`;
  });
  if (loaded) {
    await step("conversation", async () => {
      const diagnostics = [];
      const session = await api.createAgentSession({
        backend: { command: python, args: ["-m", "agentlane_process_bridge", "--app", "demo_app:create_backend"], cwd: backendDir },
        approvals: () => true,
        onDiagnostic: (diagnostic) => diagnostics.push(diagnostic),
        readyTimeoutMs: 120_000,
      });
      try {
        const mode = session.process && session.process.mode;
        const result = await session.run("Save a note about the rehearsal.");
        if (result.status !== "completed" || !String(result.finalOutput).includes("Saved note")) throw new Error(`the run ended ${JSON.stringify(result)}`);
        if (mode !== "supervised") throw new Error(`the backend ran ${mode}, not supervised (diagnostics: ${JSON.stringify(diagnostics.map((d) => d.kind))})`);
        return `completed, ${mode}`;
      } finally {
        await session.close();
      }
    });
    await step("testing", async () => {
      const kit = require(`${mainName}/testing`);
      const fake = kit.scriptedBackend({ runs: [{ steps: [{ text: "scripted answer" }] }] });
      try {
        const session = await api.createAgentSession({ backend: fake.backend });
        const result = await session.run("hi");
        await session.close();
        if (result.status !== "completed" || result.finalOutput !== "scripted answer") throw new Error(`the scripted run ended ${JSON.stringify(result)}`);
        return `scripted run ${JSON.stringify(result.finalOutput)}, ${fake.commands().length} commands`;
      } finally {
        fake.dispose();
      }
    });
  }
}

main().then(
  () => process.exit(0),
  (error) => {
    report("probe", false, String(error && error.stack ? error.stack : error));
    process.exit(1);
  },
);
