/**
 * No process of a warm conversation outlives its host, in every way the
 * host can end (issue 21): the stubborn app (tests/e2e/backends/
 * warm_stubborn_app.py: its backend ignores SIGTERM, SIGINT, SIGHUP,
 * `shutdown` and stdin's end, and starts a `setsid` grandchild that
 * ignores them too) forked by a prefork server, run directly and through
 * the real `uv run`; the host ends by `close()` (and then exits by itself:
 * nothing warm keeps it alive), `process.exit()`, SIGKILL, or its worker's
 * `terminate()`; and the prefork server killed mid-conversation. Three
 * seconds later every process, by pid (the backend, its grandchild, its
 * supervisor, the server, uv, the server's supervisor), is gone.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { alive, repoRoot } from "./helpers";

const dist = join(repoRoot, "dist", "index.js");
const haveBackend = existsSync(join(repoRoot, ".venv", "bin", "uv"));

type Pids = Record<string, number | string | undefined>;

function numbers(pids: Pids): [string, number][] {
  return Object.entries(pids).filter((entry): entry is [string, number] => typeof entry[1] === "number");
}

/** The pids still running 3 s from now (killed then, so as not to leak them into other suites). */
async function leftAfter3s(pids: Pids): Promise<[string, number][]> {
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const left = numbers(pids).filter(([, pid]) => alive(pid));
  for (const [, pid] of left) process.kill(pid, "SIGKILL");
  return left;
}

/** Starts a fixture host; resolves with its first JSON line, and lets the test talk to it. */
async function host(script: string, args: string[]) {
  const child = spawn(process.execPath, [join(__dirname, "fixtures", script), dist, repoRoot, ...args], { stdio: ["pipe", "pipe", "pipe"] });
  let out = "";
  let err = "";
  child.stderr!.on("data", (chunk) => (err += chunk));
  const closed = new Promise<{ code: number | null; signal: string | null }>((resolve) =>
    child.once("close", (code, signal) => resolve({ code, signal })),
  );
  const line = (n: number) =>
    new Promise<string>((resolve, reject) => {
      const check = () => {
        const lines = out.split("\n");
        if (lines.length > n + 1) resolve(lines[n]);
      };
      child.stdout!.on("data", (chunk) => {
        out += chunk;
        check();
      });
      check();
      void closed.then((exit) => reject(new Error(`host ended before line ${n}: ${JSON.stringify(exit)} ${err}`)));
    });
  const pids = JSON.parse(await line(0)) as Pids;
  for (const [name, pid] of numbers(pids)) expect(alive(pid), `${name} ${pid} runs before the end`).toBe(true);
  return { child, pids, closed, line, stderr: () => err };
}

describe.runIf(process.platform === "linux" && haveBackend).concurrent("no process of a warm conversation survives its host", () => {
  for (const launcher of ["direct", "uv"] as const) {
    for (const ending of ["close", "exit", "sigkill"] as const) {
      it(`${launcher}, host ends by ${ending}: 0 processes left 3 s later`, async () => {
        const { child, pids, closed } = await host("warm-host.js", [launcher, ending]);
        expect(pids).toMatchObject({ start: "warm", mode: "supervised" });
        if (launcher === "uv") expect(pids.uv).not.toBe(pids.serverSupervisor);
        const asked = Date.now();
        if (ending === "sigkill") child.kill("SIGKILL");
        else child.stdin!.write("end\n");
        const exit = await closed;
        expect(exit).toEqual(ending === "sigkill" ? { code: null, signal: "SIGKILL" } : { code: 0, signal: null });
        // Closed, the host exits by itself, long before the server's idle
        // time (60 s): nothing warm keeps it alive.
        if (ending === "close") expect(Date.now() - asked).toBeLessThan(20_000);
        expect(await leftAfter3s(pids)).toEqual([]);
      }, 90_000);
    }
  }

  it("the prefork server killed mid-conversation: the session closes, says why, and nothing is left 3 s later", async () => {
    const { child, pids, line, closed } = await host("warm-host.js", ["direct", "server-killed"]);
    child.stdin!.write("kill the server\n");
    const { closed: close, diagnostics } = JSON.parse(await line(1)) as { closed: { reason: string; signal: string | null }; diagnostics: { event: string }[] };
    // The stubborn backend ignored SIGTERM: SIGKILL after the grace.
    expect(close).toMatchObject({ reason: "exit", code: null, signal: "SIGKILL" });
    expect(diagnostics).toEqual([expect.objectContaining({ kind: "warm", event: "server-exited", reason: null })]);
    expect(await closed).toEqual({ code: 0, signal: null });
    expect(await leftAfter3s(pids)).toEqual([]);
  }, 90_000);

  it("the host's worker terminated (no close, no exit hook): 0 processes left 3 s later, the host still running", async () => {
    const { child, pids, line, closed } = await host("warm-worker-host.js", []);
    expect(pids.start).toBe("warm");
    child.stdin!.write("terminate\n");
    expect(await line(1)).toBe("terminated");
    const left = await leftAfter3s(pids);
    child.stdin!.write("exit\n");
    await closed;
    expect(left).toEqual([]);
  }, 90_000);
});
