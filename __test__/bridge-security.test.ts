/**
 * agentlane-bridge's guards: the token on every call (unary and streaming),
 * loopback only, no browsers (Origin, foreign Host, GET, simple content
 * types), a private token file whose content is never printed, and bad
 * request bodies that get a clear Connect error and leave it serving.
 * The same guards stand before the conversation RPCs (CreateConversation,
 * ListConversations, CloseConversation) and a call addressed to a
 * conversation. Against the real demo backend; raw requests go through
 * node:http so that every header is ours to set.
 */
import { request } from "node:http";
import { connect } from "node:net";
import { readFileSync, statSync } from "node:fs";
import { dirname } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentService, BridgeControlService, collect, demoArgs, start, type Bridge } from "./bridge-harness";

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

/** One raw HTTP/1.1 request to the bridge. */
function raw(bridge: Bridge, path: string, options: { method?: string; headers?: Record<string, string>; body?: Buffer | string; host?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: options.host ?? "127.0.0.1",
        port: bridge.info.port,
        path,
        method: options.method ?? "POST",
        headers: options.headers,
        agent: false,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString("utf8") }));
      },
    );
    req.on("error", reject);
    req.end(options.body);
  });
}

const PING = "/agentlane.bridge.v1.BridgeControlService/Ping";
const PROMPT = "/agentlane.bridge.v1.AgentService/Prompt";

