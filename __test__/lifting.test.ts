/**
 * Large values of large events are lifted out by the native reader
 * (bridge_core::lift): strings decoded off the JavaScript thread, arrays cut
 * into chunks parsed one per event-loop turn; both are put back after the
 * skeleton is parsed. Whatever the line, the event delivered must be
 * exactly `JSON.parse(line)`: same keys in the same order, `__proto__` as an
 * own key, duplicate keys last-wins, unpaired surrogates kept, the same
 * prototypes, and stream order.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PassThrough } from "node:stream";
import { describe, expect, it } from "vitest";
import { spawnBridgeProcess, wireBridgeProcess, type BridgeEvent, type BridgeProcessCallbacks } from "../lib/index";

/** The seeded PRNG (mulberry32) the hostile-input fixtures use too. */
const { prng } = createRequire(__filename)("./fixtures/hostile-lines.js") as {
  prng: (seed: number) => () => number;
};

// Strings of 16 KiB and more are lifted from lines of 64 KiB and more.
const BIG = 70_000;

/** JSON text of `value` that tells apart everything `JSON.parse` can produce. */
function exact(value: unknown): string {
  return JSON.stringify(value, function (this: unknown, key, v) {
    if (v !== null && typeof v === "object" && !Array.isArray(v)) {
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype) return { "(prototype)": String(proto) };
      // Own keys in order, "__proto__" included.
      return Object.fromEntries(Object.keys(v).map((k) => [`key:${k}`, (v as Record<string, unknown>)[k]]));
    }
    return v;
  });
}

/** A run_complete line whose `final_output` is the given JSON text. */
const lineWith = (finalOutput: string) =>
  `{"protocol_version":"1.0","type":"run_complete","ts":1,"final_output":${finalOutput},"turn_count":1,"response_count":1,"shim_state":{}}`;

