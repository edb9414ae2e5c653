/**
 * The launch layer (issue 32): one table of the channels a backend
 * inherits, read by every spawner from the addon, and the host channel
 * (docs/host-channel.md) placed at its number in every start mode that
 * declares it: cold under the supervisor, cold without it, warm (the fork
 * request carries it, the prefork server places it). A start that does not
 * declare it is as before: the backend inherits stdin, stdout and stderr
 * only. Through the real backend (`host_channel_probe_app.py`).
 */
import { readFileSync } from "node:fs";
import type { Socket } from "node:net";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { closeWarmServers, spawnBridgeProcess, startBridgeProcess, type BridgeChild, type BridgeEvent, type BridgeProcessOptions } from "../lib/index";
import { native } from "../lib/native";
import { CHANNEL_FD, HOST_CHANNEL_ENV, stdioByChannel } from "../lib/spawn/channels";
import { findSupervisor, missingSupervisor, platformName, runnableSupervisor } from "../lib/spawn/supervisor";
import { repoRoot } from "./helpers";

const backends = join(repoRoot, "tests", "e2e", "backends");
const APP = "host_channel_probe_app:create_backend";

function options(extra: Partial<BridgeProcessOptions>): BridgeProcessOptions {
  return {
    command: join(repoRoot, ".venv", "bin", "python"),
    args: ["-m", "agentlane_process_bridge", "--app", APP],
    cwd: backends,
    ...extra,
  };
}

interface Started {
  child: BridgeChild;
  ready: Promise<Record<string, unknown>>;
  hostChannel: Promise<Socket>;
  hostChannels: Socket[];
  closed: Promise<void>;
  stderr: string[];
}

function start(extra: Partial<BridgeProcessOptions>): Started {
  let readyWith: (metadata: Record<string, unknown>) => void = () => {};
  let channelWith: (socket: Socket) => void = () => {};
  let closedWith: () => void = () => {};
  const hostChannels: Socket[] = [];
  const stderr: string[] = [];
  const started = {
    ready: new Promise<Record<string, unknown>>((resolve) => (readyWith = resolve)),
    hostChannel: new Promise<Socket>((resolve) => (channelWith = resolve)),
    closed: new Promise<void>((resolve) => (closedWith = resolve)),
    hostChannels,
    stderr,
  };
  const child = startBridgeProcess(options(extra), {
    onEvent: (event: BridgeEvent) => {
      if (event.type === "ready") readyWith((event as unknown as { metadata: Record<string, unknown> }).metadata);
    },
    onStderr: (line) => stderr.push(line),
    onHostChannel: (socket) => {
      hostChannels.push(socket);
      channelWith(socket);
    },
    onExit: () => closedWith(),
  });
  return { ...started, child };
}

/** The next line the backend writes on the host channel. */
function nextLine(socket: Socket): Promise<string> {
  return new Promise((resolve, reject) => {
    let text = "";
    const onData = (chunk: Buffer) => {
      text += chunk.toString("utf8");
      const at = text.indexOf("\n");
      if (at < 0) return;
      socket.off("data", onData);
      socket.off("error", reject);
      if (at + 1 < text.length) socket.unshift(Buffer.from(text.slice(at + 1)));
      resolve(text.slice(0, at));
    };
    socket.on("data", onData);
    socket.once("error", reject);
  });
}

async function stop(started: Started): Promise<void> {
  started.child.kill("SIGTERM");
  await started.closed;
}

afterAll(() => closeWarmServers({ kill: true }));

