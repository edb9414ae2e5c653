// The backend of bench/bridge.mjs: speaks the protocol just enough to be
// hosted by agentlane-bridge and by spawnBridgeProcess alike, and answers
// from prebuilt files so that the hosts, not the backend, are measured.
//
//   node bench/bridge/backend.mjs DIR [ignored args…]
//
// It writes `ready`, then for every command line on stdin:
//   configure         the `config` answer, then DIR/burst.ndjson (100,000 small
//                     events) as fast as the pipe takes them
//   prompt "big"      run_start, DIR/big.ndjson (one 20 MB tool_end), run_complete
//   any other prompt  run_start, run_complete
//   shutdown          `shutdown`, then exit
// Files are copied with write(2) on fd 1 in 1 MiB chunks (see
// bench/stream/writer.mjs for why).
import { closeSync, openSync, readSync, writeSync } from "node:fs";
import { join } from "node:path";
import { blocking } from "../stream/blocking.mjs";

const dir = process.argv[2];
const chunk = Buffer.allocUnsafe(1 << 20);
const envelope = (type, fields = {}) => `${JSON.stringify({ protocol_version: "1.0", type, ts: 1767225600.5, ...fields })}\n`;

function write(text) {
  const bytes = Buffer.from(text);
  let offset = 0;
  while (offset < bytes.length) offset += blocking(() => writeSync(1, bytes, offset, bytes.length - offset));
}

function copy(name) {
  const input = openSync(join(dir, name), "r");
  for (;;) {
    const length = readSync(input, chunk, 0, chunk.length, null);
    if (length === 0) break;
    let offset = 0;
    while (offset < length) offset += blocking(() => writeSync(1, chunk, offset, length - offset));
  }
  closeSync(input);
}

write(envelope("ready", { version: "0.22.0", package: "agentlane-process-bridge", metadata: { app: "bench" } }));
let pending = "";
const input = Buffer.alloc(64 * 1024);
for (;;) {
  const length = blocking(() => readSync(0, input, 0, input.length, null));
  if (length === 0) break;
  pending += input.toString("utf8", 0, length);
  let newline;
  while ((newline = pending.indexOf("\n")) >= 0) {
    const command = JSON.parse(pending.slice(0, newline));
    pending = pending.slice(newline + 1);
    if (command.type === "configure") {
      write(envelope("config", { ok: true, config: {}, error: null }));
      copy("burst.ndjson");
    } else if (command.type === "prompt") {
      write(envelope("run_start", { prompt: command.text }));
      if (command.text === "big") copy("big.ndjson");
      write(envelope("run_complete", { final_output: "done", turn_count: 1, response_count: 1, shim_state: {} }));
    } else if (command.type === "shutdown") {
      write(envelope("shutdown"));
      process.exit(0);
    }
  }
}
