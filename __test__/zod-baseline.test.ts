import { describe, it, expect } from "vitest";

import { ZodBridgeDecodeError, zodDecodeBridgeEventLine } from "../bench/zod-baseline";
import { examples } from "./helpers";

/** Decode and return the thrown ZodBridgeDecodeError (fails the test if nothing / something else is thrown). */
function decodeError(line: string): ZodBridgeDecodeError {
  try {
    zodDecodeBridgeEventLine(line);
  } catch (error) {
    expect(error).toBeInstanceOf(ZodBridgeDecodeError);
    return error as ZodBridgeDecodeError;
  }
  throw new Error(`expected a decode error for ${line}`);
}

function expectPayloadError(line: string, fields: string[]): void {
  const error = decodeError(line);
  expect(error.message).toBe(`Invalid bridge event payload: ${fields.join(", ")}.`);
  expect(error.fields).toStrictEqual(fields);
}

const env = (type: string, rest: string): string =>
  `{"protocol_version":"1.0","type":"${type}","ts":1767225600.5${rest === "" ? "" : `,${rest}`}}`;

const runEvent = (record: string): string => env("run_event", `"event":${record}`);

const lineage = `"task_name":"Assistant","task_id":"task-1","parent_task_id":null,"is_root":true`;

describe("zod baseline: protocol examples (docs/protocol.md §10)", () => {
  it("has the expected number of examples", () => {
    expect(examples.valid).toHaveLength(39);
    expect(examples.invalid).toHaveLength(54);
  });

  describe("valid lines decode to exactly JSON.parse(line)", () => {
    it.each(examples.valid.map((example) => [example.name, example] as const))("%s", (_name, example) => {
      const decoded = zodDecodeBridgeEventLine(example.line);
      expect(decoded).toStrictEqual(JSON.parse(example.line));
      // key order preserved at the top level and inside the native record
      expect(JSON.stringify(decoded)).toBe(JSON.stringify(JSON.parse(example.line)));
    });
  });

  describe("invalid lines throw the documented error", () => {
    it.each(examples.invalid.map((example) => [`${example.id} ${example.name}`, example] as const))(
      "%s",
      (_name, example) => {
        const error = decodeError(example.line);
        expect(error.name).toBe("BridgeDecodeError");
        if (example.messageIsPrefix) {
          expect(error.message.startsWith(example.message)).toBe(true);
          expect(error.message.length).toBeGreaterThan(example.message.length);
        } else {
          expect(error.message).toBe(example.message);
        }
        expect(error.fields).toStrictEqual(example.fields);
      },
    );
  });
});

