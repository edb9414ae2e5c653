/**
 * What a backend inherits from a host that holds a stray descriptor (issue
 * 32): a Node host started with a file at fd 70 without close-on-exec (as a
 * shell's `exec 70<file` or a parent process leaves one) starts the real
 * backend in each start mode, and the backend's `/proc/<pid>/fd` is read
 * while it runs. In every mode it holds nothing of the host's (no
 * descriptor pointing where one of the host's points: the stray file, the
 * host's pipes and sockets), its fd 4 is a socket when the start declares
 * the host channel, and its fd 3 is never a socket (the supervisor's
 * control socket is not the backend's; Python's event loop takes that
 * number for its epoll). Why fd 70: Node marks the low descriptors it
 * finds at startup close-on-exec (an fd 7 was, an fd 31 was not), not
 * those above, nor any a native module or the runtime opens later without
 * it (a test runner's channel at fd 64 and up). Grouped mode gets this
 * from the supervisor binary's `--exec`; without the binary
 * (`PROCESS_BRIDGE_SUPERVISOR=""`) the stray reaches the backend: the
 * documented exception (Node's spawn passes on what the host holds).
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { repoRoot } from "./helpers";

const host = join(__dirname, "fixtures", "inherit-host.js");
const haveBackend = existsSync(join(repoRoot, ".venv", "bin", "python"));
const scratch = mkdtempSync(join(tmpdir(), "pbn-inherit-"));
const stray = join(scratch, "stray-descriptor");
writeFileSync(stray, "");
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

interface Seen {
  mode: string;
  start: string;
  pid: number;
  host: Record<string, string>;
  backend: Record<string, string>;
  error?: string;
}

/** Runs the host with `stray` open at its fd 70 (by bash: dash takes one-digit numbers only; without close-on-exec). */
function runHost(params: object, env: Record<string, string> = {}): Seen {
  const run = spawnSync("/bin/bash", ["-c", 'exec 70<"$1"; shift; exec "$@"', "sh", stray, process.execPath, host, JSON.stringify(params)], {
    encoding: "utf8",
    timeout: 60_000,
    env: { ...process.env, ...env },
  });
  const seen = JSON.parse(run.stdout.trim().split("\n").at(-1) ?? "{}") as Seen;
  expect(seen.error, run.stderr).toBeUndefined();
  // The host does hold it: what the backend must not get.
  expect(seen.host["70"]).toBe(stray);
  return seen;
}

/**
 * What the backend holds of the host's (targets both point at; anonymous
 * inodes, which are all named alike, left out), and whether the stray.
 */
function inherited(seen: Seen): { shared: string[]; stray: boolean } {
  const host = new Set(Object.values(seen.host).filter((target) => !target.startsWith("anon_inode:")));
  const shared = Object.values(seen.backend).filter((target) => host.has(target));
  return { shared, stray: Object.values(seen.backend).includes(stray) };
}

const modes: [string, object, string][] = [
  ["cold, supervised", { supervise: true }, "supervised"],
  ["cold, grouped (the supervisor's --exec)", { supervise: false }, "grouped"],
  ["warm", { warm: true }, "supervised"],
];

describe.runIf(process.platform === "linux" && haveBackend)("a backend inherits only its channels, whatever the host holds", () => {
  for (const [name, params, mode] of modes) {
    for (const tools of [false, true]) {
      it(`${name}, ${tools ? "with" : "without"} the host channel`, () => {
        const seen = runHost({ ...params, tools });
        expect(seen.mode).toBe(mode);
        expect(inherited(seen)).toEqual({ shared: [], stray: false });
        for (const fd of ["0", "1", "2"]) expect(seen.backend[fd]).toMatch(/^socket:/);
        if (tools) expect(seen.backend["4"]).toMatch(/^socket:/);
        expect(seen.backend["3"] ?? "").not.toMatch(/^socket:/);
      }, 60_000);
    }
  }

  it("grouped without the supervisor binary: the stray reaches the backend (the documented exception)", () => {
    const seen = runHost({ supervise: false }, { PROCESS_BRIDGE_SUPERVISOR: "" });
    expect(seen.mode).toBe("grouped");
    expect(inherited(seen).stray).toBe(true);
  }, 60_000);
});
