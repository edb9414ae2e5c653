/**
 * The raw N-API binding, loaded once through the napi-rs generated loader,
 * with the decode error factory registered before anything can decode.
 *
 * Its type is the generated `index.d.ts` (from the Rust doc comments and
 * signatures), so the TypeScript layer keeps no hand-written copy of it.
 */
import { join } from "node:path";
import type * as Binding from "../index";
import { BridgeDecodeError, deniedPermission, RuntimePermissionError, type BridgeDecodeErrorCode } from "./errors";

/** The functions and classes the Rust binding exports. */
export type NativeBinding = typeof Binding;
/** Reads one output stream of a backend off the JavaScript thread (src/stream.rs). */
export type NativeStreamReader = Binding.StreamReader;

function load(): NativeBinding {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require("../index.js") as NativeBinding;
  } catch (cause) {
    const permission = deniedPermission(cause);
    if (permission !== undefined) throw new RuntimePermissionError(permission, "to load its native addon", { cause });
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
native.registerDecodeErrorFactory(
  (message, fields, code) => new BridgeDecodeError(message, fields, { code: code as BridgeDecodeErrorCode }),
);
