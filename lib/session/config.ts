/**
 * The runtime config document (docs/protocol.md §8.6, §9.5.4): decoding it with
 * the application's `decodeConfig`, and what a `config` event settles.
 */
import { BridgeDecodeError, ConfigureError } from "../errors";
import type { ConfigErrorPayload, ConfigEvent, JsonObject, JsonValue } from "../protocol";

export type Decoded<T> = { ok: true; value: T } | { ok: false; error: BridgeDecodeError };

/** Decodes a config document; a throwing decoder is a protocol failure of the document. */
export function decodeConfigDocument<T>(raw: JsonObject, decoder: ((raw: JsonObject) => T) | undefined): Decoded<T> {
  try {
    return { ok: true, value: decoder ? decoder(raw) : (raw as T) };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return {
      ok: false,
      error: new BridgeDecodeError(`Invalid runtime config document: ${message}`, ["config"], { code: "invalid-config-document", cause: error }),
    };
  }
}

/** What a `config` event settles its configure with. */
export type ConfigSettlement =
  /** Applied: the new document. */
  | { outcome: "applied"; document: JsonObject }
  /** Refused, with the backend's error and maybe its current document. */
  | { outcome: "refused"; error: ConfigErrorPayload; document: JsonObject | null }
  /** Self-contradictory (the decoder's rule makes this unreachable for decoded events). */
  | { outcome: "contradictory"; error: BridgeDecodeError };

export function settlementOf(event: ConfigEvent): ConfigSettlement {
  if (event.ok) {
    if (event.config === null) {
      return { outcome: "contradictory", error: new BridgeDecodeError("Successful config event did not include config.", ["config"], { code: "invalid-payload" }) };
    }
    return { outcome: "applied", document: event.config };
  }
  if (event.error === null) {
    return { outcome: "contradictory", error: new BridgeDecodeError("Failed config event did not include error.", ["error"], { code: "invalid-payload" }) };
  }
  return { outcome: "refused", error: event.error, document: event.config };
}

/** A config event with no configure waiting for it. */
export function unexpectedConfigEvent(): BridgeDecodeError {
  return new BridgeDecodeError("Unexpected config event without pending configure.", ["type"], { code: "unexpected-event" });
}

/**
 * A configure patch as the JSON it will be sent as: a plain object whose
 * values, at every depth, are JSON (plain objects and arrays, strings,
 * finite numbers, booleans, null). Anything JSON cannot carry is refused
 * with its path instead of vanishing or changing in `JSON.stringify`
 * (`undefined`, `NaN`, functions, `Map`s, `Date`s, class instances, cycles).
 * Returns a copy, so that what was checked is what is sent.
 */
export function jsonPatch(patch: unknown): JsonObject {
  if (!isPlainObject(patch)) {
    throw new ConfigureError("invalid", `Configure patch must be a plain JSON object, not ${describe(patch)}.`);
  }
  return copyJson(patch, [], new Set()) as JsonObject;
}

function copyJson(value: unknown, path: (string | number)[], open: Set<object>): JsonValue {
  if (value === null || typeof value === "string" || typeof value === "boolean") return value;
  if (typeof value === "number") {
    if (Number.isFinite(value)) return value;
    throw notJson(path, String(value));
  }
  if (typeof value !== "object") throw notJson(path, describe(value));
  if (open.has(value)) throw notJson(path, "a circular reference");
  open.add(value);
  try {
    if (Array.isArray(value)) {
      if (Object.getPrototypeOf(value) !== Array.prototype) throw notJson(path, describe(value));
      return value.map((element, index) => copyJson(element, [...path, index], open));
    }
    if (!isPlainObject(value)) throw notJson(path, describe(value));
    const copy: JsonObject = {};
    // Each member is read once (a getter runs once): the copy is what is sent.
    for (const [key, member] of Object.entries(value)) {
      // JSON.stringify would leave an undefined member out: refused instead.
      if (member === undefined) {
        if (path.length === 0) throw new ConfigureError("invalid", `Configure patch value must not be undefined: ${key}.`);
        throw notJson([...path, key], "undefined");
      }
      copy[key] = copyJson(member, [...path, key], open);
    }
    return copy;
  } finally {
    open.delete(value);
  }
}

function notJson(path: (string | number)[], what: string): ConfigureError {
  return new ConfigureError("invalid", `Configure patch value at ${path.join(".")} is not JSON: ${what}.`);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object" || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") {
    const name = Object.getPrototypeOf(value)?.constructor?.name;
    return name && name !== "Object" ? `a ${name}` : "an object";
  }
  return typeof value === "undefined" ? "undefined" : `a ${typeof value}`;
}
