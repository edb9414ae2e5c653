/**
 * Differential test: seeded random mutations of valid events, decoded by our
 * native decoder (both its text path and its parsed-value path) and by the
 * independent zod 4 baseline written to the same spec. They must agree on
 * accept/reject, on the decoded value, and on the error message and fields.
 */
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { BridgeDecodeError } from "../lib/index";
import { decodeViaText, decodeViaValue } from "../lib/codec";
import { zodDecodeBridgeEventLine } from "../bench/zod-baseline";
import { examples, repoRoot } from "./helpers";
import { verdicts } from "./verdicts";

// Every line judged here, recorded for the cross-architecture comparison
// (scripts/cross-arm64.sh) when PBN_VERDICTS_DIR is set.
const mutatedVerdicts = verdicts("differential-mutations");
const damagedVerdicts = verdicts("differential-text-damage");

// ---- deterministic randomness -------------------------------------------

/** The seeded PRNG (mulberry32) the hostile-input fixtures use too. */
const { prng: mulberry32 } = createRequire(__filename)("./fixtures/hostile-lines.js") as {
  prng: (seed: number) => () => number;
};

type Rng = () => number;
const pick = <T>(rng: Rng, items: readonly T[]): T => items[Math.floor(rng() * items.length)];

// ---- a JSON tree that can hold what JSON.stringify cannot write ----------

/** A literal written verbatim (e.g. `1e400`, `-0`, a lone surrogate escape). */
class Raw {
  constructor(readonly text: string) {}
}
/** An object whose text repeats keys: entries are written in order. */
class Entries {
  constructor(readonly entries: [string, Node][]) {}
}
type Node = null | boolean | number | string | Raw | Entries | Node[] | { [key: string]: Node };

function toText(node: Node): string {
  if (node instanceof Raw) return node.text;
  if (node instanceof Entries) return `{${node.entries.map(([k, v]) => `${JSON.stringify(k)}:${toText(v)}`).join(",")}}`;
  if (Array.isArray(node)) return `[${node.map(toText).join(",")}]`;
  if (node !== null && typeof node === "object") {
    return `{${Object.entries(node).map(([k, v]) => `${JSON.stringify(k)}:${toText(v)}`).join(",")}}`;
  }
  return JSON.stringify(node);
}

function isPlain(node: Node): node is { [key: string]: Node } {
  return node !== null && typeof node === "object" && !Array.isArray(node) && !(node instanceof Raw) && !(node instanceof Entries);
}

/** Every object and array in the tree, with a way to replace a child. */
function containers(root: Node): (Node[] | { [key: string]: Node })[] {
  const out: (Node[] | { [key: string]: Node })[] = [];
  const stack: Node[] = [root];
  while (stack.length > 0) {
    const node = stack.pop()!;
    if (Array.isArray(node)) {
      out.push(node);
      stack.push(...node);
    } else if (isPlain(node)) {
      out.push(node);
      stack.push(...Object.values(node));
    }
  }
  return out;
}

// ---- mutations -------------------------------------------------------------

const EVENT_TYPES = ["ready", "config", "run_start", "run_complete", "run_cancelled", "error", "reset", "cancel_requested", "cancel_ignored", "shutdown", "run_event"];
const NATIVE_KINDS = ["model_stream", "agent_start", "agent_end", "llm_start", "llm_end", "tool_start", "tool_end", "tool_approval", "handoff_start", "handoff_end", "state_snapshot", "plan_updated"];
const MODEL_KINDS = ["provider", "text_delta", "tool_call_arguments_delta", "reasoning", "completed", "error"];
const KEY_POOL = ["type", "kind", "payload", "event", "ts", "protocol_version", "config", "error", "ok", "result", "record", "status", "final_decision", "tool_call", "id", "function", "usage", "__proto__", "constructor", "toString", "extra", "", "é", "\u2028"];
const STRINGS = ["", "x", "1.0", "2.0", " 1", "resolved", "pending", "allow", "deny", "require_approval", "function", "chat.completion", "command", "run", "rejected", ...EVENT_TYPES, ...NATIVE_KINDS, ...MODEL_KINDS, "toString"];

function randomValue(rng: Rng, depth = 0): Node {
  switch (Math.floor(rng() * 12)) {
    case 0: return null;
    case 1: return rng() < 0.5;
    case 2: return Math.floor(rng() * 2000) - 1000;
    case 3: return pick(rng, [new Raw("1e400"), new Raw("-1e400"), new Raw("-0"), new Raw("1.5e-7"), new Raw("123456789012345678901234567890")]);
    case 4: return pick(rng, STRINGS);
    case 5: return new Raw(pick(rng, ['"\\ud800"', '"a\\udfffb"', '"\\u0074ype"', '"\\n\\t\\"\\\\"', '"é😀"']));
    case 6: return depth > 2 ? [] : [randomValue(rng, depth + 1)];
    case 7: return depth > 2 ? {} : { [pick(rng, KEY_POOL)]: randomValue(rng, depth + 1) };
    case 8: return [];
    case 9: return {};
    case 10: return 1767225600.5;
    default: return pick(rng, EVENT_TYPES);
  }
}

