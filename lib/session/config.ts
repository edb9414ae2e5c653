/**
 * The runtime config document (docs/protocol.md §8.6, §9.5.4): decoding it with
 * the application's `decodeConfig`, and what a `config` event settles.
 */
import { BridgeDecodeError } from "../errors";
import type { ConfigErrorPayload, ConfigEvent, JsonObject } from "../protocol";

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
