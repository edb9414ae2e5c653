/**
 * Process wiring with real pipes: in-memory streams through
 * wireBridgeProcess, and real child processes through spawnBridgeProcess.
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import {
  BridgeDecodeError,
  resolveBackendSpec,
  spawnBridgeProcess,
  wireBridgeProcess,
  type BridgeEvent,
  type BridgeProcessCallbacks,
} from "../lib/index";
import { alive, repoRoot } from "./helpers";

const fixtures = join(__dirname, "fixtures");
const event = (ts: number) => `{"protocol_version":"1.0","type":"shutdown","ts":${ts}}`;

/** Records every callback in order. */
function recorder() {
  const log: string[] = [];
  const events: BridgeEvent[] = [];
  const errors: BridgeDecodeError[] = [];
  let exited: (value: { code: number | null; signal: string | null }) => void = () => {};
  const exit = new Promise<{ code: number | null; signal: string | null }>((resolve) => (exited = resolve));
  const callbacks: Required<BridgeProcessCallbacks> = {
    onEvent: (e) => {
      events.push(e);
      log.push(`event ${e.type === "shutdown" ? e.ts : e.type}`);
    },
    onDecodeError: (error, line) => {
      errors.push(error);
      log.push(`decodeError ${JSON.stringify(line)}`);
    },
    onInvalidLine: (line) => log.push(`invalidLine ${JSON.stringify(line)}`),
    onStderr: (line) => log.push(`stderr ${JSON.stringify(line)}`),
    onReadError: (error) => log.push(`readError ${error.message}`),
    onStarted: () => {}, // which process runs is not part of these logs
    onStdoutClosed: () => log.push("stdoutClosed"),
    onExit: (code, signal) => {
      log.push(`exit ${code} ${signal}`);
      exited({ code, signal });
    },
    onSpawnError: (error) => log.push(`spawnError ${error.message}`),
    onHostChannel: () => log.push("hostChannel"),
  };
  return { log, events, errors, callbacks, exit };
}

/** Resolves once `predicate` holds, checking after every callback. */
function until(predicate: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const poll = () => {
      if (predicate()) resolve();
      else if (Date.now() - started > timeoutMs) reject(new Error(`timed out waiting for ${what}`));
      else setImmediate(poll);
    };
    poll();
  });
}

