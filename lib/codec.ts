/**
 * The codec (docs/protocol.md §9.1): strict decoding of event lines and checked
 * encoding of commands. Validation happens in Rust; JavaScript only parses a
 * line the validator has accepted, so the decoded value is exactly what
 * `JSON.parse` gives for it.
 */
import { BridgeCommandError, BridgeDecodeError, type BridgeCommandErrorCode } from "./errors";
import { native } from "./native";
import {
  KNOWN_EVENT_TYPES,
  KNOWN_MODEL_EVENT_KINDS,
  PROTOCOL_VERSION,
  type AnyModelEvent,
  type BridgeCommand,
  type BridgeEvent,
  type BridgeEventType,
  type NativeEventKind,
  type NativeModelEvent,
  type NativePayload,
  type NativeRunEvent,
} from "./protocol";

/**
 * Lines at least this long are parsed first and the parsed value is
 * validated; shorter ones are validated as text first. Copying a line out of
 * V8 costs more than validating it, and for large lines more than walking
 * the few members the schema checks (BENCHMARKS.md has the numbers).
 */
export const LARGE_LINE_CHARS = 16 * 1024;

/**
 * Decodes one stdout line (without its terminator) into a bridge event.
 * Throws a {@link BridgeDecodeError} with the reference's message and field
 * paths when the line is not a valid event.
 */
export function decodeBridgeEventLine(line: string): BridgeEvent {
  const text = typeof line === "string" ? line : String(line);
  return text.length < LARGE_LINE_CHARS ? decodeViaText(text) : decodeViaValue(text);
}

/** Validates the text in Rust, then parses it. */
export function decodeViaText(text: string): BridgeEvent {
  try {
    native.validateEventLine(text);
  } catch (error) {
    throw withExactEcho(error, text);
  }
  return JSON.parse(text) as BridgeEvent;
}

/**
 * A decode error whose message echoes the line's `type` or
 * `protocol_version` echoes it exactly as JavaScript sees it. The value
 * crosses into Rust as UTF-8, where an unpaired surrogate has no form and
 * becomes U+FFFD; only then (a message holding U+FFFD) is the line parsed
 * again here, to take the value itself.
 */
export function withExactEcho(error: unknown, line: string): unknown {
  if (!(error instanceof BridgeDecodeError) || !error.message.includes("\uFFFD")) return error;
  const field = error.code === "unknown-type" ? "type" : error.code === "unsupported-version" ? "protocol_version" : undefined;
  if (field === undefined) return error;
  let echoed: unknown;
  try {
    echoed = (JSON.parse(line) as Record<string, unknown> | null)?.[field];
  } catch {
    return error;
  }
  if (typeof echoed !== "string") return error;
  const message = field === "type" ? `Unknown bridge event type: ${echoed}.` : `Unsupported bridge protocol version: ${echoed}.`;
  return new BridgeDecodeError(message, error.fields, { code: error.code });
}

/** Parses the text, then validates the parsed value in Rust. */
export function decodeViaValue(text: string): BridgeEvent {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    // Not JSON: let the text validator describe the syntax error, so that
    // messages do not depend on the line's length.
    native.validateEventLine(text);
    throw new BridgeDecodeError("Invalid JSON bridge event: SyntaxError: the line is not valid JSON", [], { code: "invalid-json" });
  }
  try {
    native.validateEventValue(value);
  } catch (error) {
    throw withExactEcho(error, text);
  }
  return value as BridgeEvent;
}

/** Like {@link decodeBridgeEventLine}, but `null` instead of a decode error. */
export function tryDecodeBridgeEventLine(line: string): BridgeEvent | null {
  try {
    return decodeBridgeEventLine(line);
  } catch (error) {
    if (error instanceof BridgeDecodeError) return null;
    throw error;
  }
}

/** §3.3: whether an event's `protocol_version` has major version 1 (JavaScript `Number()` rules). */
export function isSupportedProtocolVersion(value: string): boolean {
  return native.isSupportedProtocolVersion(String(value));
}

const eventTypes: ReadonlySet<string> = new Set(KNOWN_EVENT_TYPES);

/** Exact membership in {@link KNOWN_EVENT_TYPES} (`"toString"` is not a type). */
export function isKnownEventType(type: string): type is BridgeEventType {
  return eventTypes.has(type);
}

/** Narrows a native record to a kind's payload type; does not re-validate. */
export function isNativeEvent<K extends NativeEventKind>(
  record: NativeRunEvent,
  kind: K,
): record is NativeRunEvent & { type: K; payload: NativePayload<K> } {
  return record.type === kind;
}

const modelKinds: ReadonlySet<string> = new Set(KNOWN_MODEL_EVENT_KINDS);

/** Whether a model stream event is of one of the six known kinds (all 13 keys then present). */
export function isKnownModelEvent(modelEvent: AnyModelEvent | NativeModelEvent): modelEvent is NativeModelEvent {
  return modelEvent != null && typeof modelEvent.kind === "string" && modelKinds.has(modelEvent.kind);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== "object") return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * Encodes a command as one frame, trailing `\n` included: the command's own
 * fields, then `protocol_version`, serialized by `JSON.stringify` (§4.1).
 *
 * Unlike the reference, it throws a {@link BridgeCommandError} (a
 * `TypeError`) instead of writing a frame the backend would mishandle: an
 * unknown `type`, a missing or mistyped field, a string with an unpaired
 * surrogate (it kills the backend), or a frame over the backend's
 * 1,000,000-code-point line limit.
 */
export function encodeBridgeCommand(command: BridgeCommand): string {
  if (!isPlainObject(command)) {
    throw new BridgeCommandError(
      "encodeBridgeCommand expects a command object such as { type: \"prompt\", text: \"…\" }.",
      { code: "not-a-command-object" },
    );
  }
  if (command.type === "configure" && !isPlainObject((command as { patch?: unknown }).patch)) {
    throw new BridgeCommandError("Invalid configure command: configure.patch must be a JSON object.", {
      code: "invalid-field",
      command: "configure",
      field: "patch",
    });
  }
  const frame = JSON.stringify({ ...command, protocol_version: PROTOCOL_VERSION });
  const problem = native.commandFrameProblem(frame);
  if (problem !== null) {
    throw new BridgeCommandError(problem.message, {
      code: problem.code as BridgeCommandErrorCode,
      command: problem.commandType,
      field: problem.field,
    });
  }
  return `${frame}\n`;
}

export { BridgeDecodeError };