describe("the channel table", () => {
  it("is the addon's, and names the variable the backend's module reads", () => {
    const layout = native.channelLayout();
    expect(layout.channels.map((c) => [c.name, c.fd, c.always])).toEqual([
      ["stdin", 0, true],
      ["stdout", 1, true],
      ["stderr", 2, true],
      ["control", 3, true],
      ["host", 4, false],
    ]);
    expect(CHANNEL_FD).toEqual({ stdin: 0, stdout: 1, stderr: 2, control: 3, host: 4 });
    // The Python module (agentlane-host-channel) and the Rust host channel's contract.
    const python = readFileSync(join(repoRoot, "python", "src", "agentlane_host_channel", "_protocol.py"), "utf8");
    const rust = readFileSync(join(repoRoot, "crates", "bridge-host-channel", "src", "protocol.rs"), "utf8");
    expect(python).toContain(`FD_ENV: Final = "${HOST_CHANNEL_ENV}"`);
    expect(rust).toContain(`pub const FD_ENV: &str = "${HOST_CHANNEL_ENV}";`);
  });

  it("puts each given descriptor at its channel's number, gaps ignored", () => {
    expect(stdioByChannel({ stdin: 10, stdout: 11, stderr: 12 })).toEqual([10, 11, 12]);
    expect(stdioByChannel({ stdin: 10, stdout: 11, stderr: 12, host: 13 })).toEqual([10, 11, 12, "ignore", 13]);
    expect(stdioByChannel({ stdin: 10, stdout: 11, stderr: 12, control: 14, host: 13 })).toEqual([10, 11, 12, 14, 13]);
  });

  it("the supervisor lookup's rules come from the addon (bridge-launch's supervisor.rs, the bridge's too); lib only gives the places", () => {
    const runnable = join(repoRoot, `process-bridge-supervisor.${platformName()}`);
    const plain = join(repoRoot, "package.json");
    const gone = join(repoRoot, "no-such-supervisor-pbn");
    expect(native.findSupervisor("", [runnable], null)).toMatchObject({ kind: "declined" });
    expect(native.findSupervisor(undefined, [gone, plain, runnable], null)).toMatchObject({ kind: "found", path: runnable });
    expect(native.findSupervisor(undefined, [gone, plain], null)).toMatchObject({ kind: "absent" });
    expect(native.findSupervisor(undefined, [gone], plain)).toEqual({ kind: "missing", path: plain, code: "EACCES", named: false });
    expect(native.findSupervisor(gone, [runnable], null)).toEqual({ kind: "missing", path: gone, code: "ENOENT", named: true });
    // lib: a named one is used as named (the start then says supervisor-missing), empty is none.
    const saved = process.env.PROCESS_BRIDGE_SUPERVISOR;
    try {
      process.env.PROCESS_BRIDGE_SUPERVISOR = gone;
      expect([findSupervisor(), runnableSupervisor(), missingSupervisor()]).toEqual([gone, null, null]);
      process.env.PROCESS_BRIDGE_SUPERVISOR = "";
      expect([findSupervisor(), runnableSupervisor(), missingSupervisor()]).toEqual([null, null, null]);
      delete process.env.PROCESS_BRIDGE_SUPERVISOR;
      expect([findSupervisor(), runnableSupervisor()]).toEqual([runnable, runnable]);
    } finally {
      if (saved === undefined) delete process.env.PROCESS_BRIDGE_SUPERVISOR;
      else process.env.PROCESS_BRIDGE_SUPERVISOR = saved;
    }
  });

  it("spawnBridgeProcess refuses a warm option instead of ignoring it", () => {
    expect(() => spawnBridgeProcess(options({ warm: true }), { onEvent: () => {} })).toThrow(
      expect.objectContaining({ code: "invalid-option", option: "warm" }),
    );
  });

  it("no spawner of lib/ writes a descriptor position itself", () => {
    // The fork request and the stdio array are built from the table; the
    // old positional forms must not come back.
    const fork = readFileSync(join(repoRoot, "lib", "spawn", "warm", "fork.ts"), "utf8");
    const stdio = readFileSync(join(repoRoot, "lib", "spawn", "stdio.ts"), "utf8");
    expect(fork).not.toMatch(/spawnStdio as number\[\]/);
    expect(stdio).not.toMatch(/\[this\.stdin\.child!, stdoutFd/);
  });
});

/**
 * Without the supervisor, Node's `spawn` also passes on whatever the host
 * process holds without close-on-exec (a test runner's worker channel at a
 * high number): only the supervisor (and the prefork server) close them.
 * There the low numbers are checked.
 */
const modes: [string, Partial<BridgeProcessOptions>, (fds: number[]) => number[]][] = [
  ["cold, supervised", { supervise: true }, (fds) => fds],
  ["cold, without the supervisor", { supervise: false }, (fds) => fds],
  ["warm", { warm: { fallback: "error" } }, (fds) => fds],
];

describe.runIf(process.platform === "linux")("the host channel in every start mode", () => {
  for (const [name, mode, inherited] of modes) {
    it(`${name}: declared, the backend has it at fd 4 (named in its environment) and nothing else beyond stdio`, async () => {
      const started = start({ ...mode, hostChannel: true });
      try {
        const socket = await started.hostChannel;
        expect(started.child.hostChannel).toBe(socket);
        const hello = JSON.parse(await nextLine(socket)) as { hello: number; fd: number };
        expect(hello.fd).toBe(CHANNEL_FD.host);
        socket.write("ping\n");
        expect(await nextLine(socket)).toBe("echo ping");
        const facts = await started.ready;
        expect(facts).toMatchObject({ host_env: "4", fd4_socket: true, pid: hello.hello });
        expect(inherited(facts.extra as number[])).toEqual([CHANNEL_FD.host]);
        expect(started.hostChannels).toHaveLength(1);
      } finally {
        await stop(started);
      }
      // Destroyed with the child at the latest.
      expect(started.hostChannels[0].destroyed).toBe(true);
    }, 60_000);

    it(`${name}: not declared, the backend inherits stdio only, as before`, async () => {
      const started = start(mode);
      try {
        const facts = await started.ready;
        expect(facts).toMatchObject({ host_env: null });
        expect(inherited(facts.extra as number[])).toEqual([]);
        expect(started.hostChannels).toHaveLength(0);
        expect(started.child.hostChannel).toBeUndefined();
      } finally {
        await stop(started);
      }
    }, 60_000);
  }

  it("a warm start that falls back cold gives the cold backend's channel", async () => {
    // Not the `-m agentlane_process_bridge --app X` form: no prefork server can stand in.
    const runModule = `import runpy, sys; sys.argv = ["agentlane_process_bridge", "--app", "${APP}"]; runpy.run_module("agentlane_process_bridge", run_name="__main__")`;
    const started = start({ args: ["-c", runModule], warm: { fallback: "cold" }, hostChannel: true });
    try {
      const socket = await started.hostChannel;
      const hello = JSON.parse(await nextLine(socket)) as { hello: number; fd: number };
      expect(hello.fd).toBe(CHANNEL_FD.host);
      expect(started.child.hostChannel).toBe(socket);
      expect(await started.ready).toMatchObject({ host_env: "4", pid: hello.hello });
      expect(started.hostChannels).toHaveLength(1);
    } finally {
      await stop(started);
    }
  }, 60_000);
});