type Mutation = (rng: Rng, root: { [key: string]: Node }) => void;

const deleteKey: Mutation = (rng, root) => {
  const objects = containers(root).filter((c) => !Array.isArray(c) && Object.keys(c).length > 0) as { [key: string]: Node }[];
  if (objects.length === 0) return;
  const object = pick(rng, objects);
  delete object[pick(rng, Object.keys(object))];
};

const changeType: Mutation = (rng, root) => {
  const all = containers(root);
  const container = pick(rng, all);
  if (Array.isArray(container)) {
    if (container.length > 0) container[Math.floor(rng() * container.length)] = randomValue(rng);
  } else {
    const keys = Object.keys(container);
    if (keys.length > 0) container[pick(rng, keys)] = randomValue(rng);
  }
};

const addKey: Mutation = (rng, root) => {
  const objects = containers(root).filter((c) => !Array.isArray(c)) as { [key: string]: Node }[];
  const object = pick(rng, objects);
  const key = pick(rng, KEY_POOL);
  if (key === "__proto__") {
    Object.defineProperty(object, key, { value: randomValue(rng), enumerable: true, configurable: true, writable: true });
  } else {
    object[key] = randomValue(rng);
  }
};

const swapDiscriminator: Mutation = (rng, root) => {
  const targets: [{ [key: string]: Node }, string, readonly string[]][] = [[root, "type", EVENT_TYPES]];
  const record = root.event;
  if (isPlain(record)) {
    targets.push([record, "type", [...NATIVE_KINDS, "subagent_progress", "toString"]]);
    const payload = record.payload;
    if (isPlain(payload)) {
      targets.push([payload, "kind", [...NATIVE_KINDS, "other"]]);
      if (isPlain(payload.event)) targets.push([payload.event, "kind", [...MODEL_KINDS, "web_search"]]);
      const approval = payload.event;
      if (isPlain(approval) && isPlain(approval.record)) {
        targets.push([approval.record, "status", ["pending", "resolved", "done"]]);
      }
    }
  }
  if (root.type === "config") targets.push([root, "ok", []]);
  const [object, key, values] = pick(rng, targets);
  object[key] = values.length === 0 ? rng() < 0.5 : pick(rng, values);
};

const shuffleKeys: Mutation = (rng, root) => {
  const objects = containers(root).filter((c) => !Array.isArray(c)) as { [key: string]: Node }[];
  const object = pick(rng, objects);
  const entries = Object.entries(object);
  for (let i = entries.length - 1; i > 0; i--) {
    const j = Math.floor(rng() * (i + 1));
    [entries[i], entries[j]] = [entries[j], entries[i]];
  }
  for (const key of Object.keys(object)) delete object[key];
  for (const [key, value] of entries) object[key] = value;
};

/** Rewrites one object as entries with a repeated key, before or after the real one. */
function duplicateKey(rng: Rng, root: Node): Node {
  const objects = containers(root).filter((c) => !Array.isArray(c) && Object.keys(c).length > 0) as { [key: string]: Node }[];
  if (objects.length === 0) return root;
  const target = pick(rng, objects);
  const key = pick(rng, Object.keys(target));
  const extra: [string, Node] = [key, randomValue(rng)];
  const entries = Object.entries(target);
  const at = entries.findIndex(([k]) => k === key);
  if (rng() < 0.5) entries.splice(at, 0, extra);
  else entries.splice(at + 1, 0, extra);
  const replacement = new Entries(entries);
  const swap = (node: Node): Node => {
    if (node === target) return replacement;
    if (Array.isArray(node)) return node.map(swap);
    if (isPlain(node)) {
      const copy: { [key: string]: Node } = {};
      for (const [k, v] of Object.entries(node)) {
        if (k === "__proto__") Object.defineProperty(copy, k, { value: swap(v), enumerable: true, configurable: true, writable: true });
        else copy[k] = swap(v);
      }
      return copy;
    }
    return node;
  };
  return swap(root);
}

const MUTATIONS: [string, Mutation][] = [
  ["delete a key", deleteKey],
  ["change a value's type", changeType],
  ["add a key", addKey],
  ["swap a discriminator", swapDiscriminator],
  ["shuffle an object's keys", shuffleKeys],
];

// ---- the seeds: every valid example and the recorded real traffic --------

function seeds(): string[] {
  const lines = examples.valid.map((e) => e.line);
  const dir = join(repoRoot, "tests/fixtures/recorded");
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".ndjson"))) {
    const text = readFileSync(join(dir, file), "utf8");
    const recorded = text.split("\n").filter((l) => l.length > 0 && l.length < 20_000);
    // A spread of each session, not all of it: the examples cover the shapes.
    for (let i = 0; i < recorded.length; i += 7) lines.push(recorded[i]);
  }
  return lines.filter((line) => {
    try {
      zodDecodeBridgeEventLine(line);
      return true;
    } catch {
      return false; // the cut last line of the backend that dies mid-line
    }
  });
}

