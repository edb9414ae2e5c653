/**
 * `attachAgentSession` on process-like objects that are not a
 * `ChildProcess` (issue 29): a TCP connection to a backend elsewhere, and
 * streams that do not give bytes. The real agentlane backend, in real
 * child processes; the attached objects are what an application would
 * build around them.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { EventEmitter, once } from "node:events";
import { connect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { Transform } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { attachAgentSession, BridgeReadError, SessionClosedError, SessionStartError, type AgentProcessLike, type SessionClose, type SessionDiagnostic } from "../lib/index";
import { goneWithin, repoRoot } from "./helpers";

const python = join(repoRoot, ".venv", "bin", "python");
const backendArgs = ["-m", "agentlane_process_bridge", "--app", "scenario_app:create_backend"];
const cwd = join(repoRoot, "tests", "e2e", "backends");

const children: ChildProcess[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) child.kill("SIGKILL");
  for (const server of servers.splice(0)) server.close();
});

function backend(): ChildProcess {
  const child = spawn(python, backendArgs, { cwd, stdio: ["pipe", "pipe", "pipe"] });
  children.push(child);
  return child;
}

/**
 * A backend "elsewhere": a loopback server that starts the real backend for
 * each connection and joins the connection to its stdin and stdout (as a
 * remote launcher would); the connection ends when the backend exits.
 */
async function backendServer(): Promise<{ port: number; backends: ChildProcess[] }> {
  const backends: ChildProcess[] = [];
  const server = createServer((socket) => {
    const child = backend();
    backends.push(child);
    socket.pipe(child.stdin!);
    child.stdout!.pipe(socket);
    socket.on("error", () => {});
    child.stdin!.on("error", () => {});
  });
  servers.push(server);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const address = server.address();
  if (address === null || typeof address === "string") throw new Error("no TCP address");
  return { port: address.port, backends };
}

describe.runIf(process.platform !== "win32")("attachAgentSession on objects that are not a ChildProcess", () => {
  it("a net.Socket to a backend elsewhere: the session works, and onClose reports code and signal as a number or null (issue 29, item 14)", async () => {
    const { port, backends } = await backendServer();
    const socket: Socket = connect(port, "127.0.0.1");
    await once(socket, "connect");
    // The socket is both streams; its `close(hadError)` is its only end.
    const closes: SessionClose[] = [];
    const session = await attachAgentSession(Object.assign(socket, { stdin: socket, stdout: socket }) as unknown as AgentProcessLike, {
      onClose: (close) => closes.push(close),
      onDiagnostic: () => {},
      shutdownGraceMs: 10_000,
    });
    expect(session.process).toMatchObject({ mode: "attached", pid: undefined });
    expect(await session.run("chat over tcp")).toMatchObject({ status: "completed", finalOutput: "Hello! This is a scripted reply. You said: chat over tcp" });
    await session.close();
    // Before: { reason: "shutdown", code: false, signal: undefined } (the socket's hadError).
    expect(closes).toEqual([{ reason: "shutdown", code: null, signal: null }]);
    expect(await goneWithin(backends[0].pid!)).toBe(true);
  });

  it("an object-mode stdout (an application's own parser) is refused at once with invalid-spec; nothing throws out of its stream (issue 29, item 7)", async () => {
    const child = backend();
    // Each line parsed: the chunks are objects, which the native framer cannot take.
    const parsed = new Transform({
      readableObjectMode: true,
      transform(chunk: Buffer, _encoding, done) {
        for (const line of chunk.toString().split("\n").filter(Boolean)) this.push(JSON.parse(line));
        done();
      },
    });
    child.stdout!.pipe(parsed);
    const attached = attachAgentSession({ stdin: child.stdin, stdout: parsed, stderr: child.stderr, pid: child.pid, on: child.on.bind(child), kill: child.kill.bind(child) } as AgentProcessLike, {
      readyTimeoutMs: 5_000,
      onDiagnostic: () => {},
    });
    // Before: accepted; the backend's ready reached the data handler as an
    // object, which threw "Failed to get Buffer pointer and length" out of the
    // stream (an uncaught exception), and the start timed out.
    const error = (await attached.catch((e: unknown) => e)) as SessionStartError;
    expect(error).toBeInstanceOf(SessionStartError);
    expect(error.code).toBe("invalid-spec");
    expect(error.message).toBe("The attached process's stdout is an object-mode stream: the session reads bytes (or strings) from it.");
    // The process is still the application's: the refusal did not touch it.
    expect(child.exitCode).toBeNull();
  });

  it("a stdout that hands over something other than bytes mid-session: a read-failed close, never an exception out of the stream (issue 29, item 7)", async () => {
    const child = backend();
    // A transport of its own: it relays the backend's output as strings, and then, by a bug, an object.
    const stdout = new EventEmitter() as EventEmitter & { pause(): void; resume(): void };
    stdout.pause = () => {};
    stdout.resume = () => {};
    child.stdout!.setEncoding("utf8");
    child.stdout!.on("data", (text: string) => stdout.emit("data", text));
    child.stdout!.on("end", () => stdout.emit("end"));
    const diagnostics: SessionDiagnostic[] = [];
    const closes: SessionClose[] = [];
    const session = await attachAgentSession(
      { stdin: child.stdin, stdout: stdout as never, stderr: child.stderr, on: child.on.bind(child), kill: child.kill.bind(child) } as AgentProcessLike,
      { onDiagnostic: (diagnostic) => diagnostics.push(diagnostic), onClose: (close) => closes.push(close), termGraceMs: 100 },
    );
    expect(session.ready.package).toBeTruthy();
    const run = session.run("slow 30").catch((e: unknown) => e);
    // Emitted from a timer, as a stream's own emission would be: before the
    // fix, the native framer's throw went out of this handler, uncaught.
    setImmediate(() => stdout.emit("data", { not: "bytes" }));
    const error = (await run) as SessionClosedError;
    expect(error).toBeInstanceOf(SessionClosedError);
    expect(error.close.reason).toBe("read-failed");
    const readError = (error.close as Extract<SessionClose, { reason: "read-failed" }>).error;
    expect(readError).toBeInstanceOf(BridgeReadError);
    expect(readError.stream).toBe("stdout");
    expect(readError.message).toBe("Reading the backend's stdout failed: a chunk was an object, not bytes or a string (an object-mode stream?)");
    expect(diagnostics.filter((d) => d.kind === "read-failed")).toHaveLength(1);
    // The session ends the process it could no longer read.
    expect(await goneWithin(child.pid!)).toBe(true);
    expect(closes.map((close) => close.reason)).toEqual(["read-failed"]);
  });
});
