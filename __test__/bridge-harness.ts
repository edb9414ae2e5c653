/**
 * Helpers for the agentlane-bridge tests: which binary, the real backends'
 * arguments, and small readers of Prompt/Subscribe streams. The bridge is
 * started and spoken to with the Node example's own module
 * (examples/clients/node/bridge.mjs), over connect-es.
 */
import { execFile } from "node:child_process";
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { ConnectError } from "@connectrpc/connect";
import { startBridge, type Bridge, type StartOptions } from "../examples/clients/node/bridge.mjs";
import { AgentService, BridgeControlService } from "../examples/clients/node/gen/agentlane/bridge/v1/bridge_pb.js";

export { AgentService, BridgeControlService };
export type { Bridge };

export const repoRoot = join(__dirname, "..");
export const venvPython = join(repoRoot, ".venv/bin/python");
export const backendsDir = join(repoRoot, "tests/e2e/backends");
export const demoDir = join(repoRoot, "examples/backend");

/** $AGENTLANE_BRIDGE, else the newest of the release, quick (`npm test`'s) and debug builds. */
export const bridgeBinary: string = (() => {
  if (process.env.AGENTLANE_BRIDGE) return process.env.AGENTLANE_BRIDGE;
  const built = ["release", "quick", "debug"]
    .map((profile) => join(repoRoot, "target", profile, "agentlane-bridge"))
    .filter((path) => existsSync(path))
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  if (built.length === 0) throw new Error("agentlane-bridge is not built: cargo build --release -p bridge-server");
  return built[0];
})();

export function scenarioArgs(...extra: string[]): string[] {
  return ["--app", "scenario_app:create_backend", "--project-dir", backendsDir, "--python", venvPython, ...extra];
}

export function demoArgs(...extra: string[]): string[] {
  return ["--app", "demo_app:create_backend", "--project-dir", demoDir, "--python", venvPython, ...extra];
}

export function start(args: string[], options: StartOptions = {}): Promise<Bridge> {
  return startBridge(args, { bridge: bridgeBinary, ...options });
}

/** A parsed backend event with its stream position (`json`: its exact line; null when it came in a batch; `approvalId`: the item's, if any). */
export interface Seen {
  seq: bigint;
  type: string;
  json: string | null;
  event: any;
  approvalId?: string;
}

type Event = { seq: bigint; type: string; json: string; approvalId?: string };
type Item = {
  item: { case: "event"; value: Event } | { case: "invalidLine"; value: any } | { case: "batch"; value: { firstSeq: bigint; json: string } }
    // Host tool calls and snapshots (issues 31, 33): not events; collect() skips them.
    | { case: "toolCall" | "toolCallEnded" | "snapshot"; value: unknown }
    | { case: undefined };
};

function seen(value: Event): Seen {
  const event: Seen = { seq: value.seq, type: value.type, json: value.json, event: JSON.parse(value.json) };
  if (value.approvalId) event.approvalId = value.approvalId;
  return event;
}

/** What a stream delivered and how it ended (`error` undefined: ended OK). */
export interface Collected {
  events: Seen[];
  invalid: any[];
  error: ConnectError | undefined;
}

/** Reads a stream to its end; `each` sees every event as it comes. */
export async function collect(stream: AsyncIterable<Item>, each?: (event: Seen) => void | Promise<void>): Promise<Collected> {
  const out: Collected = { events: [], invalid: [], error: undefined };
  try {
    for await (const { item } of stream) {
      if (item.case === "event" || item.case === "batch") {
        const events =
          item.case === "event"
            ? [seen(item.value)]
            : (JSON.parse(item.value.json) as any[]).map((event, i) => ({ seq: item.value.firstSeq + BigInt(i), type: event.type, json: null, event }));
        for (const event of events) {
          out.events.push(event);
          await each?.(event);
        }
      } else if (item.case === "invalidLine") {
        out.invalid.push(item.value);
      }
    }
  } catch (error) {
    out.error = ConnectError.from(error);
  }
  return out;
}

/** The native record of a run_event, or undefined. */
export function record(event: Seen): any {
  return event.type === "run_event" ? event.event.event : undefined;
}

/** The approval record of a tool_approval run_event with this status. */
export function approval(event: Seen, status: "pending" | "resolved"): any {
  const r = record(event);
  return r?.type === "tool_approval" && r.payload.event.record.status === status ? r.payload.event.record : undefined;
}

/** A Subscribe stream recorded in the background. */
/**
 * A subscription once it is in place: the bridge registers a Subscribe
 * stream a little after the call, and what it writes before then is not
 * seen. A Configure answer that comes through is the barrier; one answered
 * too early is missed, so ask again.
 */
export async function subscribedTo(
  bridge: Bridge,
  options: { json?: boolean; batched?: boolean; conversationId?: string } = {},
): Promise<Subscription> {
  const agent = bridge.client(AgentService);
  const subscription = new Subscription(bridge, options);
  for (let tries = 1; ; tries++) {
    const { event } = await agent.configure({ patchJson: "{}", conversationId: options.conversationId ?? "" });
    try {
      await subscription.until((e) => e.seq === event!.seq, "the config event", 1_000);
      return subscription;
    } catch (error) {
      if (subscription.ended || tries === 10) throw error;
    }
  }
}

export class Subscription {
  readonly events: Seen[] = [];
  readonly invalid: any[] = [];
  error: ConnectError | undefined;
  ended = false;
  readonly done: Promise<void>;
  private readonly controller = new AbortController();
  private wakers: (() => void)[] = [];

