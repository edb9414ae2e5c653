/**
 * What `createAgentSession` and `attachAgentSession` receive from
 * JavaScript callers (who may pass anything): the backend spec, the
 * numeric options and the start's `signal`, refused with a clear message
 * naming what is wrong, before anything is spawned.
 */
import { checkCount, checkMilliseconds } from "../options";
import type { resolveBackendSpec } from "../process";
import type { AgentSessionOptions } from "./types";

/** Throws `InvalidOptionError` for the first numeric session option that cannot be used (a `TypeError` for a `signal` that is not one). */
export function checkSessionOptions(given: object): void {
  const options = given as Partial<AgentSessionOptions<unknown, unknown>> & { maxLineBytes?: unknown; exitDrainMs?: unknown };
  for (const name of ["readyTimeoutMs", "shutdownGraceMs", "termGraceMs", "runTimeoutMs", "idleTimeoutMs", "cancelTimeoutMs", "commandTimeoutMs", "toolTimeoutMs", "storeTimeoutMs"] as const) {
    checkMilliseconds(name, options[name]);
  }
  checkCount("maxStdinBufferBytes", options.maxStdinBufferBytes);
  const recorder = options.flightRecorder;
  if (recorder !== undefined && typeof recorder === "object" && recorder !== null) {
    checkCount("flightRecorder.lines", recorder.lines, { unbounded: true });
    checkCount("flightRecorder.bytes", recorder.bytes, { unbounded: true });
    checkCount("flightRecorder.maxLineBytes", recorder.maxLineBytes, { unbounded: true });
  }
  // An attached session's reading options.
  checkCount("maxLineBytes", options.maxLineBytes);
  checkMilliseconds("exitDrainMs", options.exitDrainMs);
  const signal = options.signal as unknown;
  if (signal !== undefined && !isAbortSignal(signal)) throw new TypeError(`The signal option must be an AbortSignal, not ${describeValue(signal)}.`);
  // The backend spec's own numbers are checked where the start is resolved (spawn/start-plan.ts).
}

/** The backend spec, refused with a clear message when it is not one. */
export function checkedBackend(backend: unknown): Parameters<typeof resolveBackendSpec>[0] {
  if (backend === null || backend === undefined) throw new TypeError("A backend spec is required: { app, projectDir } or { command, args }.");
  if (typeof backend !== "object") throw new TypeError(`The backend spec must be an object, not ${describeValue(backend)}.`);
  const spec = backend as { command?: unknown; args?: unknown; app?: unknown; env?: unknown };
  if ("command" in spec && (typeof spec.command !== "string" || spec.command === "")) {
    throw new TypeError("The backend spec's command must be a non-empty string.");
  }
  if ("app" in spec && (typeof spec.app !== "string" || spec.app === "")) {
    throw new TypeError("The backend spec's app must be a non-empty string (module:factory).");
  }
  if (spec.args !== undefined && (!Array.isArray(spec.args) || spec.args.some((a) => typeof a !== "string"))) {
    throw new TypeError("The backend spec's args must be an array of strings.");
  }
  return backend as Parameters<typeof resolveBackendSpec>[0];
}

/** An `AbortSignal`, from this realm or another (a test's vm context). */
function isAbortSignal(value: unknown): value is AbortSignal {
  const signal = value as Partial<AbortSignal> | null;
  return (
    typeof signal === "object" &&
    signal !== null &&
    typeof signal.aborted === "boolean" &&
    typeof signal.addEventListener === "function" &&
    typeof signal.removeEventListener === "function"
  );
}

/** A short description of a value's type, for messages. */
export function describeValue(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "object") {
    const name = Object.getPrototypeOf(value)?.constructor?.name;
    return name && name !== "Object" ? `a ${name} object` : "an object";
  }
  return typeof value === "undefined" ? "undefined" : `a ${typeof value}`;
}