/** Delivers `lines` through wireBridgeProcess over an in-memory stream. */
async function deliver(lines: string[]): Promise<{ events: BridgeEvent[]; errors: string[] }> {
  const stdout = new PassThrough();
  const events: BridgeEvent[] = [];
  const errors: string[] = [];
  const wiring = wireBridgeProcess(
    { stdout, stderr: null },
    { onEvent: (event) => events.push(event), onDecodeError: (error) => errors.push(error.message) },
  );
  stdout.end(`${lines.join("\n")}\n`);
  const deadline = Date.now() + 20_000;
  while (events.length + errors.length < lines.length && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  wiring.dispose();
  return { events, errors };
}

const big = (fill: string, size = BIG) => fill.repeat(Math.ceil(size / fill.length));

/** Streams `text` through `cat` and spawnBridgeProcess (a real pipe, the reader thread); resolves at onExit. */
async function catThrough(text: string, callbacks: Omit<BridgeProcessCallbacks, "onExit" | "onSpawnError">): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), "bridge-lifting-"));
  const file = join(dir, "lines.ndjson");
  writeFileSync(file, text);
  try {
    await new Promise<void>((resolve, reject) => {
      spawnBridgeProcess({ command: "cat", args: [file] }, { ...callbacks, onExit: () => resolve(), onSpawnError: reject });
    });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("large values lifted out of large events", () => {
  const cases: [string, string][] = [
    ["one large string value", lineWith(JSON.stringify(big("x")))],
    ["escapes of every kind", lineWith(JSON.stringify(`a\n\t\r\b\f"\\/\u0001${big("é")}`))],
    ["non-Latin-1 text and astral characters", lineWith(JSON.stringify(big("😀✓ ")))],
    ["unpaired surrogates written as escapes", lineWith(`"${big("x")}\\ud800\\udc00\\udc01y"`)],
    ["Latin-1 written as escapes", lineWith(`"${big("\\u00e9\\u00ff")}"`)],
    ["large strings at many depths, in arrays and objects", lineWith(JSON.stringify({ a: big("a"), b: [1, big("b"), { c: [big("c")] }], d: "small" }))],
    ["a duplicate key whose later value is small", lineWith(`{"k":"${big("x")}","k":5}`)],
    ["a duplicate key whose later value is large too", lineWith(`{"k":"${big("x")}","k":"${big("y")}"}`)],
    ["a duplicate key on the path", lineWith(`{"a":{"b":"${big("x")}"},"a":{"b":"small"}}`)],
    ["__proto__ keys", lineWith(`{"__proto__":"${big("x")}","o":{"__proto__":{"p":"${big("y")}"}}}`)],
    ["keys with escapes and unpaired surrogates", lineWith(`{"k\\u00e9":"${big("x")}","\\ud800":"${big("y")}","a\\"b":"${big("z")}"}`)],
    ["a later duplicate whose value is a marker's text", lineWith(`{"k":"${big("x")}","k":"\\u0000lifted:0"}`)],
    ["a large key", lineWith(`{"${big("k")}":"${big("v")}"}`)],
    ["the envelope's own strings", `{"protocol_version":"1.0","type":"run_start","ts":1,"prompt":"${big("p")}"}`],
  ];

  for (const [name, line] of cases) {
    it(`delivers exactly JSON.parse(line): ${name}`, async () => {
      const { events, errors } = await deliver([line]);
      expect(errors).toEqual([]);
      expect(events).toHaveLength(1);
      expect(exact(events[0])).toBe(exact(JSON.parse(line)));
    });
  }

  it("agrees with JSON.parse on 300 seeded random large events, in stream order", async () => {
    const rng = prng(0x11f7);
    const pick = <T>(items: T[]) => items[Math.floor(rng() * items.length)];
    const stringText = () =>
      rng() < 0.4
        ? JSON.stringify(big(pick(["x", "é", "😀", "a\"b\\", "\n", "\u2028", "\u0000", "<>"]), 17_000 + Math.floor(rng() * 20_000)))
        : JSON.stringify(pick(["", "s", "\u0000lifted:0", "é", "lifted:1"]));
    const keyText = () => JSON.stringify(pick(["a", "b", "__proto__", "constructor", "k\u00e9", "\ud800", "0", "a.b"]));
    const value = (depth: number): string => {
      const roll = rng();
      if (depth > 3 || roll < 0.45) return rng() < 0.8 ? stringText() : pick(["1", "null", "true", "-0", "1e400"]);
      if (roll < 0.75) {
        const members = Array.from({ length: 1 + Math.floor(rng() * 4) }, () => `${keyText()}:${value(depth + 1)}`);
        return `{${members.join(",")}}`;
      }
      return `[${Array.from({ length: Math.floor(rng() * 4) }, () => value(depth + 1)).join(",")}]`;
    };
    const lines = Array.from({ length: 300 }, (_, i) =>
      i % 10 === 9 ? `{"protocol_version":"1.0","type":"shutdown","ts":${i}}` : lineWith(`{"v":${value(0)},"w":${value(1)}}`),
    );
    const { events, errors } = await deliver(lines);
    expect(errors).toEqual([]);
    expect(events.map(exact)).toEqual(lines.map((line) => exact(JSON.parse(line))));
  });

  // Arrays of 1 MiB and more are cut into chunks, parsed one per turn.
  const files = (count: number, tag = "") =>
    Array.from({ length: count }, (_, i) => ({ path: `src/m${i}/f${i}.ts${tag}`, size: i * 37, tags: ["ts", i % 2 ? "odd" : "even"], meta: { lines: [i, i + 1] } }));
  const arrayCases: [string, string][] = [
    ["a large array of objects", lineWith(JSON.stringify({ files: files(20_000), total: 20_000 }))],
    ["a large array holding large strings and arrays", lineWith(JSON.stringify([big("s"), files(15_000), [big("t"), 1], { u: big("u") }]))],
    ["a large array as an array element and under __proto__", lineWith(`[1,${JSON.stringify(files(15_000))}]`.replace(/^\[1,/, `{"__proto__":`).replace(/\]$/, "}"))],
    ["a large array under a duplicate key that a later value replaces", lineWith(`{"k":${JSON.stringify(files(15_000))},"k":[1]}`)],
    ["two large arrays, an empty one and whitespace between elements", lineWith(`{"a":${JSON.stringify(files(12_000), null, 1).replace(/\n/g, " ")},"b":[ ],"c":${JSON.stringify(files(12_000, "é😀"))}}`)],
  ];
  for (const [name, line] of arrayCases) {
    it(`delivers exactly JSON.parse(line): ${name}`, async () => {
      expect(line.length).toBeGreaterThan(1 << 20);
      const { events, errors } = await deliver([line]);
      expect(errors).toEqual([]);
      expect(events).toHaveLength(1);
      expect(exact(events[0])).toBe(exact(JSON.parse(line)));
    });
  }

  it("leaves a line nested 1.5 million deep whole, and delivers it", async () => {
    const depth = 1_500_000; // 3 MB of brackets: the reader looks for arrays to cut
    const line = lineWith(`{"s":"${big("x")}","deep":${"[".repeat(depth)}${"]".repeat(depth)}}`);
    const { events, errors } = await deliver([line]);
    expect(errors).toEqual([]);
    expect(events).toHaveLength(1);
    let value = (events[0] as unknown as { final_output: { deep: unknown[] } }).final_output.deep;
    let levels = 0;
    while (Array.isArray(value) && value.length === 1) {
      value = value[0] as unknown[];
      levels++;
    }
    expect(levels + 1).toBe(depth);
  });

  it("lets the event loop turn while a large array is parsed, and keeps stream order (spawnBridgeProcess, a real pipe)", async () => {
    const shutdown = (ts: number) => `{"protocol_version":"1.0","type":"shutdown","ts":${ts}}`;
    const large = lineWith(JSON.stringify({ files: files(40_000) }));
    const lines = [shutdown(1), large, shutdown(2), large, ...Array.from({ length: 3000 }, (_, i) => shutdown(10 + i))];
    let turns = 0;
    let counting = true;
    const count = () => {
      turns++;
      if (counting) setImmediate(count);
    };
    setImmediate(count);
    const turnsAt: number[] = [];
    const events: BridgeEvent[] = [];
    await catThrough(`${lines.join("\n")}\n`, { onEvent: (event) => (events.push(event), turnsAt.push(turns)) });
    counting = false;
    expect(events.map(exact)).toEqual(lines.map((line) => exact(JSON.parse(line))));
    // Its array is cut into chunks of 256 KiB, one parsed per turn.
    const chunks = Math.floor(large.length / (256 * 1024));
    expect(turnsAt[1] - turnsAt[0]).toBeGreaterThanOrEqual(chunks - 1);
  });

  it("stops restoring a large event once the wiring is disposed", async () => {
    const stdout = new PassThrough();
    const events: BridgeEvent[] = [];
    const large = lineWith(JSON.stringify({ files: files(40_000) }));
    const wiring = wireBridgeProcess({ stdout, stderr: null }, {
      onEvent: (event) => {
        events.push(event);
        if (event.type === "shutdown") wiring.dispose();
      },
    });
    stdout.end(`{"protocol_version":"1.0","type":"shutdown","ts":1}\n${large}\n{"protocol_version":"1.0","type":"shutdown","ts":2}\n`);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(events.map((event) => event.type)).toEqual(["shutdown"]);
  });

  it("rethrows a callback's exception after restoring, without losing the events after it (spawnBridgeProcess)", async () => {
    const seen: string[] = [];
    const uncaught: unknown[] = [];
    const onUncaught = (error: unknown) => uncaught.push(error);
    process.prependListener("uncaughtException", onUncaught);
    const large = lineWith(JSON.stringify({ files: files(20_000) }));
    try {
      await catThrough(`${large}\n{"protocol_version":"1.0","type":"shutdown","ts":2}\n`, {
        onEvent: (event) => {
          seen.push(event.type);
          if (event.type === "run_complete") throw new Error("handler failed");
        },
      });
      const deadline = Date.now() + 10_000;
      while (uncaught.length < 1 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5));
    } finally {
      process.off("uncaughtException", onUncaught);
    }
    expect(seen).toEqual(["run_complete", "shutdown"]);
    expect((uncaught[0] as Error).message).toBe("handler failed");
  });

  it("delivers a large event restored over many turns before onExit, however short exitDrainMs is", async () => {
    const line = lineWith(JSON.stringify({ files: files(60_000) }));
    const dir = mkdtempSync(join(tmpdir(), "bridge-lifting-"));
    const file = join(dir, "line.ndjson");
    writeFileSync(file, `${line}\n`);
    const order: string[] = [];
    try {
      await new Promise<void>((resolve, reject) => {
        spawnBridgeProcess(
          { command: "cat", args: [file], exitDrainMs: 1 },
          { onEvent: (event) => order.push(event.type), onExit: () => (order.push("exit"), resolve()), onSpawnError: reject },
        );
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(order).toEqual(["run_complete", "exit"]);
  });

  it("through a real child process and pipe, a 20 MB string result arrives intact", async () => {
    const text = "0123456789abcdef\\n".repeat(1_200_000);
    const line = lineWith(`"${text}"`);
    const dir = mkdtempSync(join(tmpdir(), "bridge-lifting-"));
    const file = join(dir, "line.ndjson");
    writeFileSync(file, `${line}\n`);
    const events: BridgeEvent[] = [];
    try {
      const code = await new Promise<number | null>((resolve, reject) => {
        spawnBridgeProcess({ command: "cat", args: [file] }, { onEvent: (event) => events.push(event), onExit: resolve, onSpawnError: reject });
      });
      expect(code).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    expect(events).toHaveLength(1);
    const output = (events[0] as { final_output: string }).final_output;
    expect(output.length).toBe(text.length - 1_200_000);
    expect(output === JSON.parse(line).final_output).toBe(true);
  });
});
