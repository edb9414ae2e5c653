/**
 * Where a session is in its life (docs/protocol.md §9.5.4 startup and teardown),
 * as one value instead of a set of flags.
 *
 * ```text
 * starting ──ready──▶ open ──close()──▶ closing ──exit──▶ closed
 *    │  │               │ (backend's `shutdown` event: still open, exits as "shutdown")
 *    │  └─bad line─▶ start-failing ──exit──▶ closed   (createAgentSession rejects)
 *    └─timeout, abort, spawn error, bad ready─▶ start-failed ──exit──▶ closed
 *                   any phase ──protocol error, send failure, exit──▶ closed
 * ```
 */
import type { SessionClose } from "./types";

export type Phase =
  /** Spawned; waiting for `ready`. */
  | { name: "starting" }
  /** A stdout line failed to decode before `ready`: startup fails when the exit is seen. */
  | { name: "start-failing" }
  /** `createAgentSession` has rejected; the child is being killed. */
  | { name: "start-failed" }
  /** Ready. `backendShuttingDown` once the backend announced `shutdown`. */
  | { name: "open"; backendShuttingDown: boolean }
  /** `close()` sent `shutdown`; waiting for the exit. */
  | { name: "closing" }
  /** Over, for the reason in `close`; `wasOpen` if it had been ready. */
  | { name: "closed"; close: SessionClose; wasOpen: boolean };

export class Lifecycle {
  phase: Phase = { name: "starting" };

  /** Events and decode errors are processed only while starting, open or closing. */
  get listening(): boolean {
    const name = this.phase.name;
    return name === "starting" || name === "open" || name === "closing";
  }

  /** `createAgentSession` has not settled yet. */
  get startPending(): boolean {
    return this.phase.name === "starting" || this.phase.name === "start-failing";
  }

  get ready(): boolean {
    return this.phase.name === "open" || this.phase.name === "closing";
  }

  /** The close info once closed. */
  get closed(): SessionClose | undefined {
    return this.phase.name === "closed" ? this.phase.close : undefined;
  }

  /** The reason an exit now closes the session with. */
  exitReason(): "shutdown" | "exit" {
    const phase = this.phase;
    return phase.name === "closing" || (phase.name === "open" && phase.backendShuttingDown) ? "shutdown" : "exit";
  }
}
