/**
 * The command channel (docs/protocol.md §9.3) against a scripted child and a
 * manual scheduler: every timer fires only when the test says so.
 */
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { createBridgeChannel, type BridgeScheduler } from "../lib/index";

class FakeStdin extends EventEmitter {
  destroyed = false;
  writable = true;
  written: string[] = [];
  throwOnWrite: Error | null = null;
  write(chunk: string): boolean {
    if (this.throwOnWrite) throw this.throwOnWrite;
    this.written.push(chunk);
    return false; // backpressure only: still a successful send
  }
}

class FakeChild extends EventEmitter {
  exitCode: number | null = null;
  signalCode: string | null = null;
  stdin = new FakeStdin();
  kills: (string | number | undefined)[] = [];
  kill(signal?: NodeJS.Signals | number): boolean {
    this.kills.push(signal);
    return true;
  }
  exit(code: number | null, signal: string | null = null) {
    this.exitCode = code;
    this.signalCode = signal;
    this.emit("exit", code, signal);
  }
}

class ManualScheduler implements BridgeScheduler {
  timers = new Map<number, { fn: () => void; ms: number }>();
  next = 1;
  set(fn: () => void, ms: number) {
    const id = this.next++;
    this.timers.set(id, { fn, ms });
    return id;
  }
  clear(handle: unknown) {
    this.timers.delete(handle as number);
  }
  /** Fires every pending timer due at or before `ms`, in order. */
  runUntil(ms: number) {
    const due = [...this.timers.entries()].filter(([, t]) => t.ms <= ms).sort((a, b) => a[1].ms - b[1].ms);
    for (const [id, timer] of due) {
      if (this.timers.delete(id)) timer.fn();
    }
  }
}

function setup(graceMs = 1500) {
  const child = new FakeChild();
  const scheduler = new ManualScheduler();
  const sendErrors: string[] = [];
  let finalized = 0;
  const channel = createBridgeChannel(child, {
    graceMs,
    scheduler,
    onSendError: (message) => sendErrors.push(message),
    onFinalize: () => finalized++,
  });
  return { child, scheduler, sendErrors, channel, finalized: () => finalized };
}

describe("send", () => {
  it("writes the encoded frame and counts backpressure as success", () => {
    const { child, channel } = setup();
    expect(channel.send({ type: "prompt", text: "hi" })).toBe(true);
    expect(child.stdin.written).toEqual(['{"type":"prompt","text":"hi","protocol_version":"1.0"}\n']);
  });

  it("reports a closed stdin with the command type", () => {
    const { child, channel, sendErrors } = setup();
    child.stdin.destroyed = true;
    expect(channel.send({ type: "cancel" })).toBe(false);
    expect(sendErrors).toEqual(["bridge stdin is closed (command: cancel)"]);
    child.stdin.destroyed = false;
    child.stdin.writable = false;
    expect(channel.send({ type: "reset" })).toBe(false);
    expect(sendErrors[1]).toBe("bridge stdin is closed (command: reset)");
  });

  it("reports a throwing write", () => {
    const { child, channel, sendErrors } = setup();
    child.stdin.throwOnWrite = new Error("EPIPE: broken pipe");
    expect(channel.send({ type: "cancel" })).toBe(false);
    expect(sendErrors).toEqual(["bridge stdin write failed: EPIPE: broken pipe"]);
  });

  it("passes stdin error events to onSendError until shutdown begins", () => {
    const { child, channel, sendErrors } = setup();
    child.stdin.emit("error", new Error("write EPIPE"));
    channel.shutdown();
    child.stdin.emit("error", new Error("later"));
    expect(sendErrors).toEqual(["write EPIPE"]);
  });

  it("refuses silently once shutdown has begun", () => {
    const { child, channel, sendErrors } = setup();
    channel.shutdown();
    child.stdin.destroyed = true;
    expect(channel.send({ type: "prompt", text: "late" })).toBe(false);
    expect(sendErrors).toEqual([]);
  });

  it("throws a TypeError for a command the backend would mishandle, writing nothing", () => {
    const { child, channel } = setup();
    expect(() => channel.send({ type: "approve", id: "x", allowed: "yes" } as never)).toThrow(TypeError);
    expect(child.stdin.written).toEqual([]);
  });
});

describe("shutdown", () => {
  it("sends shutdown and finalizes on exit within the grace period, without SIGKILL", () => {
    const { child, scheduler, channel, finalized } = setup();
    channel.shutdown();
    expect(channel.isShuttingDown()).toBe(true);
    expect(child.stdin.written).toEqual(['{"type":"shutdown","protocol_version":"1.0"}\n']);
    expect([...scheduler.timers.values()].map((t) => t.ms).sort()).toEqual([1500, 1750]);
    child.exit(0);
    expect(finalized()).toBe(1);
    expect(scheduler.timers.size).toBe(0);
    scheduler.runUntil(10_000);
    expect(child.kills).toEqual([]);
    expect(finalized()).toBe(1);
  });

  it("SIGKILLs after graceMs and finalizes after graceMs + 250 for a child that ignores it", () => {
    const { child, scheduler, channel, finalized } = setup(300);
    channel.shutdown();
    scheduler.runUntil(299);
    expect(child.kills).toEqual([]);
    scheduler.runUntil(300);
    expect(child.kills).toEqual(["SIGKILL"]);
    expect(finalized()).toBe(0);
    scheduler.runUntil(550);
    expect(finalized()).toBe(1);
    child.exit(null, "SIGKILL");
    expect(finalized()).toBe(1);
  });

  it("is idempotent", () => {
    const { child, channel, finalized } = setup();
    channel.shutdown();
    channel.shutdown();
    expect(child.stdin.written.length).toBe(1);
    child.exit(0);
    expect(finalized()).toBe(1);
  });

  it("finalizes at once when the child already exited", () => {
    const { child, scheduler, channel, finalized } = setup();
    child.exit(1);
    channel.shutdown();
    expect(finalized()).toBe(1);
    expect(child.stdin.written).toEqual([]);
    expect(scheduler.timers.size).toBe(0);
  });

  it("kills with the default signal when the shutdown command cannot be sent", () => {
    const { child, channel, sendErrors } = setup();
    child.stdin.destroyed = true;
    channel.shutdown();
    expect(child.kills).toEqual([undefined]);
    expect(sendErrors).toEqual([]);
  });
});
