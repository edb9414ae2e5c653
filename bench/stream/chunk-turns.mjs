// Does parsing a large array in chunks, one per event-loop turn, cost a
// fresh process more than one JSON.parse of the whole line? No child, no
// addon: the 10 MB nested line of measurement 5 and its array cut into
// chunks of 256 KiB (as bridge_core::lift cuts it) are written to files
// first; then each run is a new `node` that reads one file and parses it
// one way, timed by its main thread's CPU (schedstat) and wall clock.
//
//   node bench/stream/chunk-turns.mjs [ROUNDS]
//
// Modes: `whole` (JSON.parse of the line), `turns` (the skeleton, then one
// chunk per setImmediate turn, joined with concat, as lib/stream/batch.ts
// restores a lifted array) and `one-turn` (the same chunks in one turn).
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const CHUNK_BYTES = 256 * 1024;
const MODES = ["whole", "turns", "one-turn"];

if (process.argv[2] === "--run") {
  // A fresh process: one parse of one file.
  const { threadCpuMs } = await import("./measure.mjs");
  const [, , , mode, path] = process.argv;
  const text = readFileSync(path, "utf8");
  const parts = mode === "whole" ? [text] : text.split("\n");
  const cpu0 = threadCpuMs();
  const t0 = performance.now();
  const done = (event) => {
    const files = event.event.payload.result.files.length;
    process.stdout.write(`${JSON.stringify({ cpuMs: threadCpuMs() - cpu0, wallMs: performance.now() - t0, files })}\n`);
  };
  if (mode === "whole") done(JSON.parse(parts[0]));
  else {
    const skeleton = JSON.parse(parts[0]);
    const chunks = parts.slice(1);
    const restore = (pieces) => {
      skeleton.event.payload.result.files = [].concat(...pieces);
      done(skeleton);
    };
    if (mode === "one-turn") restore(chunks.map((chunk) => JSON.parse(chunk)));
    else {
      const pieces = [];
      const step = () => {
        pieces.push(JSON.parse(chunks[pieces.length]));
        if (pieces.length < chunks.length) setImmediate(step);
        else restore(pieces);
      };
      setImmediate(step);
    }
  }
} else {
  const rounds = Number(process.argv[2] ?? 7);
  const { nestedResult, toolEnd } = await import("../lines.mjs");
  const dir = mkdtempSync(join(tmpdir(), "chunk-turns-"));
  try {
    const line = toolEnd(nestedResult(10 << 20));
    const event = JSON.parse(line);
    const files = event.event.payload.result.files;
    const chunks = [];
    for (let i = 0, cut = [], bytes = 0; i < files.length; i++) {
      const text = JSON.stringify(files[i]);
      cut.push(text);
      bytes += text.length + 1;
      if (bytes >= CHUNK_BYTES || i === files.length - 1) {
        chunks.push(`[${cut.join(",")}]`);
        cut = [];
        bytes = 0;
      }
    }
    event.event.payload.result.files = "lifted";
    const paths = { whole: join(dir, "line.json"), parts: join(dir, "parts.txt") };
    writeFileSync(paths.whole, line);
    writeFileSync(paths.parts, [JSON.stringify(event), ...chunks].join("\n"));
    const runs = Object.fromEntries(MODES.map((mode) => [mode, []]));
    const self = fileURLToPath(import.meta.url);
    for (let round = 0; round < rounds; round++) {
      // Rotating order, so that no mode always runs first.
      for (let k = 0; k < MODES.length; k++) {
        const mode = MODES[(round + k) % MODES.length];
        const out = spawnSync(process.execPath, [self, "--run", mode, mode === "whole" ? paths.whole : paths.parts], { encoding: "utf8" });
        if (out.status !== 0) throw new Error(`${mode}: ${out.stderr}`);
        const result = JSON.parse(out.stdout);
        if (result.files !== files.length) throw new Error(`${mode}: ${result.files} files, expected ${files.length}`);
        runs[mode].push(result);
      }
    }
    const median = (values) => values.sort((a, b) => a - b)[values.length >> 1];
    console.log(`${chunks.length} chunks of ${CHUNK_BYTES / 1024} KiB, ${rounds} fresh runs per mode, medians:`);
    console.log("| mode | thread CPU | wall |\n| --- | ---: | ---: |");
    for (const mode of MODES) {
      console.log(`| ${mode} | ${median(runs[mode].map((r) => r.cpuMs)).toFixed(1)} ms | ${median(runs[mode].map((r) => r.wallMs)).toFixed(1)} ms |`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
