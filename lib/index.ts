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
