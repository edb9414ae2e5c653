/**
 * A tool handler's result as the JSON text the channel carries. Strictly
 * JSON: `JSON.stringify` would quietly turn `NaN` into `null`, drop
 * `undefined` and functions, and make `{}` of a `Map`; here each of those
 * is a clear `invalid-result` failure the model reads, naming where. An
 * object's property that is `undefined` is left out, as JSON.stringify
 * does (it is how optional fields are written in JavaScript).
 */

/** The handler's result is not JSON (the message says where). */
export class ToolResultError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ToolResultError";
  }
}

/** `value` as JSON text, or `ToolResultError`. */
export function resultText(value: unknown): string {
  if (value === undefined) throw new ToolResultError("The tool returned nothing (undefined): its result must be JSON.");
  let text: string | undefined;
  try {
    text = JSON.stringify(value, function (this: unknown, key: string, item: unknown) {
      const where = () => (key === "" ? "the result" : `the result at ${JSON.stringify(key)}`);
      switch (typeof item) {
        case "number":
          if (!Number.isFinite(item)) throw new ToolResultError(`The tool's result is not JSON: ${where()} is ${item}.`);
          return item;
        case "undefined":
          if (key !== "" && !Array.isArray(this)) return undefined;
          throw new ToolResultError(`The tool's result is not JSON: ${where()} is undefined.`);
        case "function":
        case "symbol":
        case "bigint":
          throw new ToolResultError(`The tool's result is not JSON: ${where()} is a ${typeof item}.`);
        case "object":
          if (item instanceof Map || item instanceof Set || item instanceof Promise) {
            throw new ToolResultError(`The tool's result is not JSON: ${where()} is a ${item.constructor.name}.`);
          }
          return item;
        default:
          return item;
      }
    });
  } catch (error) {
    if (error instanceof ToolResultError) throw error;
    throw new ToolResultError(`The tool's result is not JSON: ${(error as Error).message}`);
  }
  if (text === undefined) throw new ToolResultError("The tool's result is not JSON.");
  return text;
}
