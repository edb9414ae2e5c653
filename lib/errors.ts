/**
 * A line from the backend that is not a valid bridge event (PROTOCOL.md §7).
 *
 * Instances are created by the native decoder (which registers this class at
 * load time) and by the process layers; `instanceof` works across both.
 * `fields` lists the dotted paths of the failing fields, first occurrence
 * kept, `[]` when no field applies. It is frozen.
 */
export class BridgeDecodeError extends Error {
  readonly fields: readonly string[];

  constructor(message: string, fields: readonly string[] = []) {
    super(message);
    this.name = "BridgeDecodeError";
    this.fields = Object.freeze([...fields]);
  }
}
