/**
 * The supervisor's control socket, host side: the reports it writes
 * (`started <pid>`, `failed <ERRNO> <number> <message>`, and last the
 * backend's exit; see `crates/bridge-supervisor`) turned into calls, and
 * its end of file (the supervisor is gone) reported once. The host's end closing is what tells
 * the supervisor that the host is gone.
 */
import { createReadStream } from "node:fs";
import { Socket } from "node:net";
import { parseReport, type SupervisorReport } from "./supervisor";

export interface ControlHandlers {
  /** `supervisorPid`: an adopting supervisor's own (a warm start: the host is not its parent). */
  started(pid: number, supervisorPid: number | undefined): void;
  failed(report: Extract<SupervisorReport, { kind: "failed" }>): void;
  /** How the backend ended (a warm start's only way to know: a spawned supervisor's own exit says it too). */
  exited?(code: number | null, signal: number | null): void;
  /** The supervisor has closed its end: no report comes any more. */
  ended(): void;
}

/**
 * Reads the control socket on the host's end `fd` (which it then owns).
 * Unreferenced while the supervisor runs (its process handle keeps the
 * loop alive, and `child.unref()` must let the host go); `ref()` once the
 * supervisor has exited, until its end of file is read: an unreferenced
 * socket with its end of file still unread let a host with nothing else
 * to do exit silently before `onExit` (seen once in 1,500 spawns).
 */
export function readControl(fd: number, handlers: ControlHandlers): ControlStream {
  const socket = openControl(fd);
  let buffered = "";
  socket.on("data", (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf("\n"); end >= 0; end = buffered.indexOf("\n")) {
      const report = parseReport(buffered.slice(0, end));
      buffered = buffered.slice(end + 1);
      if (report?.kind === "started") handlers.started(report.pid, report.supervisorPid);
      else if (report?.kind === "failed") handlers.failed(report);
      else if (report?.kind === "exited") handlers.exited?.(report.code, null);
      else if (report?.kind === "signaled") handlers.exited?.(null, report.signal);
    }
  });
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    handlers.ended();
  };
  socket.once("end", end);
  socket.once("close", end);
  socket.on("error", () => {});
  return socket;
}

/** The host's end of the control socket, as read: its one handle to keep the loop alive with. */
export interface ControlStream {
  on(event: "data", listener: (chunk: string) => void): unknown;
  on(event: "error", listener: (error: Error) => void): unknown;
  once(event: "end" | "close", listener: () => void): unknown;
  ref(): unknown;
  /** Closes the host's end (the supervisor then ends the backend). */
  destroy(): unknown;
}

/**
 * A socket on `fd`, unreferenced. Bun (1.4) reads nothing from a
 * `net.Socket` made on a descriptor (no data, no end; writing works), so
 * there it is read as a file stream, which cannot be unreferenced: under
 * Bun a host waits for a running supervised backend to end even after
 * `child.unref()` (README "Runtimes").
 */
function openControl(fd: number): ControlStream {
  if (process.versions.bun !== undefined) {
    const stream = createReadStream("", { fd, encoding: "utf8" });
    return Object.assign(stream, { ref: () => stream });
  }
  const socket = new Socket({ fd, readable: true, writable: false });
  socket.unref();
  socket.setEncoding("utf8");
  return socket;
}

/** The error Node's `spawn` gives when a command cannot be started, from the supervisor's report. */
export function reportedSpawnError(command: string, args: string[], report: Extract<SupervisorReport, { kind: "failed" }>): NodeJS.ErrnoException {
  const error: NodeJS.ErrnoException & { spawnargs?: string[] } = new Error(`spawn ${command} ${report.code}`);
  error.errno = -report.errno;
  error.code = report.code;
  error.syscall = `spawn ${command}`;
  error.path = command;
  error.spawnargs = args;
  return error;
}
