import { describe, expect, it } from "vitest";
import {
  BridgeCommandError,
  BridgeDecodeError,
  KNOWN_COMMAND_TYPES,
  KNOWN_EVENT_TYPES,
  PROTOCOL_MAJOR,
  PROTOCOL_VERSION,
  decodeBridgeEventLine,
  encodeBridgeCommand,
  isKnownEventType,
  isKnownModelEvent,
  isNativeEvent,
  isSupportedProtocolVersion,
  tryDecodeBridgeEventLine,
  type BridgeCommand,
  type NativeRunEvent,
} from "../lib/index";
import { decodeViaText, decodeViaValue } from "../lib/codec";
import { examples } from "./helpers";

function decodeError(fn: () => unknown): BridgeDecodeError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(BridgeDecodeError);
    return error as BridgeDecodeError;
  }
  throw new Error("expected a BridgeDecodeError");
}

describe("constants", () => {
  it("mirror the reference", () => {
    expect(PROTOCOL_VERSION).toBe("1.0");
    expect(PROTOCOL_MAJOR).toBe(1);
    expect(KNOWN_COMMAND_TYPES).toEqual(["prompt", "approve", "cancel", "configure", "reset", "shutdown"]);
    expect(KNOWN_EVENT_TYPES).toEqual([
      "ready", "config", "run_start", "run_complete", "run_cancelled", "error",
      "reset", "cancel_requested", "cancel_ignored", "shutdown", "run_event",
    ]);
    expect(Object.isFrozen(KNOWN_EVENT_TYPES)).toBe(true);
  });
});

describe.each([
  ["decodeBridgeEventLine", decodeBridgeEventLine],
  ["the text path", decodeViaText],
  ["the parsed-value path", decodeViaValue],
])("%s on the §10 examples", (_name, decode) => {
  it.each(examples.valid.map((e) => [e.name, e.line]))("decodes %s exactly as JSON.parse", (_n, line) => {
    const event = decode(line);
    expect(event).toStrictEqual(JSON.parse(line));
    expect(Object.keys(event)).toEqual(Object.keys(JSON.parse(line)));
  });

  it.each(examples.invalid.map((e) => [e.id, e]))("rejects %s with the reference error", (_id, example) => {
    const error = decodeError(() => decode(example.line));
    if (example.messageIsPrefix) {
      expect(error.message.startsWith(`${example.message}SyntaxError: `)).toBe(true);
      expect(error.message.length).toBeGreaterThan(`${example.message}SyntaxError: `.length);
    } else {
      expect(error.message).toBe(example.message);
    }
    expect(error.fields).toEqual(example.fields);
    expect(error.code).toBe(example.code);
  });
});

describe("BridgeDecodeError", () => {
  it("is created by the native decoder as an instance of the exported class", () => {
    const error = decodeError(() => decodeBridgeEventLine('{"protocol_version":"1.0","type":"ready","ts":1}'));
    expect(error).toBeInstanceOf(Error);
    expect(error.name).toBe("BridgeDecodeError");
    expect(error.message).toBe("Invalid bridge event payload: version, package.");
    expect(error.fields).toEqual(["version", "package"]);
    expect(Object.isFrozen(error.fields)).toBe(true);
    expect(() => (error.fields as string[]).push("x")).toThrow(TypeError);
    expect(error.stack).toContain("BridgeDecodeError: Invalid bridge event payload");
    expect(error.stack).toContain("codec.test.ts");
  });

  it("can be constructed by applications", () => {
    const error = new BridgeDecodeError("custom");
    expect(error.fields).toEqual([]);
    expect(new BridgeDecodeError("m", ["a", "b"]).fields).toEqual(["a", "b"]);
  });

  it("carries the core's code for each check, on both paths, and applications may give a code and a cause", () => {
    const long = `{"protocol_version":"1.0","type":"ready","ts":1,"metadata":{"pad":"${"x".repeat(70_000)}"}}`;
    expect(decodeError(() => decodeBridgeEventLine(long)).code).toBe("invalid-payload");
    expect(decodeError(() => decodeBridgeEventLine("{")).code).toBe("invalid-json");
    expect(decodeError(() => decodeViaValue(`{"x":"${"y".repeat(20_000)}"`)).code).toBe("invalid-json");
    expect(new BridgeDecodeError("custom").code).toBe("unknown");
    const cause = new Error("inner");
    const made = new BridgeDecodeError("m", ["a"], { code: "decode-failed", cause });
    expect([made.code, made.cause, made.message, made.fields]).toEqual(["decode-failed", cause, "m", ["a"]]);
  });

  it("comes from the parsed-value path too", () => {
    const long = `{"protocol_version":"1.0","type":"ready","ts":1,"metadata":{"pad":"${"x".repeat(70_000)}"}}`;
    const error = decodeError(() => decodeBridgeEventLine(long));
    expect(error.fields).toEqual(["version", "package"]);
  });
});

