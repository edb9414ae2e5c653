// What differs on a runtime, and what the package says where the runtime
// cannot do a part (README "Runtimes"). Deno: a host withheld one of the
// permissions it needs gets a RuntimePermissionError (`permission-denied`,
// naming the flag), never a "no native binary" or "broken install" story,
// a crash or a hang; and a package linked from outside node_modules loads
// (Deno reads `.js` there as CommonJS only by the package's `"type"`).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { runtime, test } from "./harness.mjs";

const probe = fileURLToPath(new URL("./permissions-probe.mjs", import.meta.url));

/** Runs a script under Deno with only `flags`; resolves with its one JSON line. */
function denoRun(flags, script, cwd = process.cwd()) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ["run", ...flags, script], {
      cwd,
      env: { ...process.env, DENO_NO_PROMPT: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    let err = "";
    child.stdout.on("data", (chunk) => (out += chunk));
    child.stderr.on("data", (chunk) => (err += chunk));
    child.on("error", reject);
    child.on("close", (code) => {
      try {
        resolve(JSON.parse(out.trim().split("\n").at(-1)));
      } catch {
        reject(new Error(`exit ${code}, no JSON line: ${out.slice(-400)} ${err.slice(-800)}`));
      }
    });
  });
}

function assertDenied(error, permission, label) {
  assert.ok(error && typeof error === "object", `${label}: ${JSON.stringify(error)}`);
  assert.equal(error.name, "RuntimePermissionError", `${label}: ${JSON.stringify(error)}`);
  assert.equal(error.code, "permission-denied", label);
  assert.equal(error.permission, permission, label);
  assert.match(error.message, new RegExp(`--allow-${permission}`), label);
}

if (runtime === "deno") {
  test("deno: without --allow-env or --allow-ffi, loading is RuntimePermissionError naming the flag", async () => {
    assertDenied((await denoRun(["--allow-read"], probe)).load, "env", "read only");
    assertDenied((await denoRun(["--allow-read", "--allow-env"], probe)).load, "ffi", "no ffi");
  });

  test("deno: without --allow-sys, spawning and a session start (the supervisor's lookup is native: nothing asks for sys)", async () => {
    const out = await denoRun(["--allow-read", "--allow-env", "--allow-ffi", "--allow-run"], probe);
    assert.equal(out.load, undefined, JSON.stringify(out.load));
    assert.equal(out.spawn, "started", JSON.stringify(out));
    // /bin/true exits before any ready event: the start itself was allowed.
    assert.equal(out.session.name, "SessionStartError", JSON.stringify(out.session));
    assert.equal(out.session.code, "exited-before-ready", JSON.stringify(out.session));
  });

  test("deno: without --allow-run, the spawn fails as onSpawnError permission-denied and the session as spawn-failed", async () => {
    const out = await denoRun(["--allow-read", "--allow-env", "--allow-ffi", "--allow-sys"], probe);
    assert.equal(out.spawnError?.reason, "permission-denied", JSON.stringify(out));
    assert.equal(out.session.code, "spawn-failed", JSON.stringify(out.session));
    assert.equal(out.session.cause?.reason, "permission-denied");
    assert.match(out.session.message, /--allow-run/);
  });

  test("deno: a package linked from outside node_modules (npm install <dir>) loads and decodes", async () => {
    const project = process.env.PBN_LINKED_PROJECT;
    assert.ok(project, "PBN_LINKED_PROJECT is not set");
    const script = join(project, "linked.mjs");
    writeFileSync(
      script,
      [
        'import { decodeBridgeEventLine, BridgeDecodeError } from "@agentlanejs/process-bridge-native";',
        "let code;",
        'try { decodeBridgeEventLine("{not json"); } catch (error) { code = error instanceof BridgeDecodeError ? error.code : String(error); }',
        "console.log(JSON.stringify({ code }));",
      ].join("\n"),
    );
    assert.deepEqual(await denoRun(["-A"], script, project), { code: "invalid-json" });
  });
}