describe("zod baseline: tricky semantics", () => {
  it("JSON syntax errors carry the SyntaxError text and no fields", () => {
    const error = decodeError("not json");
    expect(error.message.startsWith("Invalid JSON bridge event: SyntaxError: ")).toBe(true);
    expect(error.fields).toStrictEqual([]);
  });

  it("duplicate keys resolve last-wins (via JSON.parse) before validation", () => {
    // first ts invalid, last valid -> accepted
    const ok = `{"protocol_version":"1.0","type":"shutdown","ts":"x","ts":1}`;
    expect(zodDecodeBridgeEventLine(ok)).toStrictEqual({ protocol_version: "1.0", type: "shutdown", ts: 1 });
    // first ts valid, last invalid -> rejected at ts
    expectPayloadError(`{"protocol_version":"1.0","type":"shutdown","ts":1,"ts":"x"}`, ["ts"]);
    // duplicate type: the last one selects the schema
    expect(
      zodDecodeBridgeEventLine(`{"protocol_version":"1.0","type":"bogus","type":"run_cancelled","ts":1}`),
    ).toStrictEqual({ protocol_version: "1.0", type: "run_cancelled", ts: 1 });
  });

  it("a __proto__ key is an ordinary unknown key on a closed event", () => {
    expectPayloadError(env("shutdown", `"__proto__":{"x":1}`), ["event"]);
    expectPayloadError(env("config", `"ok":false,"config":null,"error":{"code":"invalid","message":"m","__proto__":1}`), [
      "error",
    ]);
  });

  it("a __proto__ key is kept as an own key inside native records", () => {
    const line = runEvent(`{"type":"agent_start","payload":{${lineage},"kind":"agent_start","__proto__":{"a":1}}}`);
    const decoded = zodDecodeBridgeEventLine(line) as { event: { payload: Record<string, unknown> } };
    expect(Object.prototype.hasOwnProperty.call(decoded.event.payload, "__proto__")).toBe(true);
    expect(Object.getPrototypeOf(decoded.event.payload)).toBe(Object.prototype);
    expect(decoded).toStrictEqual(JSON.parse(line));
  });

  it("1e400 (Infinity) fails number fields but passes any-JSON positions", () => {
    expectPayloadError(`{"protocol_version":"1.0","type":"shutdown","ts":1e400}`, ["ts"]);
    expectPayloadError(`{"protocol_version":"1.0","type":"shutdown","ts":-1e400}`, ["ts"]);
    const ok = env("run_complete", `"final_output":1e400,"turn_count":1,"response_count":0,"shim_state":{"n":1e400}`);
    const decoded = zodDecodeBridgeEventLine(ok) as { final_output: unknown };
    expect(decoded.final_output).toBe(Infinity);
    expectPayloadError(env("run_complete", `"final_output":null,"turn_count":1e400,"response_count":0,"shim_state":{}`), [
      "turn_count",
    ]);
    // negative, integral and fractional ts all fine
    expect(() => zodDecodeBridgeEventLine(`{"protocol_version":"1.0","type":"shutdown","ts":-3}`)).not.toThrow();
  });

  it("any-JSON fields accept null and any value but not absence", () => {
    for (const value of ["null", "false", "0", `""`, "[]", "{}", `{"a":[1,{"b":null}]}`]) {
      expect(() =>
        zodDecodeBridgeEventLine(env("run_complete", `"final_output":${value},"turn_count":0,"response_count":0,"shim_state":{}`)),
      ).not.toThrow();
    }
    expectPayloadError(env("run_complete", `"turn_count":0,"response_count":0,"shim_state":{}`), ["final_output"]);
  });

  it("unknown native kinds are accepted intact, extras everywhere kept", () => {
    const line = runEvent(`{"type":"constructor","payload":{"kind":7,"deep":{"x":[1,2]}},"extra":true}`);
    expect(zodDecodeBridgeEventLine(line)).toStrictEqual(JSON.parse(line));
    for (const type of ["toString", "__proto__", "Agent_start", "hasOwnProperty"]) {
      const l = runEvent(`{"type":"${type}","payload":{}}`);
      expect(zodDecodeBridgeEventLine(l)).toStrictEqual(JSON.parse(l));
    }
    // payload.kind names an unknown kind or is missing: still accepted
    expect(() => zodDecodeBridgeEventLine(runEvent(`{"type":"x","payload":{"kind":"y"}}`))).not.toThrow();
  });

  it("contradictory kind: unknown type with a known payload.kind", () => {
    expectPayloadError(runEvent(`{"type":"subagent_progress","payload":{"kind":"model_stream"}}`), [
      "event.payload.kind",
    ]);
    // payload.kind must be an exact known kind to contradict
    expect(() => zodDecodeBridgeEventLine(runEvent(`{"type":"x","payload":{"kind":"Model_stream"}}`))).not.toThrow();
  });

  it("no kind dispatch when the record itself is broken", () => {
    expectPayloadError(runEvent(`{"type":5,"payload":{"kind":"agent_start"}}`), ["event.type"]);
    expectPayloadError(runEvent(`{"type":"agent_start","payload":[]}`), ["event.payload"]);
    expectPayloadError(runEvent(`[]`), ["event"]);
  });

  it("the config refinement is not held back by unknown keys (as in the reference: zod's unrecognized_keys never aborts)", () => {
    // ok:true with config null is a refinement issue, reported after the unknown key's
    expectPayloadError(env("config", `"ok":true,"error":null,"config":null,"extra":1`), ["event", "config"]);
    // the same with an unknown key inside the nested closed config.error
    expectPayloadError(env("config", `"ok":true,"error":{"code":"invalid","message":"m","hint":1},"config":null`), [
      "error",
      "config",
    ]);
    // structural issue elsewhere on the event also suppresses it
    expectPayloadError(`{"protocol_version":"1.0","type":"config","ok":true,"error":null,"config":null}`, ["ts"]);
  });

  it("model-event 13-field rule runs independently of other payload issues", () => {
    const record = `{"type":"model_stream","payload":{"kind":"agent_start","event":{"kind":"completed"}}}`;
    const fields = [
      "raw",
      "provider_event_type",
      "item_index",
      "item_type",
      "text",
      "tool_call_id",
      "tool_call_index",
      "arguments_delta",
      "reasoning",
      "reasoning_signature",
      "response",
      "error",
    ].map((key) => `event.payload.event.${key}`);
    expectPayloadError(runEvent(record), ["event.payload.kind", ...fields]);
  });

  it("pending approval with a non-null final_decision is accepted", () => {
    const request = `{"tool_name":"w","operation":"x","cwd":"/","path":null,"command":null,"skill_name":null,"reason":null,"run_id":null,"agent_name":null,"tool_call_id":null,"metadata":{}}`;
    const rec = (status: string, final: string) =>
      runEvent(
        `{"type":"tool_approval","payload":{"kind":"tool_approval","event":{"record":{"request_id":"r","request":${request},"approval_required_decision":{"outcome":"allow","reason":null},"status":"${status}","final_decision":${final}}}}}`,
      );
    expect(() => zodDecodeBridgeEventLine(rec("pending", `{"outcome":"require_approval","reason":null}`))).not.toThrow();
    expect(() => zodDecodeBridgeEventLine(rec("resolved", `{"outcome":"deny","reason":"no"}`))).not.toThrow();
    expectPayloadError(rec("resolved", `{"outcome":"require_approval","reason":null}`), [
      "event.payload.event.record.final_decision",
    ]);
  });

  it("version acceptance follows JS Number() on the major part", () => {
    for (const v of ["1.0", "1", "1.7", "1.0.3", "01.0", " 1.0", "+1.2", "1e0", "0x1.0", "10e-1", "0o1", "0b1"]) {
      expect(() => zodDecodeBridgeEventLine(`{"protocol_version":"${v}","type":"shutdown","ts":1}`)).not.toThrow();
    }
    for (const v of ["2.0", "0.9", "", "v1", "1abc", ".1", "-0x1", "Infinity"]) {
      const error = decodeError(`{"protocol_version":"${v}","type":"shutdown","ts":1}`);
      expect(error.message).toBe(`Unsupported bridge protocol version: ${v}.`);
      expect(error.fields).toStrictEqual(["protocol_version"]);
    }
  });

  it("event type membership is exact (own names only)", () => {
    for (const type of ["toString", "constructor", "__proto__", "Ready"]) {
      const error = decodeError(`{"protocol_version":"1.0","type":"${type}","ts":1}`);
      expect(error.message).toBe(`Unknown bridge event type: ${type}.`);
      expect(error.fields).toStrictEqual(["type"]);
    }
  });

  it("deduplicates paths keeping the first occurrence", () => {
    // missing run_event.event (path "event") + unknown key (path "event" too)
    expectPayloadError(env("run_event", `"seq":1`), ["event"]);
  });
});
