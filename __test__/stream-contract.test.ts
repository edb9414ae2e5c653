/**
 * The stream batch contract's constants reach TypeScript from the addon
 * (`batchContract()`, from `bridge_core::batch`, `lift` and `framer`):
 * the TypeScript side holds no copy that could drift.
 */
import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_LINE_BYTES } from "../lib/index";
import { native } from "../lib/native";
import { LIFT_MARKER, PART } from "../lib/stream/contract";

describe("the batch contract", () => {
  const contract = native.batchContract();

  it("part kinds are the addon's, one distinct letter each", () => {
    const codes = Object.values(PART);
    expect(new Set(codes).size).toBe(codes.length);
    for (const [name, code] of Object.entries(PART)) {
      expect(String.fromCharCode(code)).toBe(contract.partKinds[name]);
      expect(String.fromCharCode(code)).toMatch(/^[A-Z]$/);
    }
    expect(Object.keys(contract.partKinds).sort()).toEqual(Object.keys(PART).sort());
  });

  it("the lift marker and the limits are the core's", () => {
    expect(LIFT_MARKER).toBe(contract.liftMarker);
    expect(LIFT_MARKER).toBe("\u0000lifted:");
    expect(DEFAULT_MAX_LINE_BYTES).toBe(contract.defaultMaxLineBytes);
    expect(DEFAULT_MAX_LINE_BYTES).toBe(256 * 1024 * 1024);
    expect(contract.tooLongPrefixBytes).toBe(1024);
    expect(contract.largeLineBytes).toBe(64 * 1024);
  });

  it("the decode error codes are the ones BridgeDecodeError's type lists", () => {
    expect(native.protocolTables().decodeErrorCodes).toEqual([
      "invalid-json",
      "not-an-object",
      "version-not-a-string",
      "unsupported-version",
      "type-not-a-string",
      "unknown-type",
      "invalid-payload",
      "line-too-long",
    ]);
  });
});
