/**
 * agentlane-bridge under abuse (issue 30), warm starts (`--warm`): a
 * prefork server that stops forking (SIGSTOP), one that dies (SIGKILL),
 * and a bridge under `ulimit -n 60`. The clients are the Python
 * standard-library Connect client (__test__/fixtures/bridge_stdlib.py,
 * hundreds of calls at once) and connect-es; the backend is the real
 * agentlane==0.22.0 scenario app. The prefork server is found from a warm
 * backend: the backend's parent is its fork's supervisor, whose parent is
 * the server.
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError } from "@connectrpc/connect";
import { afterEach, describe, expect, it } from "vitest";
import { ConversationService, StartMode } from "../examples/clients/node/gen/agentlane/bridge/v1/bridge_pb.js";
import {
  AgentService,
  bridgeBinary,
  BridgeControlService,
  collect,
  commandLine,
  descendants,
  eventually,
  gone,
  scenarioArgs,
  start,
  stat,
  stdlib,
  type Bridge,
} from "./bridge-harness";

const CREATE = "ConversationService/CreateConversation";

let bridges: Bridge[] = [];
const stopped: number[] = [];

afterEach(async () => {
  for (const pid of stopped.splice(0)) {
    try {
      process.kill(pid, "SIGCONT");
    } catch {}
  }
  await Promise.all(bridges.map((bridge) => (bridge.child.exitCode === null ? bridge.stop() : undefined)));
  bridges = [];
});

async function bridgeWith(args: string[], options: { bridge?: string; shellLimit?: number } = {}): Promise<Bridge> {
  const bridge =
    options.shellLimit === undefined
      ? await start(args)
      : await start(["-c", `ulimit -n ${options.shellLimit} && exec "$0" "$@"`, bridgeBinary, ...args], { bridge: "sh" } as any);
  bridges.push(bridge);
  return bridge;
}

/** The prefork server a warm backend was forked from. */
function serverOf(backendPid: number): number {
  const supervisor = stat(backendPid)!.ppid;
  return stat(supervisor)!.ppid;
}

async function warmConversation(bridge: Bridge): Promise<{ id: string; backendPid: number; server: number }> {
  const { conversation } = await bridge.client(ConversationService).createConversation({ startMode: StartMode.WARM });
  expect(conversation!.startMode).toBe(StartMode.WARM);
  return { id: conversation!.id, backendPid: conversation!.backendPid, server: serverOf(conversation!.backendPid) };
}

async function chat(bridge: Bridge, conversationId: string): Promise<string> {
  const run = await collect(bridge.client(AgentService).prompt({ text: `chat ${conversationId}`, conversationId }));
  expect(run.error).toBeUndefined();
  return run.events.at(-1)!.event.final_output;
}

