// The two-step check from Node (connect-es, generated code in ./gen):
//
//   AGENTLANE_BRIDGE=/path/to/agentlane-bridge node check.mjs [--json] -- \
//       --app demo_app:create_backend --project-dir ../../backend --python ../../../.venv/bin/python
//
// Step 1: Ping, GetVersion (api, protocol major 1, the backend's version),
// one call without the token refused as unauthenticated. Step 2: two runs of
// a real conversation; the client answers the agent's approval request,
// allowing once and denying once, and the tool result and the final answer
// must reflect its decision.
//
// A client must read the Prompt stream and call Approve concurrently: the
// run waits for the approval, so request-then-wait stalls on the first one.
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { AgentService, BridgeControlService } from "./gen/agentlane/bridge/v1/bridge_pb.js";
import { startBridge } from "./bridge.mjs";

const DENIAL = "Denied by the Node client.";

export async function check(bridgeArgs, { json = false, bridge: binary, cwd, log = console.log } = {}) {
  const bridge = await startBridge(bridgeArgs, { bridge: binary, cwd });
  try {
    const control = bridge.client(BridgeControlService, { json });
    const agent = bridge.client(AgentService, { json });

    // Step 1: the control path.
    const pong = await control.ping({});
    if (pong.message !== "pong") throw new Error(`Ping answered ${pong.message}`);
    const version = await control.getVersion({});
    if (version.api !== "agentlane.bridge.v1") throw new Error(`api ${version.api}`);
    if (Number(version.protocolVersion.split(".")[0]) !== 1) throw new Error(`protocol ${version.protocolVersion}`);
    const backendVersion = JSON.parse(version.readyJson).version;
    try {
      await createClient(BridgeControlService, bridge.transport({ json, token: null })).ping({});
      throw new Error("a call without the token was accepted");
    } catch (error) {
      if (!(error instanceof ConnectError) || error.code !== Code.Unauthenticated) throw error;
    }
    log(`step 1: ok (pong; api ${version.api}, protocol ${version.protocolVersion}, agentlane ${backendVersion}; no token -> unauthenticated)`);

    // Step 2: the reverse direction, allowed once and denied once.
    const runs = [];
    for (const allowed of [true, false]) {
      const run = await converse(agent, allowed);
      log(`step 2: ok (${allowed ? "allowed" : "denied"}: tool result ${JSON.stringify(run.toolResult)}; final answer ${JSON.stringify(run.finalOutput)})`);
      runs.push(run);
    }
    return { backendVersion, runs };
  } finally {
    await bridge.stop();
  }
}

/** One run: read the stream, answer each approval on the side, collect what the run says. */
async function converse(agent, allowed) {
  const answers = [];
  let toolEnd;
  let terminal;
  for await (const item of agent.prompt({ text: "Please save a note: remember milk." })) {
    if (item.item.case !== "event") continue;
    const event = JSON.parse(item.item.value.json);
    const record = event.event;
    if (record?.type === "tool_approval" && record.payload.event.record.status === "pending") {
      const id = record.payload.event.record.request_id;
      // Not awaited here: the stream must keep being read.
      answers.push(agent.approve(allowed ? { id, allowed } : { id, allowed, reason: DENIAL }));
    }
    if (record?.type === "tool_end") toolEnd = record.payload;
    if (["run_complete", "run_cancelled", "error"].includes(event.type)) terminal = event;
  }
  const resolved = await Promise.all(answers);
  if (resolved.length === 0) throw new Error("the agent asked for no approval");
  for (const answer of resolved) {
    const decision = JSON.parse(answer.resolved.json).event.payload.event.record.final_decision;
    if (decision.outcome !== (allowed ? "allow" : "deny")) throw new Error(`resolved as ${decision.outcome}`);
  }
  if (terminal?.type !== "run_complete") throw new Error(`the run ended with ${JSON.stringify(terminal)}`);
  const toolResult = toolEnd?.result;
  if (!allowed && !String(toolResult).includes(DENIAL)) throw new Error(`the tool result does not carry the denial: ${toolResult}`);
  if (typeof terminal.final_output === "string" && typeof toolResult === "string" && !terminal.final_output.includes(toolResult)) {
    throw new Error(`the final answer does not reflect the tool result: ${terminal.final_output}`);
  }
  return { toolResult, finalOutput: terminal.final_output };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const argv = process.argv.slice(2);
  const json = argv[0] === "--json";
  const rest = argv.slice(json ? 1 : 0);
  const bridgeArgs = rest[0] === "--" ? rest.slice(1) : rest;
  check(bridgeArgs, { json }).then(
    () => console.log("check: passed"),
    (error) => {
      console.log(`check: FAILED: ${error.message}`);
      process.exitCode = 1;
    },
  );
}
