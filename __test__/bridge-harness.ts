/**
 * Helpers for the agentlane-bridge tests: which binary, the real backends'
 * arguments, and small readers of Prompt/Subscribe streams. The bridge is
 * started and spoken to with the Node example's own module
 * (examples/clients/node/bridge.mjs), over connect-es.
 */
import { existsSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
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

/** A parsed backend event with its stream position (`json`: its exact line; null when it came in a batch). */
export interface Seen {
  seq: bigint;
  type: string;
  json: string | null;
  event: any;
}

type Event = { seq: bigint; type: string; json: string };
type Item = {
  item: { case: "event"; value: Event } | { case: "invalidLine"; value: any } | { case: "batch"; value: { firstSeq: bigint; json: string } } | { case: undefined };
};

function seen(value: { seq: bigint; type: string; json: string }): Seen {
  return { seq: value.seq, type: value.type, json: value.json, event: JSON.parse(value.json) };
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
  const { readdirSync } = require("node:fs") as typeof import("node:fs");
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
