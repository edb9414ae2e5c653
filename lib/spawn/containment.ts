/**
 * Keeping a backend and all its descendants contained: signalling the
 * whole tree instead of one process, and ending it when the host exits.
 *
 * Two ways, chosen at spawn (`spawnBridgeProcess`'s `supervise`):
 * - **supervised** (Linux, macOS): the child is the native supervisor
 *   (`crates/bridge-supervisor`), the backend its child in a process group
 *   of its own. SIGTERM to the supervisor terminates the tree (TERM, grace,
 *   KILL); SIGUSR2 kills it at once; INT, HUP and USR1 go on to the
 *   backend's group. When the host dies, even by SIGKILL, its end of the
 *   control socket closes and the supervisor ends the tree.
 * - **grouped** (Unix without the supervisor): the backend is the child, in
 *   a process group of its own (`detached`), and signals go to the group.
 *   Nothing survives the host's exit hook, but a SIGKILLed host cannot
 *   clean up. Where the supervisor binary exists it still launches the
 *   backend (`--exec`: descriptors placed, then exec in the same process),
 *   so the child is the backend all the same.
 * - **plain** (Windows): the child alone (`child.kill`).
 * - **attached** (`attachAgentSession`): a process the application
 *   started; what its own `kill` does, nothing more.
 *
 * A warm start (`spawn/warm/`) is supervised: its backend is forked by the
 * prefork server, and adopted by a supervisor of its own, which is
 * signalled by pid (the host is not its parent).
 */
import type { ChildProcess } from "node:child_process";

export type ContainmentMode = "supervised" | "grouped" | "plain" | "attached";

/** How the backend's process came to be. */
export type StartMode =
  /** Spawned for this conversation (`spawnBridgeProcess`). */
  | "cold"
  /** Forked by a prefork server (a backend spec's `warm`, docs/prefork.md). */
  | "warm"
  /** Started by the application (`attachAgentSession`). */
  | "attached";

/** What the session reports about the backend's processes. */
export interface BackendProcess {
  /** How the backend is contained (see `spawnBridgeProcess`'s `supervise`). */
  mode: ContainmentMode;
  /** How it was started. */
  start: StartMode;
  /** The backend's pid (under the supervisor: known once it has started). */
  pid: number | undefined;
  /** The backend's process group, signalled as a whole (Unix). */
  processGroup: number | undefined;
  /** The supervisor's pid, when there is one (it is `child.pid`). */
  supervisorPid: number | undefined;
}

/** What containment needs of the child it signals (a `ChildProcess`, or a warm start's supervisor). */
export type ContainedChild = Pick<ChildProcess, "pid" | "exitCode" | "signalCode" | "kill">;

export class Containment {
  /** The backend's pid once known (supervised: from the control socket). */
  backendPid: number | undefined;
  private readonly nodeKill: ChildProcess["kill"];

  constructor(
    private readonly child: ContainedChild,
    readonly mode: ContainmentMode,
    readonly start: StartMode = mode === "attached" ? "attached" : "cold",
  ) {
    this.nodeKill = child.kill.bind(child);
    if (mode !== "supervised") this.backendPid = child.pid;
  }

  get info(): BackendProcess {
    return {
      mode: this.mode,
      start: this.start,
      pid: this.backendPid,
      processGroup: this.mode === "plain" ? undefined : this.backendPid,
      supervisorPid: this.mode === "supervised" ? this.child.pid : undefined,
    };
  }

  private get exited(): boolean {
    return this.child.exitCode !== null || this.child.signalCode !== null;
  }

  /**
   * What `child.kill(signal)` does for a contained backend: the signal
   * reaches the whole tree. SIGKILL kills it at once; SIGTERM asks it to
   * exit, and what ignores that is killed after the grace.
   */
  signal(signal: NodeJS.Signals | number = "SIGTERM"): boolean {
    if (this.exited) return false;
    const kill = signal === "SIGKILL" || signal === 9;
    switch (this.mode) {
      case "supervised":
        if (kill) {
          signalGroup(this.backendPid, "SIGKILL");
          return this.nodeKill("SIGUSR2");
        }
        return this.nodeKill(signal);
      case "grouped":
        return signalGroup(this.backendPid, signal) || this.nodeKill(signal);
      case "plain":
      case "attached":
        return this.nodeKill(signal);
    }
  }

  /** The host is exiting: everything goes now, synchronously. */
  killNow(): void {
    if (this.mode === "supervised") {
      // The backend's group now; the supervisor ends what left it (it also
      // sees its control socket close when this process is gone).
      signalGroup(this.backendPid, "SIGKILL");
      if (!this.exited) this.nodeKill("SIGUSR2");
      return;
    }
    if (!signalGroup(this.backendPid, "SIGKILL") && !this.exited) this.nodeKill("SIGKILL");
  }

  /**
   * A grouped backend has exited: what it left in its group is asked to
   * exit, then killed after `graceMs` (a timer that does not keep the host
   * alive). Supervised backends have this done by the supervisor.
   */
  endLeftovers(graceMs: number, done: () => void): void {
    if (this.mode !== "grouped" || !signalGroup(this.backendPid, "SIGTERM")) return done();
    const timer = setTimeout(() => {
      signalGroup(this.backendPid, "SIGKILL");
      done();
    }, graceMs);
    timer.unref();
  }
}

/** Signals process group `pgid`; `false` when there is none (or none left). */
function signalGroup(pgid: number | undefined, signal: NodeJS.Signals | number): boolean {
  if (pgid === undefined || process.platform === "win32") return false;
  try {
    process.kill(-pgid, signal);
    return true;
  } catch {
    return false;
  }
}

// ---- no orphans: the host's exit hook ---------------------------------------

/** What the exit hook ends: a contained backend, or an attached process (its `kill`). */
export interface HostExitTarget {
  killNow(): void;
}

const contained = new Set<HostExitTarget>();

function killContained(): void {
  for (const containment of contained) {
    try {
      containment.killNow();
    } catch {
      // Already gone.
    }
  }
}

/** Kills the backend's tree if the host exits first; one shared `exit` listener for all. */
export function guardAgainstOrphan(containment: HostExitTarget): () => void {
  if (contained.size === 0) process.on("exit", killContained);
  contained.add(containment);
  return () => {
    if (!contained.delete(containment)) return;
    if (contained.size === 0) process.off("exit", killContained);
  };
}