describe("wireBridgeProcess over in-memory streams", () => {
  it("delivers inside the write, as the reference does: when stdout.write(line) returns, that line's callbacks have run", async () => {
    const r = recorder();
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    wireBridgeProcess({ stdout, stderr }, r.callbacks);
    stdout.write(`${event(1)}\n`);
    expect(r.log).toEqual(["event 1"]);
    stdout.write("not json\n");
    expect(r.log).toEqual(["event 1", 'decodeError "not json"', 'invalidLine "not json"']);
    stderr.write("a warning\n");
    expect(r.log.at(-1)).toBe('stderr "a warning"');
    // A line split across writes is delivered by the write that ends it.
    stdout.write(event(2).slice(0, 10));
    expect(r.log).toHaveLength(4);
    stdout.write(`${event(2).slice(10)}\n`);
    expect(r.log.at(-1)).toBe("event 2");
    // The end of the stream (its 'end' event) delivers the unterminated fragment.
    stdout.end(event(3));
    expect(r.log.at(-1)).toBe("event 2");
    await new Promise((resolve) => stdout.once("end", resolve));
    expect(r.log.at(-1)).toBe("event 3");
  });

  it("delivers events and failures in stream order, onDecodeError before onInvalidLine", async () => {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const r = recorder();
    const wiring = wireBridgeProcess({ stdout, stderr }, r.callbacks);
    stdout.write(`${event(1)}\nnot json\n\n${event(2)}\r\n{"protocol_version":"2.0","type":"shutdown","ts":3}\r${event(4)}`);
    stdout.end();
    stderr.end("warn one\nwarn two");
    await until(() => r.log.filter((l) => l.startsWith("event")).length === 3 && r.log.includes('stderr "warn two"'), "all lines");
    expect(r.log.filter((l) => !l.startsWith("stderr"))).toEqual([
      "event 1",
      'decodeError "not json"',
      'invalidLine "not json"',
      'decodeError ""',
      'invalidLine ""',
      "event 2",
      `decodeError ${JSON.stringify('{"protocol_version":"2.0","type":"shutdown","ts":3}')}`,
      `invalidLine ${JSON.stringify('{"protocol_version":"2.0","type":"shutdown","ts":3}')}`,
      "event 4",
    ]);
    expect(r.log.filter((l) => l.startsWith("stderr"))).toEqual(['stderr "warn one"', 'stderr "warn two"']);
    expect(r.errors.every((e) => e instanceof BridgeDecodeError)).toBe(true);
    expect(r.errors[2].message).toBe("Unsupported bridge protocol version: 2.0.");
    expect(r.errors[2].fields).toEqual(["protocol_version"]);
    wiring.dispose();
    wiring.dispose();
  });

  it("reassembles lines and characters split across chunks, one byte at a time", async () => {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const r = recorder();
    wireBridgeProcess({ stdout, stderr }, r.callbacks);
    const text = `{"protocol_version":"1.0","type":"run_start","ts":1,"prompt":"é😀\u2028"}\r\n${event(2)}\r`;
    for (const byte of Buffer.from(text)) stdout.write(Buffer.from([byte]));
    stdout.end();
    stderr.end();
    await until(() => r.events.length === 2, "two events");
    expect(r.events[0]).toEqual({ protocol_version: "1.0", type: "run_start", ts: 1, prompt: "é😀\u2028" });
    expect(r.log).toEqual(["event run_start", "event 2"]);
  });

  it("stops delivering after dispose", async () => {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const r = recorder();
    const wiring = wireBridgeProcess({ stdout, stderr }, r.callbacks);
    stdout.write(`${event(1)}\n`);
    await until(() => r.events.length === 1, "first event");
    wiring.dispose();
    stdout.write(`${event(2)}\n`);
    stdout.end();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(r.events.length).toBe(1);
  });

  it("keeps delivering the rest of a batch when a callback throws, and rethrows", async () => {
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    const seen: number[] = [];
    wireBridgeProcess({ stdout, stderr }, {
      onEvent: (e) => {
        seen.push(e.ts);
        if (e.ts === 2) throw new Error("handler failed");
      },
    });
    // As in the reference, the callbacks run inside the write, and the
    // exception comes out of it: after the chunk's other lines were delivered.
    expect(() => stdout.write([1, 2, 3, 4].map((ts) => `${event(ts)}\n`).join(""))).toThrow("handler failed");
    expect(seen).toEqual([1, 2, 3, 4]);
    stdout.end();
    stderr.end();
  });
});

