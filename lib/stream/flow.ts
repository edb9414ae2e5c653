/**
 * Flow control between a consumer and the native readers: while the gate
 * is closed, a line reader does not acknowledge its batches, so the native
 * reader stops (at most the two batches in flight still arrive), the pipe
 * fills, and the backend waits in `write(2)`. The stream of a session's run
 * closes the gate while its consumer does not pull.
 */
export class FlowGate {
  private closed = false;
  private waiting: (() => void)[] = [];

  /** Stops the readers' acknowledgements. */
  close(): void {
    this.closed = true;
  }

  /** Lets them go on; what waited goes now. */
  open(): void {
    if (!this.closed) return;
    this.closed = false;
    for (const go of this.waiting.splice(0)) go();
  }

  /** Whether the consumer is behind (readers hold back). */
  get isClosed(): boolean {
    return this.closed;
  }

  /** Runs `go` now, or when the gate opens. */
  pass(go: () => void): void {
    if (this.closed) this.waiting.push(go);
    else go();
  }
}
