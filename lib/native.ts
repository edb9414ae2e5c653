/**
 * The raw N-API binding, loaded once through the napi-rs generated loader,
 * with the decode error class registered before anything can decode.
 */
import { join } from "node:path";
import { BridgeDecodeError } from "./errors";

/** Reads one output stream of a backend off the JavaScript thread (src/stream.rs). */
export interface NativeStreamReader {
  openPipe(): number;
  closePipeWriter(): void;
  push(chunk: Buffer): number;
  ack(): void;
  queuedBytes(): number;
  /** Reading or judging lines, or holding batches not yet delivered. */
  isWorking(): boolean;
  end(): void;
  dispose(): void;
}

/**
 * A reader's batch callback (src/stream.rs). `kinds` has one character per
 * part: `E` the JSON array text of consecutive valid events, `B` one large
 * valid event line, `I` one invalid line (its error at the same index of
 * `errors`), `T` one stderr line; and for a large event with large values
 * lifted out: `L` its skeleton, `X` the JSON of the lifted values' paths
 * (and chunk counts), then `S` per lifted string and `C` per chunk of each
 * lifted array.
 */
export type BatchCallback = (
  kinds: string,
  parts: string[],
  errors: (BridgeDecodeError | null)[] | null,
  done: boolean,
  failure: string | null,
) => void;

/** The functions the Rust binding exports (see `index.d.ts`). */
export interface NativeBinding {
  StreamReader: new (kind: "events" | "text", maxLineBytes: number, onBatch: BatchCallback) => NativeStreamReader;
  validateEventLine(line: string): number;
  validateEventValue(value: unknown): number;
  commandFrameProblem(frame: string): string | null;
  isSupportedProtocolVersion(value: string): boolean;
  protocolTables(): {
    protocolVersion: string;
    protocolMajor: number;
    eventTypes: string[];
    commandTypes: string[];
    nativeKinds: string[];
    modelKinds: string[];
  };
  registerDecodeErrorClass(errorClass: new (message: string, fields: string[]) => unknown): void;
}

function load(): NativeBinding {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require("../index.js") as NativeBinding;
  } catch (cause) {
    const platform = `${process.platform}-${process.arch}`;
    const message =
      `@agentlanejs/process-bridge-native has no native binary for this platform (${platform}, Node ${process.version}). ` +
      `Prebuilt binaries are published as optional dependencies named @agentlanejs/process-bridge-native-<platform>; ` +
      `reinstall without --no-optional/--omit=optional, or build from source with a Rust toolchain: ` +
      `\`node ${join(__dirname, "..", "scripts", "build-from-source.mjs")}\`. ` +
      `Loader error: ${cause instanceof Error ? cause.message : String(cause)}`;
    throw new Error(message, { cause });
  }
}

export const native: NativeBinding = load();
native.registerDecodeErrorClass(BridgeDecodeError as unknown as new (message: string, fields: string[]) => unknown);
