/**
 * A backend's stdio on Unix, every channel made here: stdout and stderr are
 * the native readers' socket pairs (`src/output_socket.rs`), stdin and the
 * supervisor's control channel socket pairs of the addon too. Node's
 * `spawn` only passes the child's ends on (`stdio` as descriptors), so
 * that whatever happens in it, the host holds exactly its own ends
 * afterwards: one per channel, four for a supervised backend, three
 * without the supervisor, one more for a declared host channel. Each
 * channel goes at its number of the launch layer's table (`channels.ts`).
 * (With `stdio: "pipe"`, a spawn that ran out of descriptors halfway left
 * Node's two host ends open for good.)
 */
import { Socket } from "node:net";
import { native } from "../native";
import type { FlowGate } from "../stream/flow";
import { createLineReader, type LineReader } from "../stream/line-reader";
import type { BridgeProcessCallbacks, LineReaderOptions } from "../wiring";
import { stdioByChannel } from "./channels";
import type { ExitTracker } from "./exit";

/** A socket pair's descriptors: the host's end and the child's. */
interface Pair {
  host: number;
  /** Until the child has it. */
  child: number | undefined;
}

function socketPair(): Pair {
  const [host, child] = native.socketPair();
  return { host, child };
}

/**
 * Closes one of the addon's descriptors, natively: Deno's `fs.closeSync`
 * refuses a descriptor Deno did not open (`EBADF`), which left the child's
 * ends open in the host there, so that the control socket never ended and
 * the host never exited.
 */
function closeQuietly(fd: number | undefined): void {
  if (fd === undefined) return;
  try {
    native.closeDescriptor(fd);
  } catch {
    // Already closed.
  }
}

export class UnixStdio {
  readonly stdout: LineReader;
  readonly stderr: LineReader;
  private stdin: Pair | undefined;
  private control: Pair | undefined;
  private host: Pair | undefined;
  private readonly descriptors: (number | "ignore")[];
  /** The child's ends by channel, for a fork request. */
  readonly childEnds: { stdin: number; stdout: number; stderr: number; control: number | undefined; host: number | undefined };

  /**
   * Makes every channel (the host channel when `hostChannel` declares it);
   * throws, leaving nothing behind, when one cannot be made.
   */
  constructor(
    callbacks: BridgeProcessCallbacks,
    options: LineReaderOptions & { flow?: FlowGate },
    exit: ExitTracker,
    supervised: boolean,
    hostChannel = false,
  ) {
    this.stdout = createLineReader("events", callbacks, options, exit.streamEnded("stdout"), options.flow);
    this.stderr = createLineReader("text", callbacks, options, exit.streamEnded("stderr"));
    exit.add(this.stdout);
    exit.add(this.stderr);
    try {
      const stdoutFd = this.stdout.reader.openSocket();
      const stderrFd = this.stderr.reader.openSocket();
      this.stdin = socketPair();
      if (supervised) this.control = socketPair();
      if (hostChannel) this.host = socketPair();
      this.childEnds = {
        stdin: this.stdin.child!,
        stdout: stdoutFd,
        stderr: stderrFd,
        control: this.control?.child,
        host: this.host?.child,
      };
      this.descriptors = stdioByChannel(this.childEnds);
    } catch (error) {
      this.releaseChildEnds();
      closeQuietly(this.stdin?.host);
      closeQuietly(this.control?.host);
      closeQuietly(this.host?.host);
      throw error;
    }
  }

  /** `spawn`'s `stdio`. */
  get spawnStdio(): (number | "ignore")[] {
    return this.descriptors;
  }

  /**
   * After `spawn` returned: the child's ends go (their end of file must be
   * the child's), and the host's become the child's stdin and the control
   * socket; when the spawn failed, they go too.
   */
  adopt(started: boolean): { stdin: Socket | null; controlFd: number | undefined; hostChannel: Socket | undefined } {
    this.releaseChildEnds();
    if (!started) {
      closeQuietly(this.stdin?.host);
      closeQuietly(this.control?.host);
      closeQuietly(this.host?.host);
      return { stdin: null, controlFd: undefined, hostChannel: undefined };
    }
    return {
      stdin: new Socket({ fd: this.stdin!.host, readable: false, writable: true }),
      controlFd: this.control?.host,
      hostChannel: this.host !== undefined ? new Socket({ fd: this.host.host, readable: true, writable: true }) : undefined,
    };
  }

  /** `spawn` threw: every end goes. */
  abandon(): void {
    this.adopt(false);
  }

  private releaseChildEnds(): void {
    this.stdout.reader.closeChildEnd();
    this.stderr.reader.closeChildEnd();
    closeQuietly(this.stdin?.child);
    closeQuietly(this.control?.child);
    closeQuietly(this.host?.child);
    if (this.stdin) this.stdin.child = undefined;
    if (this.control) this.control.child = undefined;
    if (this.host) this.host.child = undefined;
  }
}
