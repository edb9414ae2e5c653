/**
 * The scripted backend's side of the host channel (docs/host-channel.md):
 * what the Python module does for a real agent, in a few lines of Node, so
 * that an application's tests can script calls of its own tools without
 * Python. Opened from `AGENTLANE_HOST_CHANNEL_FD` when the host gave one.
 */
import { Socket } from "node:net";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** The host's reply to a request. */
export type HostReply = { type: "result"; value: Json } | { type: "error"; error: { kind: string; message: string } };

export class HostChannelClient {
  private readonly pending = new Map<string, (reply: HostReply) => void>();
  private next = 0;
  private buffered = "";

  private constructor(private readonly socket: Socket) {
    socket.setEncoding("utf8");
    socket.on("data", (chunk: string) => this.read(chunk));
    socket.on("error", () => this.lost());
    socket.on("close", () => this.lost());
    this.send({ type: "hello", version: "1.0", package: "agentlane-process-bridge-native-testing", package_version: "0" });
  }

  /** The channel the host gave (`AGENTLANE_HOST_CHANNEL_FD`), or `undefined`. */
  static open(): HostChannelClient | undefined {
    const fd = Number(process.env.AGENTLANE_HOST_CHANNEL_FD);
    if (!Number.isInteger(fd) || fd < 0) return undefined;
    const socket = new Socket({ fd, readable: true, writable: true });
    return new HostChannelClient(socket);
  }

  /** Sends a request (`type` and `id` first, as the module does) and waits for its reply; `id` lets it be cancelled. */
  request(type: string, fields: { [key: string]: Json } = {}): { id: string; reply: Promise<HostReply> } {
    const id = String(++this.next);
    const reply = new Promise<HostReply>((resolve) => this.pending.set(id, resolve));
    this.send({ type, id, ...fields });
    return { id, reply };
  }

  /** Gives a request up (the run was cancelled): the host aborts its handler. */
  cancel(id: string): void {
    if (!this.pending.delete(id)) return;
    this.send({ type: "cancel", id });
  }

  private send(message: { [key: string]: Json }): void {
    if (!this.socket.destroyed) this.socket.write(`${JSON.stringify(message)}\n`);
  }

  private read(chunk: string): void {
    this.buffered += chunk;
    for (let end = this.buffered.indexOf("\n"); end >= 0; end = this.buffered.indexOf("\n")) {
      const line = this.buffered.slice(0, end);
      this.buffered = this.buffered.slice(end + 1);
      try {
        const reply = JSON.parse(line) as HostReply & { id: string };
        const resolve = this.pending.get(reply.id);
        this.pending.delete(reply.id);
        resolve?.(reply);
      } catch {
        process.stderr.write(`testing backend: host channel line is not JSON: ${line.slice(0, 200)}\n`);
      }
    }
  }

  private lost(): void {
    for (const resolve of this.pending.values()) resolve({ type: "error", error: { kind: "channel-lost", message: "The host channel was lost." } });
    this.pending.clear();
  }
}