describe("spawnBridgeProcess with real child processes", () => {
  const node = process.execPath;
  const script = join(fixtures, "write-and-exit.js");

  it("delivers stdout and stderr, reports the trailing fragment, then exits once after both streams ended", async () => {
    const r = recorder();
    const child = spawnBridgeProcess(
      { command: node, args: [script, JSON.stringify({ stdout: `${event(1)}\n${event(2)}\n{"protocol_version":"1.0","ty`, stderr: "oops\n", code: 3 })] },
      r.callbacks,
    );
    expect(child.stdout).toBeNull();
    expect(await r.exit).toEqual({ code: 3, signal: null });
    expect(r.log.filter((l) => !l.startsWith("stderr"))).toEqual([
      "event 1",
      "event 2",
      `decodeError ${JSON.stringify('{"protocol_version":"1.0","ty')}`,
      `invalidLine ${JSON.stringify('{"protocol_version":"1.0","ty')}`,
      "exit 3 null",
    ]);
    expect(r.log).toContain('stderr "oops"');
    expect(r.log.indexOf('stderr "oops"')).toBeLessThan(r.log.indexOf("exit 3 null"));
    expect(r.errors[0].message.startsWith("Invalid JSON bridge event: SyntaxError: ")).toBe(true);
  });

  it("turns malformed UTF-8 into U+FFFD", async () => {
    const r = recorder();
    // latin1 bytes: 0xff is not valid UTF-8.
    spawnBridgeProcess(
      { command: node, args: [script, JSON.stringify({ stdout: '{"protocol_version":"1.0","type":"run_start","ts":1,"prompt":"a\u00ffb"}\n' })] },
      r.callbacks,
    );
    await r.exit;
    expect(r.events).toEqual([{ protocol_version: "1.0", type: "run_start", ts: 1, prompt: "a\ufffdb" }]);
  });

  it("delivers large lines intact, ASCII and not (they become external strings)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "pbn-large-"));
    const line = (prompt: string) => JSON.stringify({ protocol_version: "1.0", type: "run_start", ts: 1, prompt });
    const prompts = ["a".repeat(3 << 20), `é😀\u2028${"ü".repeat(1 << 20)}`, "x".repeat(65_535), "short"];
    writeFileSync(join(dir, "lines.ndjson"), prompts.map(line).join("\n"));
    try {
      const r = recorder();
      spawnBridgeProcess({ command: "cat", args: [join(dir, "lines.ndjson")] }, r.callbacks);
      await r.exit;
      expect(r.events.map((e) => (e as { prompt: string }).prompt)).toEqual(prompts);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("reports a missing executable as onSpawnError then onExit with a negative code", async () => {
    const r = recorder();
    spawnBridgeProcess({ command: "definitely-not-a-command-pbn" }, r.callbacks);
    const exit = await r.exit;
    expect(r.log).toEqual(["spawnError spawn definitely-not-a-command-pbn ENOENT", `exit ${exit.code} null`]);
    expect(exit.code).toBeLessThan(0);
  });

  it("reports the signal of a killed child", async () => {
    const r = recorder();
    const child = spawnBridgeProcess({ command: node, args: [join(fixtures, "stubborn.js")] }, r.callbacks);
    await until(() => r.events.length === 1, "ready");
    child.kill("SIGKILL");
    expect(await r.exit).toEqual({ code: null, signal: "SIGKILL" });
  });

  it("passes cwd, env and args", async () => {
    const r = recorder();
    spawnBridgeProcess(
      {
        command: node,
        args: ["-e", "process.stderr.write(process.cwd() + '|' + process.env.PBN_MARK + '|' + process.argv[1] + '\\n')", "arg-one"],
        cwd: fixtures,
        env: { ...process.env, PBN_MARK: "marked" },
      },
      r.callbacks,
    );
    await r.exit;
    expect(r.log[0]).toBe(`stderr ${JSON.stringify(`${fixtures}|marked|arg-one`)}`);
  });
});

describe("no orphan backends", () => {
  const dist = join(repoRoot, "dist", "index.js");

  /** Runs a host that spawns a stubborn child and exits; returns the child's pid. */
  async function orphanHost(killOnHostExit: boolean): Promise<number> {
    const host = spawn(process.execPath, [join(fixtures, "orphan-host.js"), dist, String(killOnHostExit)], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    host.stdout.on("data", (chunk) => (out += chunk));
    const code = await new Promise((resolve) => host.on("close", resolve));
    expect(code).toBe(0);
    return Number(out.trim());
  }

  /** Alive means running: a zombie (state Z) waiting to be reaped is gone. */
  it.runIf(process.platform === "linux")("kills the backend when the host exits without shutting it down", async () => {
    const pid = await orphanHost(true);
    expect(pid).toBeGreaterThan(0);
    // The SIGKILL is sent synchronously in the host's exit hook; the kernel
    // may take a moment to tear the process down.
    await until(() => !alive(pid), `child ${pid} to be gone`, 5_000);
  });

  it.runIf(process.platform === "linux")("leaves it running when killOnHostExit is false (control)", async () => {
    const pid = await orphanHost(false);
    try {
      expect(alive(pid)).toBe(true);
    } finally {
      process.kill(pid, "SIGKILL");
    }
  });
});

describe("resolveBackendSpec", () => {
  it("builds the uv command for an app spec", () => {
    const env = { A: "1" };
    expect(resolveBackendSpec({ app: "my_app:factory", projectDir: "/srv/agent", env })).toEqual({
      command: "uv",
      args: ["run", "--project", "/srv/agent", "python", "-m", "agentlane_process_bridge", "--app", "my_app:factory"],
      cwd: "/srv/agent",
      env,
    });
    expect(resolveBackendSpec({ app: "m:f" }).cwd).toBe(process.cwd());
    expect(resolveBackendSpec({ app: "m:f" }).env).toBe(process.env);
  });

  it("returns a command spec unchanged and refuses ambiguous or empty specs", () => {
    const spec = { command: "python3", args: ["x.py"] };
    expect(resolveBackendSpec(spec)).toBe(spec);
    expect(() => resolveBackendSpec({ app: "m:f", command: "x" } as never)).toThrow("Backend spec must not include both app and command.");
    expect(() => resolveBackendSpec({} as never)).toThrow("Backend spec must include app or command.");
  });
});