describe("drop-in details (issue \"Drop-in and pleasant\")", () => {
  it.each([
    ["decodeBridgeEventLine", decodeBridgeEventLine],
    ["the text path", decodeViaText],
    ["the parsed-value path", decodeViaValue],
  ])("%s: a config event with an unknown key and an ok/error contradiction reports both, as the reference does", (_name, decode) => {
    const error = decodeError(() => decode('{"protocol_version":"1.0","type":"config","ts":1,"ok":false,"config":null,"error":null,"extra":1}'));
    expect(error.message).toBe("Invalid bridge event payload: event, error.");
    expect(error.fields).toEqual(["event", "error"]);
  });

  it.each([
    ["decodeBridgeEventLine", decodeBridgeEventLine],
    ["the text path", decodeViaText],
    ["the parsed-value path", decodeViaValue],
  ])("%s: messages echo a value with an unpaired surrogate exactly as JavaScript would (escaped or raw)", (_name, decode) => {
    const pad = decode === decodeViaValue ? `,"pad":"${"x".repeat(20_000)}"` : "";
    expect(decodeError(() => decode(`{"protocol_version":"1.0","type":"a\\ud800b","ts":1${pad}}`)).message).toBe("Unknown bridge event type: a\ud800b.");
    expect(decodeError(() => decode(`{"protocol_version":"\\udfff","type":"shutdown","ts":1${pad}}`)).message).toBe("Unsupported bridge protocol version: \udfff.");
    // A raw lone surrogate in the JavaScript string.
    expect(decodeError(() => decode(`{"protocol_version":"1.0","type":"x\ud800","ts":1${pad}}`)).message).toBe("Unknown bridge event type: x\ud800.");
    // A genuine U+FFFD stays what it is.
    expect(decodeError(() => decode(`{"protocol_version":"1.0","type":"\ufffd","ts":1${pad}}`)).message).toBe("Unknown bridge event type: \ufffd.");
  });
});

describe("tryDecodeBridgeEventLine", () => {
  it("returns the event or null", () => {
    expect(tryDecodeBridgeEventLine(examples.valid[0].line)).toStrictEqual(JSON.parse(examples.valid[0].line));
    expect(tryDecodeBridgeEventLine("not json")).toBeNull();
    expect(tryDecodeBridgeEventLine('{"protocol_version":"2.0","type":"shutdown","ts":1}')).toBeNull();
  });
});

