// A host program run under the runtime being tested, by containment.mjs:
// starts a backend tree and prints `{"supervisor", "pids"}` as one line,
// then either waits to be SIGKILLed (`wait`) or calls process.exit (`exit`).
//
//   <runtime> host-child.mjs <wait|exit> <supervised|grouped>
import { spawnTree } from "./tree.mjs";

const [how, mode] = process.argv.slice(2);
const tree = await spawnTree({ supervise: mode === "supervised", escape: mode === "supervised" });
process.stdout.write(`${JSON.stringify({ supervisor: tree.child.pid, pids: tree.pids })}\n`);
if (how === "exit") process.exit(0);
setInterval(() => {}, 1000);
