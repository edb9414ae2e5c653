/**
 * A session over a process the application already has
 * (`attachAgentSession`): a `ChildProcess` it started its own way (`docker
 * exec -i`, `ssh`, a sandbox launcher), an in-memory stand-in in a test, or
 * any object with the same shape over a transport of its own.
 *
 * The object's stdout and stderr are read through `wireBridgeProcess`'s
 * path: each chunk framed and judged in one native call, its lines
 * delivered before the chunk's `data` handling returns. Its exit is
 * tracked as a spawned backend's is (`spawn/exit.ts`), and containment is
 * exactly what the object offers: its `kill`. The session never claims the
 * process tree of an attached process.
 */
import { EventEmitter } from "node:events";
import type { Readable } from "node:stream";
import type { BridgeChildLike } from "../channel";
import { guardAgainstOrphan, type BackendProcess } from "../spawn/containment";
import { DEFAULT_EXIT_DRAIN_MS } from "../spawn/start-plan";
import { ExitTracker } from "../spawn/exit";
import type { FlowGate } from "../stream/flow";
import { wireAttached, type LineReaderOptions } from "../wiring";
import type { OpenBackend } from "./backend";

/** What `attachAgentSession` needs from a process (a `ChildProcess` has all of it). */
export interface AgentProcessLike {
  /** Where commands are written. */
  stdin: (NonNullable<BridgeChildLike["stdin"]> & { end?: () => unknown }) | null;
  /** The backend's events. */
  stdout: Readable | null;
  /** Diagnostics; optional. */
  stderr?: Readable | null;
  pid?: number;
  /** Already set when the process has exited before it was attached. */
  exitCode?: number | null;
  signalCode?: string | null;
  /** How the session ends the process when it must (SIGTERM, then SIGKILL). Without it, it lets go (see the README). */
  kill?(signal?: NodeJS.Signals | number): boolean;
  on(event: "exit" | "close", listener: (code: number | null, signal: NodeJS.Signals | null) => void): unknown;
  on(event: "error", listener: (error: Error) => void): unknown;
}

/** Options of an attached session's process side. */
export interface AttachOptions extends LineReaderOptions {
  /** After the process has exited, how long its streams may stay open before the session lets go of them (default 1000 ms). */
  exitDrainMs?: number;
  /** SIGKILL the process (its `kill`) if the host exits first (default `true`). */
  killOnHostExit?: boolean;
}

/** Why an object cannot be attached, or `undefined`. */
export function notAttachable(child: unknown): string | undefined {
  const candidate = child as Partial<AgentProcessLike> | null;
  if (candidate === null || typeof candidate !== "object") return "attachAgentSession needs a process-like object (a ChildProcess, or an object with stdin, stdout and exit/close/error events).";
  if (typeof candidate.on !== "function") return "The attached process has no on() for its exit, close and error events.";
  if (!candidate.stdin || typeof candidate.stdin.write !== "function") return "The attached process has no writable stdin.";
  if (!candidate.stdout || typeof (candidate.stdout as Readable).on !== "function") return "The attached process has no readable stdout.";
  for (const name of ["stdout", "stderr"] as const) {
    // Its chunks would be objects, and the session reads bytes (or strings).
    if ((candidate[name] as Readable | null | undefined)?.readableObjectMode === true) {
      return `The attached process's ${name} is an object-mode stream: the session reads bytes (or strings) from it.`;
    }
  }
  if (candidate.kill !== undefined && typeof candidate.kill !== "function") return "The attached process's kill is not a function.";
  return undefined;
}

/**
 * What the command channel sees of an attached process: its stdin, its
 * exit as it was reported, and its `kill`. A process without `kill` that
 * the session must end is let go of at the last escalation (SIGKILL): its
 * stdin is ended and the session closes as if it had exited (code and
 * signal `null`).
 */
class AttachedChild extends EventEmitter implements BridgeChildLike {
  exitCode: number | null;
  signalCode: string | null;
  readonly stdin: AgentProcessLike["stdin"];
  /** Exited, or let go of. */
  private gone = false;

  constructor(
    private readonly source: AgentProcessLike,
    private readonly letGo: () => void,
  ) {
    super();
    this.stdin = source.stdin;
    this.exitCode = exitCodeOf(source.exitCode);
    this.signalCode = signalOf(source.signalCode);
    this.gone = this.exitCode !== null || this.signalCode !== null;
  }

  /** The process exited (or, with both `null`, was let go of). */
  exited(code: number | null, signal: string | null): void {
    if (this.gone) return;
    this.gone = true;
    this.exitCode = code;
    this.signalCode = signal;
    this.emit("exit", code, signal);
  }

  kill(signal: NodeJS.Signals | number = "SIGTERM"): boolean {
    if (this.gone) return false;
    if (typeof this.source.kill === "function") {
      try {
        return this.source.kill(signal) !== false;
      } catch {
        return false;
      }
    }
    if (signal === "SIGKILL" || signal === 9) this.letGo();
    return false;
  }
}

/**
 * An exit code as `onClose` reports it: a number, or `null`. Not every
 * process-like object's `exit` or `close` carries one (a `net.Socket`'s
 * `close` gives `hadError`, a boolean).
 */
function exitCodeOf(value: unknown): number | null {
  return typeof value === "number" ? value : null;
}

/** A signal's name, or `null` (see `exitCodeOf`). */
function signalOf(value: unknown): string | null {
  return typeof value === "string" ? value : null;
}

/** Attaches the session's callbacks to `source` (see the module's notes). */
export function attachedBackend(source: AgentProcessLike, options: AttachOptions, flow: FlowGate): OpenBackend {
  return (callbacks) => {
    const exit = new ExitTracker(options.exitDrainMs ?? DEFAULT_EXIT_DRAIN_MS, callbacks);
    const child: AttachedChild = new AttachedChild(source, () => {
      try {
        source.stdin?.end?.();
      } catch {
        // Already closed.
      }
      child.exited(null, null);
      exit.closed(null, null);
    });
    exit.watch(child);
    const stdoutEnded = exit.streamEnded("stdout");
    const stderrEnded = exit.streamEnded("stderr");
    const streams = { stdout: source.stdout, stderr: source.stderr ?? null };
    exit.add(wireAttached(streams, callbacks, options, { flow, ended: (kind, failure) => (kind === "events" ? stdoutEnded(failure) : stderrEnded(failure)) }));
    if (!streams.stderr) stderrEnded(null);
    const release = options.killOnHostExit ?? true ? guardAgainstOrphan({ killNow: () => child.kill("SIGKILL") }) : () => {};
    source.on("error", (error: Error) => callbacks.onSpawnError?.(error));
    source.on("exit", (code: unknown, signal: unknown) => {
      release();
      child.exited(exitCodeOf(code), signalOf(signal));
      exit.exited(exitCodeOf(code), signalOf(signal));
    });
    // `close` follows the streams' ends (as a ChildProcess's does): done.
    source.on("close", (code: unknown, signal: unknown) => {
      release();
      child.exited(exitCodeOf(code), signalOf(signal));
      exit.closed(exitCodeOf(code), signalOf(signal));
    });
    const info: BackendProcess = { mode: "attached", start: "attached", pid: source.pid, processGroup: undefined, supervisorPid: undefined };
    callbacks.onStarted?.(info);
    // Exited before it was attached: no event will come.
    if (child.exitCode !== null || child.signalCode !== null) queueMicrotask(() => exit.closed(child.exitCode, child.signalCode));
    return child;
  };
}
