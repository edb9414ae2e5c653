// Spawn and containment on the runtime: a supervised backend's whole tree
// (a grandchild, and one that left the group with setsid) ends with
// `child.kill()`, and with the host itself when it is SIGKILLed; a grouped
// backend's group ends with `kill()` and with the host's process.exit().
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { fileURLToPath } from "node:url";
import { runtime, test, waitGone } from "./harness.mjs";
import { spawnTree } from "./tree.mjs";

const hostChild = fileURLToPath(new URL("./host-child.mjs", import.meta.url));

/** The command line that runs a script on this runtime, as a user would. */
function runtimeArgs(script, args) {
  return runtime === "deno" ? ["run", "-A", script, ...args] : [script, ...args];
}

/** SIGKILLs what is left (a failed test must not leave processes behind). */
function sweep(pids) {
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // Gone.
    }
  }
}

test("containment: supervised, child.kill() ends the backend, its grandchild and one that left the group", async () => {
  const tree = await spawnTree({ supervise: true, escape: true });
  const pids = [tree.child.pid, ...Object.values(tree.pids)];
  try {
    assert.notEqual(tree.child.pid, tree.pids.backend, "supervised: child.pid is the supervisor's");
    assert.equal(tree.child.kill(), true);
    const exit = await tree.exited();
    assert.ok(exit.signal === "SIGTERM" || exit.code !== 0, `exit ${JSON.stringify(exit)}`);
    await waitGone(pids, 5_000, "the supervised tree");
  } finally {
    sweep(pids);
  }
});

test("containment: grouped (supervise: false), SIGKILL reaches the whole group", async () => {
  const tree = await spawnTree({ supervise: false });
  const pids = Object.values(tree.pids);
  try {
    assert.equal(tree.child.pid, tree.pids.backend);
    tree.child.kill("SIGKILL");
    assert.equal((await tree.exited()).signal, "SIGKILL");
    await waitGone(pids, 5_000, "the group");
  } finally {
    sweep(pids);
  }
});

/** Runs host-child.mjs on this runtime; resolves with the host and the pids it printed. */
function startHost(how, mode) {
  return new Promise((resolve, reject) => {
    const host = spawn(process.execPath, runtimeArgs(hostChild, mode === undefined ? [how] : [how, mode]), { cwd: process.cwd(), stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    host.stdout.on("data", (chunk) => {
      out += chunk;
      if (out.includes("\n")) resolve({ host, ...JSON.parse(out.split("\n")[0]) });
    });
    host.stderr.on("data", (chunk) => (err += chunk));
    host.on("error", reject);
    host.on("close", (code) => {
      if (!out.includes("\n")) reject(new Error(`the host exited ${code} before starting its backend: ${err.slice(-800)}`));
    });
  });
}

test("containment: a SIGKILLed host leaves no process of its supervised backend's tree", async () => {
  const { host, supervisor, pids } = await startHost("wait", "supervised");
  const all = [supervisor, ...Object.values(pids)];
  try {
    host.kill("SIGKILL");
    await waitGone([host.pid], 5_000, "the host");
    await waitGone(all, 5_000, "the tree of the SIGKILLed host");
  } finally {
    sweep([host.pid, ...all]);
  }
});

test("containment: a host's process.exit() ends its grouped backend's group (the exit hook)", async () => {
  const { host, pids } = await startHost("exit", "grouped");
  const all = Object.values(pids);
  try {
    await waitGone([host.pid], 5_000, "the host");
    await waitGone(all, 5_000, "the group after the host's exit");
  } finally {
    sweep([host.pid, ...all]);
  }
});

test("containment: a host whose child and session have ended exits by itself", async () => {
  const { host, done } = await startHost("natural");
  try {
    assert.equal(done, true);
    await waitGone([host.pid], 10_000, "the host, with nothing left to do,");
  } finally {
    sweep([host.pid]);
  }
});
