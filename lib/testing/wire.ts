/**
 * Builders of valid bridge lines' pieces, shared by the testing kit's
 * backend (`backend.ts`) and the package's own session harness: one place
 * for what every native record and model stream event must carry.
 * No imports: it is loaded by a child program and from inside a test mock.
 */

/** The fields every model stream event carries, `null` unless the kind fills them (§6.2). */
export const MODEL_EVENT_NULLS = Object.freeze({
  raw: null,
  provider_event_type: null,
  item_index: null,
  item_type: null,
  text: null,
  tool_call_id: null,
  tool_call_index: null,
  arguments_delta: null,
  reasoning: null,
  reasoning_signature: null,
  response: null,
  error: null,
});

/** A `run_event` carrying the native record `kind` with `payload` (its `kind` added). */
export function nativeRecord<P extends object>(kind: string, payload: P): { type: "run_event"; event: { type: string; payload: { kind: string } & P } } {
  return { type: "run_event", event: { type: kind, payload: { kind, ...payload } } };
}
