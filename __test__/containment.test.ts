/**
 * No descendant of the backend outlives the host (issue "Contained and
 * diagnosable"): a stubborn backend that ignores SIGTERM, SIGINT, SIGHUP,
 * the `shutdown` command and stdin EOF, and starts a grandchild that does
 * the same and has left its process group, run directly and through the
 * real `uv run`; the host ends by `close()`, by `process.exit()` without
 * close, and by SIGKILL. Three seconds later, every process by pid is gone.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { alive, repoRoot } from "./helpers";

const hostScript = join(__dirname, "fixtures", "containment-host.js");
const dist = join(repoRoot, "dist", "index.js");
const haveBackend = existsSync(join(repoRoot, ".venv", "bin", "uv"));

interface Pids {
  backend: number;
  grandchild: number;
  supervisor?: number;
  uv?: number;
  mode: string;
}

async function run(launcher: "direct" | "uv", ending: "close" | "exit" | "sigkill", grouped = false): Promise<{ pids: Pids; hostExit: unknown }> {
  const args = [hostScript, dist, repoRoot, launcher, ending, ...(grouped ? ["grouped"] : [])];
  const host = spawn(process.execPath, args, { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  host.stderr!.on("data", (chunk) => (err += chunk));
  const closed = new Promise((resolve) => host.once("close", (code, signal) => resolve({ code, signal })));
  const pids = await new Promise<Pids>((resolve, reject) => {
    host.stdout!.on("data", (chunk) => {
      out += chunk;
      if (out.includes("\n")) resolve(JSON.parse(out.split("\n")[0]) as Pids);
    });
    void closed.then((exit) => reject(new Error(`host ended before reporting: ${JSON.stringify(exit)} ${err}`)));
  });
  for (const [name, pid] of Object.entries(pids)) {
    if (typeof pid === "number") expect(alive(pid), `${name} ${pid} runs before the end`).toBe(true);
  }
  if (ending === "sigkill") host.kill("SIGKILL");
  else host.stdin!.write("end\n");
  const hostExit = await closed;
  return { pids, hostExit };
}

describe.runIf(process.platform === "linux" && haveBackend).concurrent("no descendant survives the host", () => {
  for (const launcher of ["direct", "uv"] as const) {
    for (const ending of ["close", "exit", "sigkill"] as const) {
      it(`${launcher}, host ends by ${ending}: 0 processes left 3 s later`, async () => {
        const { pids, hostExit } = await run(launcher, ending);
        expect(pids.mode).toBe("supervised");
        expect(hostExit).toEqual(ending === "sigkill" ? { code: null, signal: "SIGKILL" } : { code: 0, signal: null });
        await new Promise((resolve) => setTimeout(resolve, 3000));
        const left = Object.entries(pids).filter(([, pid]) => typeof pid === "number" && alive(pid));
        for (const [, pid] of left) process.kill(pid as number, "SIGKILL"); // do not leak them into later tests
        expect(left).toEqual([]);
      }, 60_000);
    }
  }

  // Without the supervisor, the backend's process group is what is reached:
  // a grandchild in it ends too (one that left it would not, nor can
  // anything clean up after a SIGKILLed host).
  for (const ending of ["close", "exit"] as const) {
    it(`without the supervisor, host ends by ${ending}: the backend's group is gone 3 s later`, async () => {
      const { pids } = await run("direct", ending, true);
      expect(pids.mode).toBe("grouped");
      expect(pids.supervisor).toBeUndefined();
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const left = Object.entries(pids).filter(([, pid]) => typeof pid === "number" && alive(pid));
      for (const [, pid] of left) process.kill(pid as number, "SIGKILL");
      expect(left).toEqual([]);
    }, 60_000);
  }
});
