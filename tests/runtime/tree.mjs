// A backend that starts a process tree and says so: a grandchild in its
// group, and (with `escape`) one that left it with setsid; each pid on a
// stderr line `pid <role> <pid>`. Shared by containment.mjs and host-child.mjs.
import { spawnBridgeProcess } from "@agentlanejs/process-bridge-native";

const treeScript = (escape) =>
  [
    'sleep 300 & echo "pid grandchild $!" >&2',
    escape ? 'setsid sleep 300 & echo "pid escaped $!" >&2' : "",
    'echo "pid backend $$" >&2',
    "exec sleep 300",
  ]
    .filter(Boolean)
    .join("; ");

/** Spawns the tree; resolves with `{ child, pids, exited }` once every pid is known. */
export function spawnTree({ supervise, escape = false }) {
  const pids = {};
  let exitInfo;
  const waiters = [];
  const want = escape ? 3 : 2;
  return new Promise((resolve, reject) => {
    const child = spawnBridgeProcess(
      { command: "/bin/sh", args: ["-c", treeScript(escape)], supervise, termGraceMs: 200 },
      {
        onEvent: () => {},
        onStderr: (line) => {
          const [tag, role, pid] = line.split(" ");
          if (tag !== "pid") return;
          pids[role] = Number(pid);
          if (Object.keys(pids).length === want) {
            resolve({ child, pids, exited: () => new Promise((done) => (exitInfo ? done(exitInfo) : waiters.push(done))) });
          }
        },
        onExit: (code, signal) => {
          exitInfo = { code, signal };
          for (const done of waiters) done(exitInfo);
          reject(new Error(`the tree's backend exited early (${code}, ${signal})`));
        },
        onSpawnError: reject,
      },
    );
  });
}
