// Child process of bench/stream.mjs: copies a prebuilt NDJSON file to its
// stdout (fd 1, a real pipe) as fast as the pipe takes it, then exits.
//
//   node bench/stream/writer.mjs FILE [CHUNK_BYTES] [PAUSE_MS]
//
// The lines were generated and written to FILE by the parent before the
// timed region; the writer only moves bytes: it reads CHUNK_BYTES (default
// 1 MiB) at a time into one reused Buffer (the file is in the page cache)
// and writes each chunk with write(2) until the pipe has taken all of it.
// Reading chunk by chunk instead of the whole file first lets the first
// bytes go out about 25 ms sooner for a 45 MB file (no fresh 45 MB buffer
// to fault in). With PAUSE_MS > 0 the writer sleeps that long between
// chunks, so that a large line takes a while to stream in.
// `process.stdout` is never touched: fd 1 stays the blocking descriptor the
// parent's spawn set up, and each write blocks until the pipe has room.
import { closeSync, openSync, readSync, writeSync } from "node:fs";

const [file, chunkArg = String(1 << 20), pauseArg = "0"] = process.argv.slice(2);
const chunk = Buffer.allocUnsafe(Number(chunkArg));
const pauseMs = Number(pauseArg);
const sleeper = new Int32Array(new SharedArrayBuffer(4));
const input = openSync(file, "r");

for (let first = true; ; first = false) {
  const length = readSync(input, chunk, 0, chunk.length, null);
  if (length === 0) break;
  if (pauseMs > 0 && !first) Atomics.wait(sleeper, 0, 0, pauseMs);
  let offset = 0;
  while (offset < length) {
    try {
      offset += writeSync(1, chunk, offset, length - offset);
    } catch (error) {
      // Only if fd 1 was handed over non-blocking: wait for room and retry.
      if (error.code !== "EAGAIN") throw error;
      Atomics.wait(sleeper, 0, 0, 1);
    }
  }
}
closeSync(input);
