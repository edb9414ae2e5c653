// Child process of bench/stream.mjs: writes a prebuilt NDJSON file to its
// stdout (fd 1, a real pipe) as fast as the pipe takes it, then exits.
//
//   node bench/stream/writer.mjs FILE [CHUNK_BYTES] [PAUSE_MS]
//
// The file is read into one Buffer before the first write and written with
// write(2) in CHUNK_BYTES pieces (default 1 MiB). With PAUSE_MS > 0 the
// writer sleeps that long between chunks, so that a large line takes a
// while to stream in. `process.stdout` is never touched: fd 1 stays the
// blocking descriptor the parent's spawn set up, and each write blocks
// until the pipe has taken it.
import { readFileSync, writeSync } from "node:fs";

const [file, chunkArg = String(1 << 20), pauseArg = "0"] = process.argv.slice(2);
const data = readFileSync(file);
const chunkBytes = Number(chunkArg);
const pauseMs = Number(pauseArg);
const sleeper = new Int32Array(new SharedArrayBuffer(4));

let offset = 0;
while (offset < data.length) {
  const length = Math.min(chunkBytes, data.length - offset);
  try {
    offset += writeSync(1, data, offset, length);
  } catch (error) {
    // Only if fd 1 was handed over non-blocking: wait for room and retry.
    if (error.code !== "EAGAIN") throw error;
    Atomics.wait(sleeper, 0, 0, 1);
    continue;
  }
  if (pauseMs > 0 && offset < data.length) Atomics.wait(sleeper, 0, 0, pauseMs);
}
