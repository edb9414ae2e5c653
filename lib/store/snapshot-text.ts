/**
 * A snapshot as JSON text (issue 33): what the session hands a store's
 * `saveText` for each committed run. The backend's text is checked in Rust
 * where the host channel reads it (`checkSnapshot`'s checks, codes and
 * messages), so that the save path of the ready stores parses and encodes
 * nothing on the JavaScript thread: the memory store keeps the text, the
 * disk store writes it, the PostgreSQL store sends it. The document is
 * parsed only when someone reads `document`.
 */
import { SnapshotError, type SnapshotErrorCode } from "../errors";
import { native } from "../native";
import { checkSnapshot, encodeSnapshot, type SnapshotCheckOptions } from "./snapshot";
import type { Snapshot, SnapshotAgentId } from "./types";

/** Only this module makes a `SnapshotText`: each one has passed the checks. */
const CHECKED = Symbol("checked");

/** A refusal as the native check reports it. */
export interface SnapshotRefusal {
  code: string;
  field: string;
  message: string;
}

/**
 * A checked snapshot as JSON text. `text` is agentlane's document as the
 * backend wrote it, with its `revision` member moved first (so that a store
 * reads a stored revision from its first bytes); agentlane's own
 * `JsonFileStateStore` loads it as it is. Made by `snapshotText()` or by
 * the session; immutable.
 */
export class SnapshotText {
  /** The document's JSON text, `revision` first. */
  readonly text: string;
  /** The committed generation (what the next save expects). */
  readonly revision: number;
  /** Whose conversation it is. */
  readonly agentId: Readonly<SnapshotAgentId>;
  #document: Snapshot | undefined;

  /** Not for applications: use `snapshotText()`. */
  constructor(checked: symbol, text: string, revision: number, agentId: SnapshotAgentId) {
    if (checked !== CHECKED) throw new TypeError("A SnapshotText is made by snapshotText(document or text), which checks it.");
    this.text = text;
    this.revision = revision;
    this.agentId = Object.freeze({ type: agentId.type, key: agentId.key });
    Object.freeze(this);
  }

  /** The document, parsed from `text` on the first read (then the same object: treat it as read-only). */
  get document(): Snapshot {
    // A frozen instance can still set a private field.
    return (this.#document ??= JSON.parse(this.text) as Snapshot);
  }
}

/** The error of a refusal the native check reported. */
export function refusalError(refused: SnapshotRefusal): SnapshotError {
  return new SnapshotError(refused.message, refused.code as SnapshotErrorCode, refused.field);
}

/** A `SnapshotText` of text the native check accepted (the session's save path). */
export function checkedSnapshotText(text: string, revision: number, agentId: SnapshotAgentId): SnapshotText {
  return new SnapshotText(CHECKED, text, revision, agentId);
}

/**
 * Checks a snapshot and returns it as a `SnapshotText`: JSON text is
 * checked in Rust without being parsed here; a document is checked
 * (`checkSnapshot`) and encoded. Throws `SnapshotError` as `checkSnapshot`
 * does (same codes, fields and messages); a `SnapshotText` is returned
 * as it is unless `options.agentId` asks for another check.
 */
export function snapshotText(value: Snapshot | SnapshotText | string, options: SnapshotCheckOptions = {}): SnapshotText {
  if (value instanceof SnapshotText && options.agentId === undefined) return value;
  if (typeof value === "string" || value instanceof SnapshotText) {
    const text = typeof value === "string" ? value : value.text;
    const checked = native.checkSnapshotText(text, options.agentId?.type, options.agentId?.key);
    if (checked.refused != null) throw refusalError(checked.refused);
    return checkedSnapshotText(checked.text!, checked.revision!, { type: checked.agentType!, key: checked.agentKey! });
  }
  const document = checkSnapshot(value, options);
  return checkedSnapshotText(encodeSnapshot(document), document.revision, document.agent_id);
}