describe("hostile lines never crash and give BridgeDecodeError", () => {
  const shutdown = '{"protocol_version":"1.0","type":"shutdown","ts":1}';
  it.each([
    ["empty", ""],
    ["whitespace only", " \t "],
    ["BOM-prefixed", `\ufeff${shutdown}`],
    ["NaN", '{"protocol_version":"1.0","type":"shutdown","ts":NaN}'],
    ["Infinity", '{"protocol_version":"1.0","type":"shutdown","ts":Infinity}'],
    ["trailing garbage", `${shutdown}x`],
    ["two objects per line", `${shutdown}${shutdown}`],
    ["two objects with a space", `${shutdown} ${shutdown}`],
    ["unterminated nesting", "[".repeat(200_000)],
  ])("%s", (_name, line) => {
    for (const decode of [decodeBridgeEventLine, decodeViaText, decodeViaValue]) {
      const error = decodeError(() => decode(line));
      expect(error.message.startsWith("Invalid JSON bridge event: SyntaxError: ")).toBe(true);
      expect(error.fields).toEqual([]);
    }
  });

  const runComplete = (finalOutput: string) =>
    `{"protocol_version":"1.0","type":"run_complete","ts":1,"final_output":${finalOutput},"turn_count":1,"response_count":1,"shim_state":{}}`;

  it("decodes 100,000 levels of nesting inside an any-JSON field", () => {
    const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    for (const decode of [decodeViaText, decodeViaValue]) {
      const event = decode(runComplete(deep)) as { final_output: unknown };
      let depth = 0;
      let node = event.final_output;
      while (Array.isArray(node) && node.length > 0) {
        node = node[0];
        depth += 1;
      }
      expect(depth).toBe(99_999);
    }
  });

  it("rejects 100,000 levels of nesting inside a checked field at that field", () => {
    const deep = `${"[".repeat(100_000)}${"]".repeat(100_000)}`;
    const line = `{"protocol_version":"1.0","type":"shutdown","ts":${deep}}`;
    for (const decode of [decodeViaText, decodeViaValue]) {
      expect(decodeError(() => decode(line)).fields).toEqual(["ts"]);
    }
  });

  it("decodes a 200 MB line", () => {
    const line = runComplete(`"${"x".repeat(200 * 1024 * 1024)}"`);
    const event = decodeBridgeEventLine(line) as { final_output: string };
    expect(event.final_output.length).toBe(200 * 1024 * 1024);
  });

  it("treats 1e400 as Infinity: fails a number field, passes an any-JSON field", () => {
    const event = decodeBridgeEventLine(runComplete("1e400")) as { final_output: number };
    expect(event.final_output).toBe(Infinity);
    expect(decodeError(() => decodeBridgeEventLine('{"protocol_version":"1.0","type":"shutdown","ts":1e400}')).fields).toEqual(["ts"]);
  });

  it("keeps __proto__ and constructor as own keys, and duplicate keys last-wins", () => {
    const line = '{"protocol_version":"1.0","type":"run_event","ts":1,"event":{"type":"x","payload":{"__proto__":{"a":1},"constructor":2,"k":1,"k":2}}}';
    const event = decodeBridgeEventLine(line) as { event: NativeRunEvent };
    const payload = event.event.payload;
    expect(Object.keys(payload)).toEqual(["__proto__", "constructor", "k"]);
    expect(Object.getPrototypeOf(payload)).toBe(Object.prototype);
    expect(payload.k).toBe(2);
  });

  it("accepts lone surrogates and raw U+2028 in strings", () => {
    const line = '{"protocol_version":"1.0","type":"run_start","ts":1,"prompt":"\\ud800\u2028"}';
    expect((decodeBridgeEventLine(line) as { prompt: string }).prompt).toBe("\ud800\u2028");
  });

  it("rejects a value that is not a string line the way JSON.parse would coerce it", () => {
    expect(decodeError(() => decodeBridgeEventLine(undefined as unknown as string)).fields).toEqual([]);
  });
});

describe("isSupportedProtocolVersion", () => {
  it.each(["1.0", "1", "1.7", "1.0.3", "01.0", " 1.0", "+1.2", "1e0", "0x1.0"])("accepts %j", (v) => {
    expect(isSupportedProtocolVersion(v)).toBe(true);
  });
  it.each(["2.0", "0.9", "", "v1", "1abc", ".1"])("rejects %j", (v) => {
    expect(isSupportedProtocolVersion(v)).toBe(false);
  });
});

describe("type guards", () => {
  it("isKnownEventType is exact membership", () => {
    expect(isKnownEventType("run_event")).toBe(true);
    expect(isKnownEventType("toString")).toBe(false);
    expect(isKnownEventType("assistant_delta")).toBe(false);
  });

  it("isNativeEvent compares the record type", () => {
    const record: NativeRunEvent = { type: "tool_start", payload: { kind: "tool_start" } };
    expect(isNativeEvent(record, "tool_start")).toBe(true);
    expect(isNativeEvent(record, "tool_end")).toBe(false);
  });

  it("isKnownModelEvent recognises the six model kinds", () => {
    for (const kind of ["provider", "text_delta", "tool_call_arguments_delta", "reasoning", "completed", "error"]) {
      expect(isKnownModelEvent({ kind })).toBe(true);
    }
    expect(isKnownModelEvent({ kind: "web_search_progress" })).toBe(false);
    expect(isKnownModelEvent({ kind: "toString" })).toBe(false);
  });
});

