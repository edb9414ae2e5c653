/**
 * The raw N-API binding, loaded once through the napi-rs generated loader,
 * with the decode error class registered before anything can decode.
 */
import { BridgeDecodeError } from "./errors";

/** The functions the Rust binding exports (see `index.d.ts`). */
export interface NativeBinding {
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
