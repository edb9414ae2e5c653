/**
 * The stdin of a warm backend, which may not exist yet (docs/prefork.md).
 */
import type { Socket } from "node:net";

/**
 * The stdin of a backend that may not exist yet: what is written before
 * it does waits here, in order, and goes to the real stream once there is
 * one (the warm socket, or a fallback's stdin). Only what the command
 * channel uses (`BridgeChildLike["stdin"]`).
 */
export class PendingStdin {
  private target: Socket | NodeJS.WritableStream | null = null;
  private readonly waiting: string[] = [];
  private waitingBytes = 0;
  private readonly errorListeners: ((error: Error) => void)[] = [];
  private closed = false;

  private get stream(): (Socket & { destroyed: boolean }) | null {
    return this.target as (Socket & { destroyed: boolean }) | null;
  }

  get destroyed(): boolean {
    return this.stream ? this.stream.destroyed : this.closed;
  }

  get writable(): boolean {
    return this.stream ? this.stream.writable : !this.closed;
  }

  get writableLength(): number {
    return this.stream ? this.stream.writableLength : this.waitingBytes;
  }

  write(chunk: string): boolean {
    if (this.stream) return this.stream.write(chunk);
    if (this.closed) throw new Error("write after end");
    this.waiting.push(chunk);
    this.waitingBytes += Buffer.byteLength(chunk);
    return true;
  }

  on(event: "error", listener: (error: Error) => void): this {
    this.errorListeners.push(listener);
    this.stream?.on(event, listener);
    return this;
  }

  end(): void {
    if (this.stream) this.stream.end();
    else this.closed = true;
  }

  destroy(): void {
    if (this.stream) this.stream.destroy();
    else this.closed = true;
    this.waiting.length = 0;
  }

  /**
   * The stream attached was a fork's that was given up (before its
   * `ready`: nothing was written to it yet); the next backend's comes.
   */
  detach(): void {
    this.target = null;
  }

  /** The backend's stdin exists: what waited goes first. */
  attach(stream: Socket | NodeJS.WritableStream | null): void {
    if (stream === null) return this.destroy();
    this.target = stream;
    for (const listener of this.errorListeners) stream.on("error", listener);
    for (const chunk of this.waiting.splice(0)) stream.write(chunk);
    this.waitingBytes = 0;
    if (this.closed) stream.end();
  }
}
