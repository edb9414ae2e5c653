/**
 * What using the package adversarially found (issue "Hangs, leaks and
 * wrong results"), each a regression test through real processes:
 * readers that outlive their JavaScript environment or their session, a
 * spawn that runs out of file descriptors, unbounded stdin buffering, a
 * command whose `toJSON` loses the protocol version. The process-level
 * cases run in their own host (fixtures/leak-host.js) so that threads, fds
 * and RSS belong to one scenario; RELIABILITY.md has the figures.
 */
import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BridgeCommandError, encodeBridgeCommand, type BridgeCommand } from "../lib/index";
import { figure } from "./helpers";

const leakHost = join(__dirname, "fixtures", "leak-host.js");

/** Runs one leak-host scenario (under `ulimit -n` when asked) and returns its JSON line. */
function leak<T>(scenario: string, params: object, ulimitFds?: number): Promise<T> {
  const node = [process.execPath, "--expose-gc", leakHost, scenario, JSON.stringify(params)];
  const command = ulimitFds === undefined ? node : ["sh", "-c", `ulimit -n ${ulimitFds} && exec "$0" "$@"`, ...node];
  const host = spawn(command[0], command.slice(1), { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  let err = "";
  host.stdout.on("data", (chunk) => (out += chunk));
  host.stderr.on("data", (chunk) => (err += chunk));
  return new Promise((resolve, reject) => {
    host.once("close", (code) => {
      if (code !== 0) return reject(new Error(`leak-host ${scenario} exited ${code}: ${err}`));
      resolve(JSON.parse(out.trim().split("\n").at(-1)!) as T);
    });
  });
}

interface Counts {
  threads: number;
  fds: number;
}

describe.runIf(process.platform === "linux")("leaks", () => {
  it.each([false, true])("50 sessions whose backend leaves a silent grandchild holding its pipes (supervise: %s): threads and fds back to the start", async (supervise) => {
    const r = await leak<{ before: Counts; after: Counts; grandchildrenAlive: number }>("silent-grandchild", { count: 50, supervise });
    figure(`adversarial 50 silent grandchildren, supervise ${supervise}`, r);
    expect(r.after).toEqual(r.before);
    // Without the supervisor they still run (out of reach of any group): the readers let go anyway.
    expect(r.grandchildrenAlive).toBe(supervise ? 0 : 51);
  }, 120_000);

  it.each([false, true])("worker.terminate() while batches are in flight (supervise: %s): threads and fds back, the flooding backend gone", async (supervise) => {
    const r = await leak<{ before: Counts; after: Counts; backendAlive: boolean }>("worker-flood", { supervise });
    figure(`adversarial worker terminate mid-flood, supervise ${supervise}`, r);
    expect(r.after).toEqual(r.before);
    expect(r.backendAlive).toBe(false);
  }, 60_000);

  it("out of file descriptors (ulimit -n 64): createAgentSession rejects with SessionStartError, never throws, and a failed attempt leaves nothing", async () => {
    const r = await leak<{
      opened: number;
      failure: { name: string; code: string; message: string; threw: boolean };
      attempts: number;
      attemptCodes: string[];
      afterFive: Counts;
      afterFailures: Counts;
    }>("fd-exhaustion", { attempts: 25 }, 64);
    figure("adversarial fd exhaustion", r);
    expect(r.opened).toBeGreaterThan(0);
    expect(r.failure).toMatchObject({ name: "SessionStartError", code: "spawn-failed", threw: false });
    expect(r.failure.message).toMatch(/EMFILE/);
    expect(r.attemptCodes).toEqual(["spawn-failed"]);
    // 20 more failed attempts after the fifth leave no thread and no pipe
    // behind (before, each left a reader thread and two fds); the count of
    // fds moves by one or two while Node closes those of the last attempts.
    expect(r.afterFailures.threads).toBeLessThanOrEqual(r.afterFive.threads);
    expect(r.afterFailures.fds).toBeLessThanOrEqual(r.afterFive.fds + 2);
  }, 60_000);
});

describe.runIf(process.platform === "linux")("descriptors per session (issue 19)", () => {
  // Before: a supervised session held 8 (two wake pipes of the readers, and
  // Node's stdio pipes), a grouped one 7. Now the host holds its end of each
  // channel and nothing else: stdin, stdout, stderr, and the supervisor's
  // control socket. README "How many sessions a host can hold" has the figure.
  for (const [start, perSession] of [["supervised", 4], ["grouped", 3], ["attach", 3]] as const) {
    it(`${start}: ${perSession} descriptors per open session, all sockets, none left after close`, async () => {
      const r = await leak<{ perSession: number; kinds: Record<string, number>; leftAfterClose: number }>("descriptors", { count: 10, start });
      figure(`adversarial descriptors ${start}`, r);
      expect(r.perSession).toBe(perSession);
      expect(r.kinds).toEqual({ socket: 10 * perSession });
      expect(r.leftAfterClose).toBe(0);
    });
  }
});

describe.runIf(process.platform === "linux")("bounds", () => {
  it("a backend that never reads stdin: 500 prompts of 900 KB buffer at most 16 MiB (and one command) in the channel and in the session", async () => {
    const r = await leak<{
      sent: number;
      refused: number;
      channelKb: number;
      channelBuffered: number;
      outcomes: Record<string, number>;
      sessionKb: number;
      sessionBuffered: number;
    }>("stdin-bound", { prompts: 500, bytes: 900e3 });
    figure("adversarial stdin bound", r);
    const bound = 16 * 1024 * 1024 + 1_000_000;
    expect(r.channelBuffered).toBeLessThanOrEqual(bound);
    expect(r.sent + r.refused).toBe(500);
    expect(r.refused).toBeGreaterThan(450);
    expect(r.sessionBuffered).toBeLessThanOrEqual(bound);
    expect(r.outcomes["stdin-full"]).toBeGreaterThan(450);
    // The 440 MiB of before is gone: what the host holds is the bound, strings and all.
    expect(r.sessionKb).toBeLessThan(160 * 1024);
  }, 60_000);
});

describe("the encoder checks the frame it writes", () => {
  it("a command whose toJSON drops protocol_version is refused (before, {\"type\":\"cancel\"} was written)", () => {
    const command = { type: "cancel", toJSON: () => ({ type: "cancel" }) } as unknown as BridgeCommand;
    expect(() => encodeBridgeCommand(command)).toThrow(BridgeCommandError);
    expect(() => encodeBridgeCommand(command)).toThrow('Invalid cancel command: cancel.protocol_version must be "1.0".');
    const rewritten = { type: "prompt", text: "a", toJSON: () => ({ type: "prompt", text: 5, protocol_version: "1.0" }) } as unknown as BridgeCommand;
    expect(() => encodeBridgeCommand(rewritten)).toThrow("prompt.text must be a string");
  });
});