describe("agentlane-bridge: security", () => {
  let bridge: Bridge;
  let auth: Record<string, string>;
  const json = { "Content-Type": "application/json" };

  beforeAll(async () => {
    bridge = await start(demoArgs());
    auth = { Authorization: `Bearer ${bridge.token}` };
  });

  afterAll(async () => {
    await bridge.stop();
  });

  async function stillServing(): Promise<void> {
    expect((await bridge.client(BridgeControlService).ping({})).message).toBe("pong");
  }

  it("no token or a wrong token is unauthenticated, for unary and streaming calls and both codecs", async () => {
    for (const useJson of [false, true]) {
      for (const token of [null, "0".repeat(64), `${bridge.token}x`, bridge.token.slice(1)]) {
        const transport = bridge.transport({ json: useJson, token });
        const control = createClient(BridgeControlService, transport);
        const agent = createClient(AgentService, transport);
        const unary = await control.ping({}).catch((e: unknown) => ConnectError.from(e));
        expect(unary).toBeInstanceOf(ConnectError);
        expect((unary as ConnectError).code).toBe(Code.Unauthenticated);
        for (const stream of [agent.subscribe({}), agent.prompt({ text: "Please save a note." })]) {
          const ended = await collect(stream as any);
          expect(ended.error?.code).toBe(Code.Unauthenticated);
          expect(ended.events).toEqual([]);
        }
      }
    }
    const answer = await raw(bridge, PING, { headers: { ...json, Authorization: "Basic abc" }, body: "{}" });
    expect(answer.status).toBe(401);
    expect(JSON.parse(answer.body).code).toBe("unauthenticated");
    await stillServing();
  });

  it("any Origin and a non-loopback Host are refused with permission_denied, token or not; loopback names are served", async () => {
    for (const origin of ["http://evil.example", "null", `http://127.0.0.1:${bridge.info.port}`]) {
      const answer = await raw(bridge, PING, { headers: { ...json, ...auth, Origin: origin }, body: "{}" });
      expect(answer.status).toBe(403);
      expect(JSON.parse(answer.body).code).toBe("permission_denied");
      expect(Object.keys(answer.headers).filter((h) => h.startsWith("access-control-"))).toEqual([]);
    }
    for (const host of ["evil.example", `evil.example:${bridge.info.port}`, `127.0.0.1.evil.example:${bridge.info.port}`, `192.168.1.1:${bridge.info.port}`, "127.0.0.1"]) {
      const answer = await raw(bridge, PING, { headers: { ...json, ...auth, Host: host }, body: "{}" });
      expect(answer.status, host).toBe(403);
      expect(JSON.parse(answer.body).code).toBe("permission_denied");
    }
    for (const host of [`127.0.0.1:${bridge.info.port}`, `localhost:${bridge.info.port}`, `[::1]:${bridge.info.port}`]) {
      const answer = await raw(bridge, PING, { headers: { ...json, ...auth, Host: host }, body: "{}" });
      expect(answer.status, host).toBe(200);
      expect(JSON.parse(answer.body)).toEqual({ message: "pong" });
    }
    // A CORS preflight carries an Origin: refused, no CORS headers.
    const preflight = await raw(bridge, PING, { method: "OPTIONS", headers: { Origin: "http://evil.example", "Access-Control-Request-Method": "POST" } });
    expect(preflight.status).toBe(403);
    expect(Object.keys(preflight.headers).filter((h) => h.startsWith("access-control-"))).toEqual([]);
  });

  it("no Connect GET, and no simple content type a form could send", async () => {
    const get = await raw(bridge, `${PING}?encoding=json&message=%7B%7D`, { method: "GET", headers: auth });
    expect(get.status).toBe(405);
    for (const type of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]) {
      const answer = await raw(bridge, PING, { headers: { ...auth, "Content-Type": type }, body: "{}" });
      expect(answer.status, type).toBe(415);
    }
  });

  it("the listener is bound to 127.0.0.1 only", async () => {
    const port = bridge.info.port;
    const hex = port.toString(16).toUpperCase().padStart(4, "0");
    const listening = readFileSync("/proc/net/tcp", "utf8")
      .split("\n")
      .slice(1)
      .map((l) => l.trim().split(/\s+/))
      .filter((f) => f[1]?.endsWith(`:${hex}`) && f[3] === "0A");
    expect(listening.map((f) => f[1])).toEqual([`0100007F:${hex}`]);
    const v6 = readFileSync("/proc/net/tcp6", "utf8").split("\n").filter((l) => l.includes(`:${hex} `) && / 0A /.test(l));
    expect(v6).toEqual([]);
    // Another loopback address of this machine does not reach it.
    for (const host of ["127.0.0.2", "::1"]) {
      const refused = await new Promise<string>((resolve) => {
        const socket = connect({ host, port }, () => {
          socket.destroy();
          resolve("connected");
        });
        socket.on("error", (e: NodeJS.ErrnoException) => resolve(e.code ?? "error"));
      });
      expect(refused, host).toBe("ECONNREFUSED");
    }
  });

  it("the token file is 0600 in a 0700 directory and holds 32 random bytes in hex", () => {
    expect(statSync(bridge.info.tokenFile).mode & 0o777).toBe(0o600);
    expect(statSync(dirname(bridge.info.tokenFile)).mode & 0o777).toBe(0o700);
    expect(bridge.token).toMatch(/^[0-9a-f]{64}$/);
  });

  it("bad request bodies get a clear Connect error and leave the bridge serving", async () => {
    const cases: [string, Record<string, string>, Buffer | string, number, string][] = [
      ["malformed JSON", json, '{"id": ', 400, "invalid_argument"],
      ["a wrong type", json, '{"id": "tool-approval-1", "allowed": "yes"}', 400, "invalid_argument"],
      ["a lone surrogate", json, '{"id": "\\ud800 hi", "allowed": true}', 400, "invalid_argument"],
      ["bad binary proto", { "Content-Type": "application/proto" }, Buffer.from([0x0a, 0xff, 0xff]), 400, "invalid_argument"],
    ];
    const approve = "/agentlane.bridge.v1.AgentService/Approve";
    for (const [what, headers, body, status, code] of cases) {
      const answer = await raw(bridge, approve, { headers: { ...headers, ...auth }, body });
      expect(answer.status, what).toBe(status);
      expect(JSON.parse(answer.body).code, what).toBe(code);
      expect(JSON.parse(answer.body).message.length, what).toBeGreaterThan(0);
    }
    // A prompt holding a lone surrogate, through the stream's envelope.
    const message = Buffer.from('{"text":"\\udc00"}');
    const envelope = Buffer.concat([Buffer.from([0, 0, 0, 0, message.length]), message]);
    const stream = await raw(bridge, PROMPT, { headers: { ...auth, "Content-Type": "application/connect+json" }, body: envelope });
    expect(stream.status).toBe(200);
    const end = JSON.parse(stream.body.slice(5));
    expect(end.error.code).toBe("invalid_argument");
    // 100 MB: refused before the handler, with resource_exhausted, once the
    // body was read (a client still writing it gets the answer, not EPIPE).
    const huge = Buffer.alloc(100 * 1024 * 1024, 0x20);
    huge.write('{"text":"', 0);
    const tooBig = await raw(bridge, approve, { headers: { ...json, ...auth }, body: huge });
    expect(tooBig.status).toBe(429);
    expect(JSON.parse(tooBig.body).code).toBe("resource_exhausted");
    expect(JSON.parse(tooBig.body).message).toBe(`the request body is ${huge.length} bytes; agentlane-bridge takes at most ${8 * 1024 * 1024}`);
    // A configure patch that is not an object, and one that the backend
    // would mangle (a lone surrogate).
    for (const patchJson of ["[1]", "not json", '{"model":"\\ud800"}']) {
      const error = await bridge
        .client(AgentService)
        .configure({ patchJson })
        .then(() => undefined, (e: unknown) => ConnectError.from(e));
      expect(error?.code, patchJson).toBe(Code.InvalidArgument);
    }
    await stillServing();
    const run = await collect(bridge.client(AgentService).prompt({ text: "A note after the bad requests." }) as any, async (event) => {
      const record = event.event.event;
      if (record?.type === "tool_approval" && record.payload.event.record.status === "pending") {
        await bridge.client(AgentService).approve({ id: record.payload.event.record.request_id, allowed: true });
      }
    });
    expect(run.events.at(-1)!.type).toBe("run_complete");
  });

  it("a client writing a too-large body piece by piece has every piece taken, then gets the answer", async () => {
    // 100 MiB declared and written in 1 MiB pieces, each after the last was
    // flushed: were the bridge to answer and close after its 8 MiB limit,
    // the later writes would fail (EPIPE or a reset connection).
    const pieces = 100;
    const piece = Buffer.alloc(1024 * 1024, 0x20);
    const socket = connect(bridge.info.port, "127.0.0.1");
    await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
    let answer = "";
    socket.on("data", (chunk) => (answer += chunk.toString("latin1")));
    const ended = new Promise<void>((resolve) => socket.once("close", () => resolve()));
    const writeErrors: string[] = [];
    socket.on("error", (error) => writeErrors.push((error as NodeJS.ErrnoException).code ?? error.message));
    const write = (data: Buffer | string) => new Promise<void>((resolve) => socket.write(data, (error) => (error && writeErrors.push((error as NodeJS.ErrnoException).code ?? error.message), resolve())));
    await write(
      `POST /agentlane.bridge.v1.AgentService/Approve HTTP/1.1\r\nHost: 127.0.0.1:${bridge.info.port}\r\n` +
        `Authorization: ${auth.Authorization}\r\nContent-Type: application/json\r\nContent-Length: ${pieces * piece.length}\r\n\r\n`,
    );
    for (let i = 0; i < pieces && writeErrors.length === 0; i++) await write(piece);
    await ended;
    expect(writeErrors).toEqual([]);
    expect(answer).toMatch(/^HTTP\/1\.1 429 /);
    expect(answer).toContain('"code":"resource_exhausted"');
    await stillServing();
  });

  it("every conversation RPC passes the same guards (token, Origin, Host, POST only, body limit); a refused Create creates nothing", async () => {
    const service = "/agentlane.bridge.v1.ConversationService/";
    const calls: [string, string][] = [
      ["CreateConversation", "{}"],
      ["ListConversations", "{}"],
      ["CloseConversation", '{"id":"default"}'],
      // A call addressed to a conversation goes through the same gate.
      ["../agentlane.bridge.v1.AgentService/Cancel", '{"conversationId":"default"}'],
    ];
    const huge = Buffer.alloc(9 * 1024 * 1024, 0x20);
    huge.write('{"id":"', 0);
    for (const [method, body] of calls) {
      const path = method.startsWith("../") ? method.slice(2) : service + method;
      const refusals: [string, Parameters<typeof raw>[2], number, string | null][] = [
        ["no token", { headers: json, body }, 401, "unauthenticated"],
        ["a wrong token", { headers: { ...json, Authorization: `Bearer ${"0".repeat(64)}` }, body }, 401, "unauthenticated"],
        ["an Origin", { headers: { ...json, ...auth, Origin: "http://evil.example" }, body }, 403, "permission_denied"],
        ["a foreign Host", { headers: { ...json, ...auth, Host: `evil.example:${bridge.info.port}` }, body }, 403, "permission_denied"],
        ["GET", { method: "GET", headers: auth }, 405, null],
        ["a form content type", { headers: { ...auth, "Content-Type": "text/plain" }, body }, 415, null],
        ["a body over the limit", { headers: { ...json, ...auth }, body: huge }, 429, "resource_exhausted"],
      ];
      for (const [what, options, status, code] of refusals) {
        const answer = await raw(bridge, method === "ListConversations" && what === "GET" ? `${path}?encoding=json&message=%7B%7D` : path, options);
        expect(answer.status, `${method}: ${what}`).toBe(status);
        if (code) expect(JSON.parse(answer.body).code, `${method}: ${what}`).toBe(code);
        expect(Object.keys(answer.headers).filter((h) => h.startsWith("access-control-"))).toEqual([]);
      }
    }
    // Nothing got through: still only the default conversation, still open.
    const listed = await raw(bridge, service + "ListConversations", { headers: { ...json, ...auth }, body: "{}" });
    expect(listed.status).toBe(200);
    expect(JSON.parse(listed.body).conversations.map((c: any) => c.id)).toEqual(["default"]);
    // An unknown conversation is not_found, not some other conversation.
    const unknown = await raw(bridge, "/agentlane.bridge.v1.AgentService/Cancel", { headers: { ...json, ...auth }, body: '{"conversationId":"c999"}' });
    expect(unknown.status).toBe(404);
    expect(JSON.parse(unknown.body).code).toBe("not_found");
    await stillServing();
  });

  it("the token appears in no line the bridge wrote, and its directory is gone after the exit", async () => {
    await bridge.stop();
    const lines = [...bridge.stdout, ...bridge.stderr];
    expect(lines[0]).toMatch(/^agentlane-bridge ready /);
    expect(lines.filter((l) => l.includes(bridge.token))).toEqual([]);
    expect(() => statSync(dirname(bridge.info.tokenFile))).toThrow();
  });
});
