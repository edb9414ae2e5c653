// Profiling aid for bench/stream.mjs: runs one host on one input a few
// times, with no other contender, and counts the batches ours delivers.
//
//   node --cpu-prof --cpu-prof-dir=/tmp/prof bench/stream/profile.mjs small ours
//   node bench/stream/cpuprofile-summary.mjs /tmp/prof/*.cpuprofile
//
// input: small (100,000 small events), nested10 / string10 (one 10 MB
// line), string50 / nested50 (one 50 MB line); host: ours | baseline.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { nestedResult, smallStream, toolEnd } from "../lines.mjs";

const require = createRequire(import.meta.url);
const { spawnBridgeProcess } = require("../../dist/index.js");
const { zodDecodeBridgeEventLine } = require("../.build/zod-baseline.js");
const WRITER = fileURLToPath(new URL("./writer.mjs", import.meta.url));

const [input = "small", host = "ours", runsArg = "5"] = process.argv.slice(2);
const inputs = {
  small: () => smallStream(100_000),
  nested10: () => [toolEnd(nestedResult(10 << 20))],
  string10: () => [toolEnd("x".repeat(10 << 20))],
  string50: () => [toolEnd("x".repeat(50 << 20))],
  nested50: () => [toolEnd(nestedResult(50 << 20))],
};
const lines = inputs[input]();
const dir = mkdtempSync(join(tmpdir(), "bridge-stream-profile-"));
const path = join(dir, "input.ndjson");
writeFileSync(path, `${lines.join("\n")}\n`);

function ours() {
  return new Promise((resolve) => {
    let events = 0;
    let batches = 0;
    let inBatch = false;
    spawnBridgeProcess(
      { command: process.execPath, args: [WRITER, path] },
      {
        onEvent() {
          events++;
          // Every batch is one callback from the native side, and microtasks
          // run after it: a new batch is an event with no pending microtask.
          if (!inBatch) {
            inBatch = true;
            batches++;
            queueMicrotask(() => (inBatch = false));
          }
        },
        onExit: () => resolve({ events, batches }),
      },
    );
  });
}

function baseline() {
  return new Promise((resolve) => {
    let events = 0;
    let pending = 2;
    const child = spawn(process.execPath, [WRITER, path], { stdio: ["pipe", "pipe", "pipe"] });
    const done = () => --pending === 0 && resolve({ events });
    createInterface({ input: child.stdout, crlfDelay: Infinity })
      .on("line", (line) => {
        zodDecodeBridgeEventLine(line);
        events++;
      })
      .once("close", done);
    child.once("exit", done);
  });
}

try {
  for (let i = 0; i < Number(runsArg); i++) {
    const start = performance.now();
    const result = await (host === "ours" ? ours() : baseline());
    console.log(`${host} ${input}: ${(performance.now() - start).toFixed(1)} ms`, result);
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
