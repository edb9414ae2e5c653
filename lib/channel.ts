/**
 * The command channel (docs/protocol.md §9.3): writing commands to the backend's
 * stdin, reporting write failures, and cooperative shutdown with SIGKILL
 * escalation. Beyond the reference, what waits in the stdin buffer is
 * bounded: a backend that stops reading its stdin cannot make the host
 * buffer commands without limit.
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
    /** Bytes written and not yet taken by the pipe (Node's `Writable`). */
    writableLength?: number;
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
  /**
   * When set, the grace period ends with SIGTERM, and SIGKILL follows this
   * many milliseconds later if the child is still running. Unset (the
   * reference's behaviour), SIGKILL comes at the end of the grace period.
   */
  termGraceMs?: number;
  /**
   * A command is not written while more than this many bytes wait in the
   * stdin buffer (the backend is not reading): `send` returns `false`,
   * `trySend` says `"full"` (default 16 MiB).
   */
  maxBufferedBytes?: number;
  scheduler?: BridgeScheduler;
  /** stdin failures before shutdown began. */
  onSendError?: (message: string) => void;
  /** Called once when shutdown handling is over. */
  onFinalize?: () => void;
}

/** What became of a command: written, refused because stdin is closed, or because its buffer is full. */
export type SendOutcome = "sent" | "closed" | "full";

/** The default bound of the stdin buffer. */
export const DEFAULT_MAX_BUFFERED_BYTES = 16 * 1024 * 1024;

export interface BridgeChannel {
  /** Writes one command; `false` (and maybe `onSendError`) when it could not. */
  send(command: BridgeCommand): boolean;
  /** Like `send`, saying why a command was not written. */
  trySend(command: BridgeCommand): SendOutcome;
  /** Bytes waiting in the stdin buffer: how far the backend is behind in reading. */
  bufferedBytes(): number;
  /** Sends `shutdown`, then SIGKILL after the grace period (or SIGTERM, then SIGKILL, with `termGraceMs`); idempotent. */
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
  const termGraceMs = options.termGraceMs;
  let termTimer: unknown;
  let killTimer: unknown;
  let finalizeTimer: unknown;

  child.stdin?.on("error", (error) => {
    if (!shuttingDown) options.onSendError?.(error.message);
  });

  const maxBufferedBytes = options.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES;
  const bufferedBytes = () => child.stdin?.writableLength ?? 0;

  const write = (command: BridgeCommand): SendOutcome => {
    const stdin = child.stdin;
    if (!stdin || stdin.destroyed || !stdin.writable) {
      if (!shuttingDown) options.onSendError?.(`bridge stdin is closed (command: ${command.type})`);
      return "closed";
    }
    const frame = encodeBridgeCommand(command);
    // `shutdown` always goes: it is how a stuck backend is ended.
    if (command.type !== "shutdown" && bufferedBytes() > maxBufferedBytes) return "full";
    try {
      stdin.write(frame); // `false` only reports backpressure: still sent
      return "sent";
    } catch (error) {
      if (!shuttingDown) {
        options.onSendError?.(`bridge stdin write failed: ${error instanceof Error ? error.message : String(error)}`);
      }
      return "closed";
    }
  };

  const finalize = () => {
    if (finalized) return;
    finalized = true;
    if (termTimer !== undefined) scheduler.clear(termTimer);
    if (killTimer !== undefined) scheduler.clear(killTimer);
    if (finalizeTimer !== undefined) scheduler.clear(finalizeTimer);
    options.onFinalize?.();
  };

  return {
    send(command) {
      if (shuttingDown) return false;
      return write(command) === "sent";
    },
    trySend(command) {
      if (shuttingDown) return "closed";
      return write(command);
    },
    bufferedBytes,
    shutdown() {
      if (shuttingDown) return;
      shuttingDown = true;
      if (child.exitCode !== null || child.signalCode !== null) {
        finalize();
        return;
      }
      child.once("exit", finalize);
      if (write({ type: "shutdown" }) !== "sent") child.kill();
      const running = () => child.exitCode === null && child.signalCode === null;
      if (termGraceMs !== undefined) {
        termTimer = scheduler.set(() => {
          if (running()) child.kill("SIGTERM");
        }, graceMs);
      }
      const killAt = graceMs + (termGraceMs ?? 0);
      killTimer = scheduler.set(() => {
        if (running()) child.kill("SIGKILL");
      }, killAt);
      finalizeTimer = scheduler.set(finalize, killAt + 250);
    },
    isShuttingDown() {
      return shuttingDown;
    },
  };
}
