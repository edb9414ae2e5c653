/**
 * The command channel (docs/protocol.md §9.3): writing commands to the backend's
 * stdin, reporting write failures, and cooperative shutdown with SIGKILL
 * escalation.
 */
import { encodeBridgeCommand } from "./codec";
import type { BridgeCommand } from "./protocol";

/** What the channel needs from a child process. */
export interface BridgeChildLike {
  exitCode: number | null;
  signalCode: string | null;
  kill(signal?: NodeJS.Signals | number): boolean;
  once(event: "exit", listener: (...args: unknown[]) => void): unknown;
  stdin: {
    destroyed: boolean;
    writable: boolean;
    write(chunk: string): boolean;
    on(event: "error", listener: (error: Error) => void): unknown;
  } | null;
}

/** Injectable timers, for deterministic tests. */
export interface BridgeScheduler {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export interface BridgeChannelOptions {
  /** Time allowed for a cooperative exit after `shutdown` (default 1500 ms). */
  graceMs?: number;
  scheduler?: BridgeScheduler;
  /** stdin failures before shutdown began. */
  onSendError?: (message: string) => void;
  /** Called once when shutdown handling is over. */
  onFinalize?: () => void;
}

export interface BridgeChannel {
  /** Writes one command; `false` (and maybe `onSendError`) when it could not. */
  send(command: BridgeCommand): boolean;
  /** Sends `shutdown`, then SIGKILL after the grace period; idempotent. */
  shutdown(): void;
  isShuttingDown(): boolean;
}

const realTimers: BridgeScheduler = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * Creates the channel over a child's stdin. `send` encodes with
 * `encodeBridgeCommand`, so a command the backend would mishandle throws a
 * `TypeError` (a programming error, not a transport failure).
 */
export function createBridgeChannel(child: BridgeChildLike, options: BridgeChannelOptions = {}): BridgeChannel {
  const graceMs = options.graceMs ?? 1500;
  const scheduler = options.scheduler ?? realTimers;
  let shuttingDown = false;
  let finalized = false;
  let killTimer: unknown;
  let finalizeTimer: unknown;

  child.stdin?.on("error", (error) => {
    if (!shuttingDown) options.onSendError?.(error.message);
  });

  const write = (command: BridgeCommand): boolean => {
    const stdin = child.stdin;
    if (!stdin || stdin.destroyed || !stdin.writable) {
      if (!shuttingDown) options.onSendError?.(`bridge stdin is closed (command: ${command.type})`);
      return false;
    }
    const frame = encodeBridgeCommand(command);
    try {
      stdin.write(frame); // `false` only reports backpressure: still sent
      return true;
    } catch (error) {
      if (!shuttingDown) {
        options.onSendError?.(`bridge stdin write failed: ${error instanceof Error ? error.message : String(error)}`);
      }
      return false;
    }
  };

  const finalize = () => {
    if (finalized) return;
    finalized = true;
    if (killTimer !== undefined) scheduler.clear(killTimer);
    if (finalizeTimer !== undefined) scheduler.clear(finalizeTimer);
    options.onFinalize?.();
  };

  return {
    send(command) {
      if (shuttingDown) return false;
      return write(command);
    },
    shutdown() {
      if (shuttingDown) return;
      shuttingDown = true;
      if (child.exitCode !== null || child.signalCode !== null) {
        finalize();
        return;
      }
      child.once("exit", finalize);
      if (!write({ type: "shutdown" })) child.kill();
      killTimer = scheduler.set(() => {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      }, graceMs);
      finalizeTimer = scheduler.set(finalize, graceMs + 250);
    },
    isShuttingDown() {
      return shuttingDown;
    },
  };
}