  constructor(bridge: Bridge, options: { json?: boolean; batched?: boolean; conversationId?: string } = {}) {
    const agent = bridge.client(AgentService, { json: options.json });
    const request = { batched: options.batched ?? false, conversationId: options.conversationId ?? "" };
    this.done = collect(agent.subscribe(request, { signal: this.controller.signal }) as AsyncIterable<Item>, (event) => {
      this.events.push(event);
      this.wake();
    }).then((result) => {
      this.invalid.push(...result.invalid);
      this.error = result.error;
      this.ended = true;
      this.wake();
    });
  }

  private wake(): void {
    for (const w of this.wakers.splice(0)) w();
  }

  /** Waits until an event matching `test` arrived (returns it). */
  async until(test: (event: Seen) => boolean, what: string, ms = 20_000): Promise<Seen> {
    const deadline = Date.now() + ms;
    for (;;) {
      const found = this.events.find(test);
      if (found) return found;
      if (this.ended) throw new Error(`the subscription ended before ${what}`);
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise<void>((resolve) => {
        this.wakers.push(resolve);
        setTimeout(resolve, 50);
      });
    }
  }

  close(): void {
    this.controller.abort();
  }
}

/** Waits until `test()` holds (for what arrives on its own pipe, like stderr). */
export async function eventually(test: () => boolean, what: string, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Waits until no process with this pid is left (true) or `ms` passed (false). */
export async function gone(pid: number, ms = 5_000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (!existsSync(`/proc/${pid}`) || /^State:\s+Z/m.test(safeRead(`/proc/${pid}/status`))) return true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return false;
}

function safeRead(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

/** The pids of the live processes in a process group. */
export function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const stat = safeRead(`/proc/${name}/stat`);
    // pid (comm) state ppid pgrp …; comm may hold spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(fields[2]) === pgid && fields[0] !== "Z") members.push(Number(name));
  }
  return members;
}

/** A process as /proc shows it: its parent, its state, its start time (to tell a reused pid). */
export function stat(pid: number): { ppid: number; state: string; start: string } | undefined {
  const text = safeRead(`/proc/${pid}/stat`);
  if (!text) return undefined;
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime …
  const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
  return { ppid: Number(fields[1]), state: fields[0], start: fields[19] };
}

/** Every live descendant of `root` (by the parent chain), with its start time. */
export function descendants(root: number): Map<number, string> {
  const parents = new Map<number, number>();
  const starts = new Map<number, string>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const s = stat(Number(name));
    if (!s || s.state === "Z") continue;
    parents.set(Number(name), s.ppid);
    starts.set(Number(name), s.start);
  }
  const found = new Map<number, string>();
  for (const pid of parents.keys()) {
    for (let p = parents.get(pid); p !== undefined && p > 1; p = parents.get(p)) {
      if (p === root) {
        found.set(pid, starts.get(pid)!);
        break;
      }
    }
  }
  return found;
}

/** The processes of `recorded` that still live (same pid, same start time, not a zombie). */
export function survivors(recorded: Map<number, string>): number[] {
  return [...recorded]
    .filter(([pid, start]) => {
      const s = stat(pid);
      return s !== undefined && s.state !== "Z" && s.start === start;
    })
    .map(([pid]) => pid);
}

/** The command line of a process ("" once it is gone). */
export function commandLine(pid: number): string {
  return safeRead(`/proc/${pid}/cmdline`).split("\0").join(" ");
}

/** One outcome of the Python standard-library client (__test__/fixtures/bridge_stdlib.py). */
export interface StdlibOutcome {
  status?: number;
  body?: any;
  bytes?: number;
  elapsedMs: number;
  gaveUp?: boolean;
  items?: any[];
  end?: any;
}

/**
 * Calls the bridge from Python (the standard library only, written from
 * the Connect protocol): `repeat` unary calls at once, each its own
 * connection; `giveUpAfter` (seconds) closes a connection that has no
 * answer by then, `connectTimeoutMs` sends Connect's deadline header.
 * `stream` reads a server stream to its end instead; `sentFile` is created
 * once every request is written.
 */
export async function stdlib(
  bridge: Bridge,
  method: string,
  body: unknown,
  options: { repeat?: number; giveUpAfter?: number; connectTimeoutMs?: number; stream?: boolean; sentFile?: string } = {},
): Promise<StdlibOutcome[]> {
  const dir = mkdtempSync(join(tmpdir(), "bridge-stdlib-"));
  try {
    const file = join(dir, "body.json");
    writeFileSync(file, JSON.stringify(body));
    const args = [stdlibClient, options.stream ? "stream" : "call", "--url", bridge.info.url, "--token-file", bridge.info.tokenFile];
    args.push("--method", `agentlane.bridge.v1.${method}`, "--body", `@${file}`, "--repeat", String(options.repeat ?? 1));
    if (options.giveUpAfter !== undefined) args.push("--give-up-after", String(options.giveUpAfter));
    if (options.connectTimeoutMs !== undefined) args.push("--connect-timeout-ms", String(options.connectTimeoutMs));
    if (options.sentFile !== undefined) args.push("--sent-file", options.sentFile);
    const { stdout } = await run("python3", args, { maxBuffer: 256 * 1024 * 1024, timeout: 600_000 });
    const parsed = JSON.parse(stdout);
    return Array.isArray(parsed) ? parsed : [parsed];
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const stdlibClient = join(__dirname, "fixtures", "bridge_stdlib.py");
const run = promisify(execFile);
