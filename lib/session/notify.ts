/**
 * Calling the application back (docs/protocol.md §9.5.1): every callback is
 * guarded, so an exception in one becomes a `handler-error` diagnostic and
 * processing goes on; diagnostics go to `onDiagnostic`, or to
 * `console.error` with the prefix `[session]`.
 */
import type { SessionDiagnostic } from "./types";

export class Notifier {
  constructor(private readonly onDiagnostic: ((diagnostic: SessionDiagnostic) => void) | undefined) {}

  diagnostic(diagnostic: SessionDiagnostic): void {
    const sink = this.onDiagnostic ?? defaultDiagnostic;
    try {
      sink(diagnostic);
    } catch (error) {
      console.error("[session] onDiagnostic threw:", error);
    }
  }

  /**
   * Calls an application callback, if given, with `arg` (and `this` the
   * object it was given in, as a method call would); an exception becomes a
   * diagnostic naming it. No closure per call: this runs for every event.
   */
  guard<A>(handler: string, callback: ((arg: A) => void) | undefined, arg: A, owner?: object): void {
    if (callback === undefined) return;
    try {
      callback.call(owner, arg);
    } catch (error) {
      this.diagnostic({ kind: "handler-error", handler, error });
    }
  }
}

function defaultDiagnostic(diagnostic: SessionDiagnostic): void {
  console.error(`[session] ${diagnostic.kind}: ${describe(diagnostic)}`);
}

function describe(diagnostic: SessionDiagnostic): string {
  switch (diagnostic.kind) {
    case "protocol":
      return `${diagnostic.error.message}${diagnostic.line ? ` (line: ${diagnostic.line.slice(0, 200)})` : ""}`;
    case "handler-error":
      return `${diagnostic.handler} threw: ${diagnostic.error instanceof Error ? diagnostic.error.message : String(diagnostic.error)}`;
    case "stderr":
      return diagnostic.line;
    case "read-failed":
      return diagnostic.error.message;
    case "stray-line":
      return `skipped a stdout line that is not a bridge event: ${diagnostic.head}`;
    case "run-timeout":
      return `the run lasted ${diagnostic.timeoutMs} ms: cancelling it`;
    case "stalled":
      return `no event for ${diagnostic.idleMs} ms during the run`;
    case "backpressure":
      return `${diagnostic.command} not sent: ${diagnostic.bufferedBytes} bytes wait in the backend's stdin`;
    default:
      return diagnostic.message;
  }
}
