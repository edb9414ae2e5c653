/**
 * The `tools` option checked and turned into what the host channel's core
 * takes (name, description, the input schema as JSON text, a deadline),
 * before anything starts. A zod 4 schema is converted with zod's own
 * `toJSONSchema` found on the schema object (`_zod`), input side (the
 * output side marks fields with defaults as required): this package never
 * imports zod.
 */
import { InvalidOptionError } from "../errors";
import type { HostChannelConfig } from "../../index";
import type { HostTool, HostTools } from "./types";

/** The default deadline of a tool call, when neither the tool nor the session sets one. */
export const DEFAULT_TOOL_TIMEOUT_MS = 60_000;
/** The default deadline of a store operation. */
export const DEFAULT_STORE_TIMEOUT_MS = 30_000;

/** A tool name agentlane and the model providers take (OpenAI: 1–64 of these). */
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Throws `TypeError`/`InvalidOptionError` for the first tool that cannot be served. */
export function declareTools(tools: unknown, toolTimeoutMs: number | undefined): HostChannelConfig["tools"] {
  if (tools === undefined) return [];
  if (tools === null || typeof tools !== "object" || Array.isArray(tools)) {
    throw new TypeError("The tools option must be an object of tools by name: { lookup: { description, inputSchema, handler } }.");
  }
  return Object.entries(tools as HostTools).map(([name, tool]) => {
    if (!TOOL_NAME.test(name)) throw new TypeError(`Tool name ${JSON.stringify(name)} must be 1 to 64 letters, digits, _ or -.`);
    if (tool === null || typeof tool !== "object") throw new TypeError(`Tool ${name} must be an object { description, inputSchema, handler }.`);
    const { description, handler, timeoutMs, needsApproval } = tool as Partial<HostTool>;
    if (typeof description !== "string") throw new TypeError(`Tool ${name}'s description must be a string.`);
    if (typeof handler !== "function") throw new TypeError(`Tool ${name}'s handler must be a function.`);
    if (needsApproval !== undefined && typeof needsApproval !== "boolean") throw new TypeError(`Tool ${name}'s needsApproval must be a boolean.`);
    const timeout = timeoutMs ?? toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS;
    if (typeof timeout !== "number" || !Number.isFinite(timeout) || timeout < 0) {
      throw new InvalidOptionError(`Tool ${name}'s timeoutMs must be a finite number of milliseconds, at least 0.`, `tools.${name}.timeoutMs`);
    }
    return { name, description, inputSchema: schemaText(name, (tool as HostTool).inputSchema), timeoutMs: timeout === 0 ? undefined : timeout };
  });
}

/** A tool's input schema as JSON text: a JSON Schema object as given, a zod 4 schema converted. */
function schemaText(name: string, schema: unknown): string {
  if (schema === null || typeof schema !== "object" || Array.isArray(schema)) {
    throw new TypeError(`Tool ${name}'s inputSchema must be a JSON Schema object or a zod 4 schema.`);
  }
  let json: unknown = schema;
  if ("_zod" in schema) {
    const toJSONSchema = zodConverter(schema);
    if (toJSONSchema === undefined) {
      throw new TypeError(`Tool ${name}'s inputSchema is a zod schema, but not zod 4's (no toJSONSchema): pass zod 4 or a JSON Schema.`);
    }
    try {
      json = toJSONSchema(schema, { io: "input" });
    } catch (error) {
      throw new TypeError(`Tool ${name}'s zod schema cannot be expressed as JSON Schema: ${(error as Error).message}`, { cause: error });
    }
  }
  try {
    return JSON.stringify(json);
  } catch (error) {
    throw new TypeError(`Tool ${name}'s inputSchema is not JSON: ${(error as Error).message}`, { cause: error });
  }
}

type ToJSONSchema = (schema: unknown, options: { io: "input" }) => unknown;

/**
 * zod 4's converter: a classic schema (`z.object(…)`) has its own
 * `toJSONSchema`; a zod/mini one has not, and then zod's module is loaded
 * (the application has it: it made the schema). Only ever reached with a
 * zod schema in hand.
 */
function zodConverter(schema: object): ToJSONSchema | undefined {
  const own = (schema as { toJSONSchema?: unknown }).toJSONSchema;
  if (typeof own === "function") return (s, options) => (own as (o: object) => unknown).call(s, options);
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const zod = require("zod") as { toJSONSchema?: ToJSONSchema };
    return typeof zod.toJSONSchema === "function" ? zod.toJSONSchema : undefined;
  } catch {
    return undefined;
  }
}
