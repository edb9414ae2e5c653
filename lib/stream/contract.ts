/**
 * The constants of the stream batch contract (`bridge_core::batch` in the
 * Rust core), read once from the addon: this side keeps no copy, so a
 * constant changed in Rust cannot drift from what JavaScript expects.
 */
import { native } from "../native";

const contract = native.batchContract();

/** `kinds.charCodeAt(i)` of each part kind (see `bridge_core::batch::PartKind`). */
export const PART = {
  /** The JSON array text of consecutive small valid events. */
  events: partCode("events"),
  /** One large valid event line. */
  event: partCode("event"),
  /** One invalid line; its error at the same index of `errors`. */
  invalid: partCode("invalid"),
  /** One stderr line. */
  text: partCode("text"),
  /** A large event's skeleton; then its lift index, then lifted strings and chunks. */
  lifted: partCode("lifted"),
  liftIndex: partCode("liftIndex"),
  liftedString: partCode("liftedString"),
  chunk: partCode("chunk"),
} as const;

/** A lifted value's place in the parsed skeleton holds this text + its index. */
export const LIFT_MARKER: string = contract.liftMarker;

/** The default maximum line size (bytes) of the native readers. */
export const DEFAULT_MAX_LINE_BYTES: number = contract.defaultMaxLineBytes;

function partCode(name: string): number {
  const kind = contract.partKinds[name];
  if (kind === undefined || kind.length !== 1) throw new Error(`The addon's batch contract has no part kind ${name}.`);
  return kind.charCodeAt(0);
}
