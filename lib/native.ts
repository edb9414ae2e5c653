/**
 * The raw N-API binding, loaded once through the napi-rs generated loader,
 * with the decode error class registered before anything can decode.
 */
import { BridgeDecodeError } from "./errors";

/** Reads one output stream of a backend off the JavaScript thread (src/stream.rs). */
export interface NativeStreamReader {
  openPipe(): number;
  closePipeWriter(): void;
  push(chunk: Buffer): number;
  queuedBytes(): number;
  end(): void;
  dispose(): void;
}

/** Arguments of a reader's batch callback, see `StreamReader` in `index.d.ts`. */
export type BatchCallback = (
  lines: string[],
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
      `reinstall without --no-optional/--omit=optional, or build from source with a Rust toolchain: \`npm run build\`. ` +
      `Loader error: ${cause instanceof Error ? cause.message : String(cause)}`;
    throw new Error(message, { cause });
  }
}

export const native: NativeBinding = load();
native.registerDecodeErrorClass(BridgeDecodeError as unknown as new (message: string, fields: string[]) => unknown);
