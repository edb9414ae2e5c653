// What both publish rehearsals share (scripts/rehearse-publish.mjs for the
// npm packages, scripts/rehearse-publish-python.mjs for the Python module):
// running a command without ever rejecting, a free loopback port for the
// local registry or index, and the counting of steps into the one line
// `npm test` reads (`<name>: N passed, N failed (S s)`).
import { spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { createServer } from "node:net";

/** Runs a command; resolves with its exit status and output (never rejects). */
export function exec(command, args, { cwd, env, timeoutMs = 180_000 } = {}) {
  return new Promise((resolve) => {
    let stdout = "";
    let stderr = "";
    const child = spawn(command, args, { cwd, env: env ?? process.env, stdio: ["ignore", "pipe", "pipe"] });
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    const timer = setTimeout(() => {
      stderr += `\n(killed after ${timeoutMs} ms)`;
      child.kill("SIGKILL");
    }, timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      resolve({ code: -1, stdout, stderr: `${stderr}${error.message}` });
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? signal, stdout, stderr });
    });
  });
}

/** The end of a command's output, for a failure's detail. */
export const tail = (result) => `exit ${result.code}: ${`${result.stderr}\n${result.stdout}`.trim().split("\n").slice(-12).join("\n")}`;

/** A free port on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * The steps of one rehearsal: `record(who, step, ok, detail)` prints each
 * (a failure as `<name> FAILED: <who> <step>: <detail>`) and returns ok;
 * `finish(work, crashed)` removes the work folder unless something failed
 * (or PBN_REHEARSAL_KEEP is set), prints the count line and exits.
 */
export function steps(name) {
  const started = Date.now();
  const results = [];
  const record = (who, step, ok, detail = "") => {
    results.push(ok);
    // The time since the rehearsal began: where a slow run spends it.
    const at = `[${Math.round((Date.now() - started) / 1000)} s]`;
    const line = `${who} ${step}: ${ok ? "ok" : "FAILED"} ${at}${detail ? ` (${String(detail).split("\n").slice(0, 12).join("\n    ").slice(0, 1500)})` : ""}`;
    console.log(ok ? `  ${line}` : `${name} FAILED: ${line}`);
    return ok;
  };
  const finish = (work, crashed) => {
    const passed = results.filter(Boolean).length;
    const failed = results.length - passed + (results.length === 0 ? 1 : 0);
    if (failed === 0 && !process.env.PBN_REHEARSAL_KEEP) rmSync(work, { recursive: true, force: true });
    else console.log(`${name}: its folders are kept in ${work}`);
    console.log(`${name}: ${passed} passed, ${failed} failed (${Math.round((Date.now() - started) / 1000)} s)`);
    process.exit(failed === 0 && !crashed ? 0 : 1);
  };
  return { record, finish };
}
