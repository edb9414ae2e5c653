// Child process of bench/stream.mjs: copies a prebuilt NDJSON file to its
// stdout (fd 1, a real pipe) as fast as the pipe takes it, then exits.
//
//   node bench/stream/writer.mjs FILE [CHUNK_BYTES] [PAUSE_MS]
//   node bench/stream/writer.mjs FILE on-request
//
// The lines were generated and written to FILE by the parent before the
// timed region; the writer only moves bytes: it reads CHUNK_BYTES (default
// 1 MiB) at a time into one reused Buffer (the file is in the page cache)
// and writes each chunk with write(2) until the pipe has taken all of it.
// Reading chunk by chunk instead of the whole file first lets the first
// bytes go out about 25 ms sooner for a 45 MB file (no fresh 45 MB buffer
// to fault in). With PAUSE_MS > 0 the writer sleeps that long between
// chunks, so that a large line takes a while to stream in.
//
// With `on-request` the writer stays up and copies the file once for every
// newline it reads on stdin, until stdin ends: a running backend answering
// requests, so that a host's cost of receiving output can be timed without
// the spawn and exit around it.
//
// `process.stdout` is never touched: fd 1 stays the blocking descriptor the
// parent's spawn set up, and each write blocks until the pipe has room.
import { closeSync, openSync, readSync, writeSync } from "node:fs";
import { blocking, pause } from "./blocking.mjs";

const [file, chunkArg = String(1 << 20), pauseArg = "0"] = process.argv.slice(2);
const onRequest = chunkArg === "on-request";
const chunk = Buffer.allocUnsafe(onRequest ? 1 << 20 : Number(chunkArg));
const pauseMs = onRequest ? 0 : Number(pauseArg);

function copyFile() {
  const input = openSync(file, "r");
  for (let first = true; ; first = false) {
    const length = readSync(input, chunk, 0, chunk.length, null);
    if (length === 0) break;
    if (pauseMs > 0 && !first) pause(pauseMs);
    let offset = 0;
    while (offset < length) offset += blocking(() => writeSync(1, chunk, offset, length - offset));
  }
  closeSync(input);
}

if (onRequest) {
  const request = Buffer.alloc(256);
  for (;;) {
    const length = blocking(() => readSync(0, request, 0, request.length, null));
    if (length === 0) break;
    for (let i = 0; i < length; i++) if (request[i] === 0x0a) copyFile();
  }
} else {
  copyFile();
}
