// A host program run under the runtime being tested, by containment.mjs.
//
//   <runtime> host-child.mjs <wait|exit> <supervised|grouped>
//     starts a backend tree and prints `{"supervisor", "pids"}` as one line,
//     then waits to be SIGKILLed (`wait`) or calls process.exit (`exit`);
//   <runtime> host-child.mjs natural
//     runs a supervised child and a scripted session to their end, prints
//     `{"done": true}` and returns: the runtime must then exit by itself
//     (under Deno the host's copies of the child's socket ends once kept it
//     running for ever).
import { createAgentSession, spawnBridgeProcess } from "@agentlanejs/process-bridge-native";
import { scriptedBackend } from "@agentlanejs/process-bridge-native/testing";
import { spawnTree } from "./tree.mjs";

const [how, mode] = process.argv.slice(2);
if (how === "natural") {
  await new Promise((resolve) => spawnBridgeProcess({ command: "/bin/sh", args: ["-c", "echo hi >&2"], supervise: true }, { onEvent() {}, onExit: resolve }));
  const fake = scriptedBackend({ runs: [{ steps: [{ text: "done" }] }] });
  const session = await createAgentSession({ backend: fake.backend });
  await session.run("hi");
  await session.close();
  fake.dispose();
  process.stdout.write(`${JSON.stringify({ done: true })}\n`);
} else {
  const tree = await spawnTree({ supervise: mode === "supervised", escape: mode === "supervised" });
  process.stdout.write(`${JSON.stringify({ supervisor: tree.child.pid, pids: tree.pids })}\n`);
  if (how === "exit") process.exit(0);
  setInterval(() => {}, 1000);
}
