// Types of bridge.mjs.
import type { ChildProcess } from "node:child_process";
import type { Client, Transport } from "@connectrpc/connect";
import type { DescService } from "@bufbuild/protobuf";

/** The `agentlane-bridge ready {json}` line. */
export interface DiscoveryInfo {
  schema: 1;
  api: "agentlane.bridge.v1";
  bridgeVersion: string;
  url: string;
  host: string;
  port: number;
  pid: number;
  tokenFile: string;
  /** The default conversation's backend; null with `--no-default-conversation`. */
  backend: { pid: number; version: string; package: string; protocolVersion: string } | null;
  capabilities: string[];
  conversations: {
    default: string | null;
    max: number;
    idleTimeoutMs: number | null;
    startMode: "cold" | "warm";
    /** Cold starts at once (null: no limit). */
    maxConcurrentStarts: number | null;
  };
  [key: string]: unknown;
}

export interface TransportOptions {
  /** JSON instead of binary proto. */
  json?: boolean;
  /** The bearer token to send; `null` sends none. Default: the bridge's. */
  token?: string | null;
}

export interface Bridge {
  info: DiscoveryInfo;
  token: string;
  child: ChildProcess;
  /** Every stdout line (the discovery line first). */
  stdout: string[];
  /** Every stderr line (the backend's diagnostics and the bridge's own). */
  stderr: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  transport(options?: TransportOptions): Transport;
  client<S extends DescService>(service: S, options?: TransportOptions): Client<S>;
  stop(graceMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface StartOptions {
  /** The agentlane-bridge binary (default: $AGENTLANE_BRIDGE or agentlane-bridge on PATH). */
  bridge?: string;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  timeoutMs?: number;
}

export declare function startBridge(args: string[], options?: StartOptions): Promise<Bridge>;