type Outcome = { ok: true; value: unknown } | { ok: false; message: string; fields: readonly string[] };

function outcome(decode: (line: string) => unknown, line: string): Outcome {
  try {
    return { ok: true, value: decode(line) };
  } catch (error) {
    if (!(error instanceof Error) || error.name !== "BridgeDecodeError") throw error;
    const message = error.message.startsWith("Invalid JSON bridge event: ") ? "Invalid JSON bridge event: …" : error.message;
    return { ok: false, message, fields: (error as BridgeDecodeError).fields };
  }
}

/**
 * A documented difference: an unknown type or unsupported version is echoed
 * in the message after a UTF-8 conversion, so an unpaired surrogate in it
 * shows as U+FFFD (README, "Differences from the reference").
 */
const withoutLoneSurrogates = (text: string) => text.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");

function normalize(o: Outcome) {
  return o.ok
    ? { ok: true, value: JSON.stringify(o.value) }
    : { ok: false, message: withoutLoneSurrogates(o.message), fields: [...o.fields] };
}

describe("native decoder vs the zod baseline on mutated events", () => {
  const seedLines = seeds();

  it("has a broad seed corpus", () => {
    expect(seedLines.length).toBeGreaterThan(100);
  });

  it.each(MUTATIONS.map(([name], index) => [name, index]))("agrees after random mutations, starting with: %s", (_name, index) => {
    const rng = mulberry32(0x5eed + index);
    const disagreements: string[] = [];
    let rejected = 0;
    const samples = 1500;
    for (let i = 0; i < samples; i++) {
      const seed = pick(rng, seedLines);
      const tree = JSON.parse(seed) as { [key: string]: Node };
      MUTATIONS[index][1](rng, tree);
      const extra = Math.floor(rng() * 3);
      for (let k = 0; k < extra; k++) pick(rng, MUTATIONS)[1](rng, tree);
      const line = toText(rng() < 0.25 ? duplicateKey(rng, tree) : tree);
      mutatedVerdicts.record(line);

      const zod = normalize(outcome(zodDecodeBridgeEventLine, line));
      const text = normalize(outcome(decodeViaText, line));
      const value = normalize(outcome(decodeViaValue, line));
      if (!zod.ok) rejected += 1;
      const same = JSON.stringify(zod) === JSON.stringify(text) && JSON.stringify(text) === JSON.stringify(value);
      if (!same && disagreements.length < 5) {
        disagreements.push(`${line}\n  zod:   ${JSON.stringify(zod)}\n  text:  ${JSON.stringify(text)}\n  value: ${JSON.stringify(value)}`);
      }
    }
    expect(disagreements).toEqual([]);
    // The mutations must produce both outcomes in quantity to mean anything.
    expect(rejected).toBeGreaterThan(samples * 0.3);
    expect(samples - rejected).toBeGreaterThan(samples * 0.05);
  });
});

describe("native decoder vs JSON.parse on raw text damage", () => {
  it("accepts exactly the JSON that JSON.parse accepts", () => {
    const rng = mulberry32(0xdada);
    const seedLines = examples.valid.map((e) => e.line);
    const alphabet = ['"', "\\", "{", "}", "[", "]", ",", ":", " ", "\n", "0", "-", "e", ".", "t", "n", "u", "\u0001", "é", "\ud800"];
    const problems: string[] = [];
    for (let i = 0; i < 3000; i++) {
      let line = pick(rng, seedLines);
      const edits = 1 + Math.floor(rng() * 3);
      for (let k = 0; k < edits; k++) {
        const at = Math.floor(rng() * (line.length + 1));
        const op = rng();
        if (op < 0.4) line = line.slice(0, at) + line.slice(at + 1);
        else if (op < 0.8) line = line.slice(0, at) + pick(rng, alphabet) + line.slice(at);
        else line = line.slice(0, at);
      }
      damagedVerdicts.record(line);
      let parses = true;
      try {
        JSON.parse(line);
      } catch {
        parses = false;
      }
      for (const decode of [decodeViaText, decodeViaValue]) {
        const result = outcome(decode, line);
        const syntaxError = !result.ok && result.message === "Invalid JSON bridge event: …";
        if (parses === syntaxError && problems.length < 5) problems.push(`${JSON.stringify(line)}: JSON.parse ${parses ? "accepts" : "rejects"}, decoder ${JSON.stringify(result)}`);
      }
      const zod = normalize(outcome(zodDecodeBridgeEventLine, line));
      const ours = normalize(outcome(decodeViaText, line));
      if (JSON.stringify(zod) !== JSON.stringify(ours) && problems.length < 5) problems.push(`${JSON.stringify(line)}: zod ${JSON.stringify(zod)} ours ${JSON.stringify(ours)}`);
    }
    expect(problems).toEqual([]);
  });
});
