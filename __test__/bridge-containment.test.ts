/**
 * agentlane-bridge's cold conversations contained as the Node package's
 * are (issue 32): each backend under `process-bridge-supervisor` (found
 * beside the bridge), so that a stubborn backend
 * (tests/e2e/backends/warm_stubborn_app.py, `create_tree_backend`: ignores SIGTERM, SIGINT,
 * SIGHUP, `shutdown` and stdin's end, with a plain and a `setsid`
 * grandchild that ignore them too) leaves nothing however the
 * conversation or the bridge ends: CloseConversation, Shutdown, stdin's
 * end, SIGKILL of the bridge; with 1 and with 20 conversations.
 */
import { rmSync } from "node:fs";
import { dirname } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { ConversationService, StartMode } from "../examples/clients/node/gen/agentlane/bridge/v1/bridge_pb.js";
import { backendsDir, BridgeControlService, commandLine, descendants, eventually, start, stat, survivors, venvPython, type Bridge } from "./bridge-harness";

let bridges: Bridge[] = [];

afterEach(async () => {
  await Promise.all(bridges.map((bridge) => (bridge.child.exitCode === null && bridge.child.signalCode === null ? bridge.stop() : undefined)));
  bridges = [];
});

/** The stubborn grandchildren below `root` (two per conversation). */
function grandchildren(root: number): number[] {
  return [...descendants(root).keys()].filter((pid) => commandLine(pid).includes("SIG_IGN"));
}

const ENDS = ["CloseConversation", "Shutdown", "stdin EOF", "SIGKILL"] as const;

describe.runIf(process.platform === "linux")("agentlane-bridge: a stubborn cold backend leaves nothing", () => {
  for (const count of [1, 20]) {
    for (const end of ENDS) {
      it(`${end}, ${count} conversation(s): 0 processes left 3 s later`, async () => {
        const bridge = await start([
          "--app",
          "warm_stubborn_app:create_tree_backend",
          "--project-dir",
          backendsDir,
          "--python",
          venvPython,
          "--no-default-conversation",
          "--max-conversations",
          "64",
          "--grace-ms",
          "300",
        ]);
        bridges.push(bridge);
        const conversations: any = bridge.client(ConversationService);
        const created = await Promise.all(Array.from({ length: count }, () => conversations.createConversation({ startMode: StartMode.COLD })));
        const ids: string[] = created.map((c: any) => c.conversation.id);
        for (const { conversation } of created) {
          // Supervised: the backend's parent is its supervisor, the bridge's child.
          const supervisor = stat(conversation.backendPid)!.ppid;
          expect(commandLine(supervisor)).toContain("process-bridge-supervisor");
          expect(stat(supervisor)!.ppid).toBe(bridge.child.pid);
        }
        await eventually(() => grandchildren(bridge.child.pid!).length === 2 * count, "every grandchild", 30_000);
        const recorded = descendants(bridge.child.pid!);
        expect(recorded.size).toBeGreaterThanOrEqual(4 * count);

        if (end === "CloseConversation") {
          await Promise.all(ids.map((id) => conversations.closeConversation({ id, graceMs: 300 })));
        } else if (end === "Shutdown") {
          await bridge.client(BridgeControlService).shutdown({ graceMs: 300 });
          expect(await bridge.exited).toEqual({ code: 0, signal: null });
        } else if (end === "stdin EOF") {
          bridge.child.stdin!.end();
          expect(await bridge.exited).toEqual({ code: 0, signal: null });
        } else {
          bridge.child.kill("SIGKILL");
          await bridge.exited;
          rmSync(dirname(bridge.info.tokenFile), { recursive: true, force: true });
        }
        await new Promise((resolve) => setTimeout(resolve, 3_000));
        const left = survivors(recorded).map((pid) => `${pid} ${commandLine(pid)}`);
        expect(left, `left after ${end}`).toEqual([]);
      }, 240_000);
    }
  }
});
