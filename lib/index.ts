/**
 * @agentlanejs/process-bridge-native: the public API (PROTOCOL.md §9).
 */
export { BridgeDecodeError } from "./errors";
export {
  decodeBridgeEventLine,
  encodeBridgeCommand,
  isKnownEventType,
  isKnownModelEvent,
  isNativeEvent,
  isSupportedProtocolVersion,
  tryDecodeBridgeEventLine,
} from "./codec";
export * from "./protocol";
export {
  wireBridgeProcess,
  type BridgeProcessCallbacks,
  type BridgeWiring,
  type LineReaderOptions,
} from "./wiring";
export {
  resolveBackendSpec,
  spawnBridgeProcess,
  type BackendSpec,
  type BridgeProcessOptions,
  type PythonBackendSpec,
} from "./process";
export {
  createBridgeChannel,
  type BridgeChannel,
  type BridgeChannelOptions,
  type BridgeChildLike,
  type BridgeScheduler,
} from "./channel";