describe("agentlane-bridge --warm: a prefork server that does not fork", () => {
  it("SIGSTOPped: 350 warm creates at once all fail within the ready timeout, every other call answers meanwhile, and nothing is left once it forks again", async () => {
    const bridge = await bridgeWith(
      scenarioArgs("--warm", "--no-default-conversation", "--max-conversations", "400", "--ready-timeout-ms", "10000"),
    );
    const first = await warmConversation(bridge);
    await bridge.client(ConversationService).closeConversation({ id: first.id });
    expect(await gone(first.backendPid)).toBe(true);
    const server = first.server;
    expect(commandLine(server)).toContain("prefork");
    process.kill(server, "SIGSTOP");
    stopped.push(server);
    const dir = mkdtempSync(join(tmpdir(), "bridge-stopped-"));
    const sentFile = join(dir, "sent");
    let answered = false;
    const creates = stdlib(bridge, CREATE, { startMode: "START_MODE_WARM" }, { repeat: 350, giveUpAfter: 60, sentFile }).finally(() => {
      answered = true;
      rmSync(dir, { recursive: true, force: true });
    });
    // Once all 350 wait for their answers, every other call is answered.
    await eventually(() => existsSync(sentFile) || answered, "the 350 creates to be sent", 60_000);
    const control = bridge.client(BridgeControlService);
    expect((await control.ping({})).message).toBe("pong");
    expect((await control.getVersion({})).capabilities).toContain("warm");
    expect((await bridge.client(ConversationService).listConversations({})).conversations).toEqual([]);
    expect(answered).toBe(false);
    const outcomes = await creates;
    expect(outcomes.filter((o) => o.gaveUp)).toEqual([]);
    const refusals = new Set(outcomes.map((o) => `${o.status} ${o.body.code}`));
    expect(refusals).toEqual(new Set(["503 unavailable"]));
    expect(outcomes[0].body.message).toContain("did not fork the backend within the ready timeout");
    // Resumed, it forks what was asked of it, in order; each fork finds its
    // control socket closed and ends. A warm create asked after them all
    // (retried while the server catches up) is served warm, and nothing
    // else is left under the server.
    process.kill(server, "SIGCONT");
    let after: Awaited<ReturnType<typeof warmConversation>> | undefined;
    for (let tries = 0; after === undefined; tries++) {
      try {
        after = await warmConversation(bridge);
      } catch (error) {
        if (tries === 10 || ConnectError.from(error).code !== Code.Unavailable) throw error;
      }
    }
    expect(after.server).toBe(server);
    const own = new Set([after.backendPid, stat(after.backendPid)!.ppid]);
    await eventually(() => [...descendants(server).keys()].every((pid) => own.has(pid)), "the late forks to end", 30_000);
    expect((await bridge.client(ConversationService).listConversations({})).conversations.map((c) => c.id)).toEqual([after.id]);
    expect(await chat(bridge, after.id)).toContain(`You said: chat ${after.id}`);
  }, 240_000);
});

describe("agentlane-bridge --warm: a prefork server that dies", () => {
  it("SIGKILLed: the next warm create starts a new server and is warm, and GetVersion keeps listing warm", async () => {
    // The default fallback (cold) would show here as a cold conversation.
    const bridge = await bridgeWith(scenarioArgs("--warm", "--no-default-conversation"));
    const first = await warmConversation(bridge);
    process.kill(first.server, "SIGKILL");
    // Its forks end with it (its supervisor ends the tree); the bridge says so.
    expect(await gone(first.backendPid)).toBe(true);
    const version = await bridge.client(BridgeControlService).getVersion({});
    expect(version.capabilities).toContain("warm");
    // The default start mode (warm here) and an explicit one, both warm.
    const { conversation } = await bridge.client(ConversationService).createConversation({});
    expect(conversation!.startMode).toBe(StartMode.WARM);
    const server = serverOf(conversation!.backendPid);
    expect(server).not.toBe(first.server);
    expect(commandLine(server)).toContain("prefork");
    const second = await warmConversation(bridge);
    expect(second.server).toBe(server);
    expect(await chat(bridge, second.id)).toContain("You said: chat");
    expect((await bridge.client(BridgeControlService).getVersion({})).capabilities).toContain("warm");
    expect(bridge.stderr.some((line) => line.includes("the prefork server exited with signal 9"))).toBe(true);
    // The first conversation is gone with its server; its calls say so.
    const late = await bridge.client(AgentService).cancel({ conversationId: first.id }).catch((e: unknown) => ConnectError.from(e));
    expect(late).toBeInstanceOf(ConnectError);
    expect([Code.Unavailable, Code.NotFound]).toContain((late as ConnectError).code);
  }, 120_000);
});

describe("agentlane-bridge --warm under ulimit -n 60", () => {
  it("starts and serves warm under ulimit -n 60, where a cold backend works too (the prefork server places descriptors at any limit)", async () => {
    const bridge = await bridgeWith(scenarioArgs("--warm"), { shellLimit: 60 });
    const listed = (await bridge.client(ConversationService).listConversations({})).conversations;
    expect(listed.map((c) => c.id)).toEqual(["default"]);
    expect(listed[0].startMode, bridge.stderr.join("\n")).toBe(StartMode.WARM);
    const created = await warmConversation(bridge);
    expect(await chat(bridge, created.id)).toContain("You said: chat");
    expect(await chat(bridge, "")).toContain("You said: chat");
  }, 120_000);
});