describe("encodeBridgeCommand", () => {
  const commands: BridgeCommand[] = [
    { type: "prompt", text: "List the files" },
    { type: "approve", id: "tool-approval-1", allowed: true },
    { type: "approve", id: "tool-approval-2", allowed: false, reason: "Not in this folder." },
    { type: "configure", patch: { model: "gpt-b" } },
    { type: "cancel" },
    { type: "reset" },
    { type: "shutdown" },
  ];

  it("produces the reference frames of §10.1", () => {
    expect(commands.map(encodeBridgeCommand)).toEqual(examples.encodedCommands.map((line) => `${line}\n`));
  });

  it("escapes like JSON.stringify and leaves out undefined fields", () => {
    expect(encodeBridgeCommand({ type: "prompt", text: "a\u2028\u0001é" })).toBe(
      '{"type":"prompt","text":"a\u2028\\u0001é","protocol_version":"1.0"}\n',
    );
    expect(encodeBridgeCommand({ type: "approve", id: "x", allowed: false, reason: undefined })).toBe(
      '{"type":"approve","id":"x","allowed":false,"protocol_version":"1.0"}\n',
    );
  });

  it.each([
    ["an unknown type", { type: "bogus" }, "Unknown bridge command type: bogus."],
    ["a missing type", { text: "x" }, "Bridge command type must be a string."],
    ["prompt.text missing", { type: "prompt" }, "prompt.text must be a string"],
    ["prompt.text not a string", { type: "prompt", text: 5 }, "prompt.text must be a string"],
    ["approve.allowed a string", { type: "approve", id: "a", allowed: "true" }, "approve.allowed must be a boolean"],
    ["approve.allowed missing", { type: "approve", id: "a" }, "approve.allowed must be a boolean"],
    ["approve.id missing", { type: "approve", allowed: true }, "approve.id must be a string"],
    ["configure.patch an array", { type: "configure", patch: [1] }, "configure.patch must be a JSON object"],
    ["configure.patch a Map", { type: "configure", patch: new Map() }, "configure.patch must be a JSON object"],
    ["configure.patch missing", { type: "configure" }, "configure.patch must be a JSON object"],
    ["an unpaired surrogate", { type: "prompt", text: "a\ud800" }, "prompt.text contains an unpaired UTF-16 surrogate (\\ud800)"],
    ["a nested unpaired surrogate", { type: "configure", patch: { k: ["\udfff"] } }, "configure.patch contains an unpaired"],
    ["a frame over 1,000,000 code points", { type: "prompt", text: "x".repeat(1_000_000) }, "the backend refuses lines over 1000000"],
    ["not an object", "prompt", "expects a command object"],
  ])("throws a TypeError for %s", (_name, command, message) => {
    expect(() => encodeBridgeCommand(command as unknown as BridgeCommand)).toThrow(TypeError);
    expect(() => encodeBridgeCommand(command as unknown as BridgeCommand)).toThrow(message);
  });

  it.each([
    ["an unknown type", { type: "bogus" }, "unknown-type", undefined, "type"],
    ["a missing type", { text: "x" }, "type-not-a-string", undefined, "type"],
    ["approve.allowed a string", { type: "approve", id: "a", allowed: "true" }, "invalid-field", "approve", "allowed"],
    ["configure.patch a Map", { type: "configure", patch: new Map() }, "invalid-field", "configure", "patch"],
    ["an unpaired surrogate", { type: "prompt", text: "a\ud800" }, "unpaired-surrogate", "prompt", "text"],
    ["a frame over the limit", { type: "prompt", text: "x".repeat(1_000_000) }, "too-long", "prompt", undefined],
    ["not an object", "prompt", "not-a-command-object", undefined, undefined],
  ])("the refusal of %s is a BridgeCommandError with its code, command and field", (_name, command, code, type, field) => {
    let thrown: unknown;
    try {
      encodeBridgeCommand(command as unknown as BridgeCommand);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(BridgeCommandError);
    expect(thrown).toBeInstanceOf(TypeError);
    const error = thrown as BridgeCommandError;
    expect([error.name, error.code, error.command, error.field]).toEqual(["BridgeCommandError", code, type, field]);
  });

  it("accepts a frame of exactly the backend's limit", () => {
    const overhead = encodeBridgeCommand({ type: "prompt", text: "" }).length; // includes the newline
    const frame = encodeBridgeCommand({ type: "prompt", text: "é".repeat(1_000_000 - overhead) });
    expect([...frame].length).toBe(1_000_000);
  });

  it("accepts paired surrogates", () => {
    expect(encodeBridgeCommand({ type: "prompt", text: "😀" })).toBe('{"type":"prompt","text":"😀","protocol_version":"1.0"}\n');
  });
});
