// Starting agentlane-bridge from Node and talking to it with connect-es.
//
//   const bridge = await startBridge(["--app", "demo_app:create_backend", "--project-dir", dir]);
//   const agent = bridge.client(AgentService);            // binary proto
//   const agentJson = bridge.client(AgentService, { json: true });
//   ...
//   await bridge.stop();
//
// The bridge writes one line on stdout once it serves:
// `agentlane-bridge ready {json}` (or `agentlane-bridge failed {json}`).
// Its stdin is kept open: closing it tells the bridge its launcher is gone.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { BridgeControlService } from "./gen/agentlane/bridge/v1/bridge_pb.js";

/** Spawns the bridge and resolves once its discovery line says it is ready. */
export function startBridge(args, { bridge = process.env.AGENTLANE_BRIDGE ?? "agentlane-bridge", cwd, env, timeoutMs = 30_000 } = {}) {
  const child = spawn(bridge, args, { cwd, env, stdio: ["pipe", "pipe", "pipe"] });
  const stderr = [];
  createInterface({ input: child.stderr }).on("line", (line) => stderr.push(line));
  const stdout = [];
  const lines = createInterface({ input: child.stdout });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`agentlane-bridge wrote no discovery line in ${timeoutMs} ms`));
    }, timeoutMs);
    child.on("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    lines.on("line", (line) => {
      stdout.push(line);
      if (stdout.length > 1) return;
      clearTimeout(timer);
      const match = /^agentlane-bridge (ready|failed) (.*)$/.exec(line);
      if (!match) return reject(new Error(`unexpected first line from agentlane-bridge: ${line}`));
      const info = JSON.parse(match[2]);
      if (match[1] === "failed") return reject(Object.assign(new Error(`agentlane-bridge failed (${info.stage}): ${info.message}`), { info }));
      if (info.schema !== 1 || info.api !== "agentlane.bridge.v1") return reject(new Error(`unknown discovery line: ${line}`));
      resolve(bridgeHandle(child, info, { stdout, stderr, exited }));
    });
  });
}

function bridgeHandle(child, info, { stdout, stderr, exited }) {
  const token = readFileSync(info.tokenFile, "utf8").trim();
  const transports = new Map();
  /** A connect-es transport: binary proto by default, JSON with `json: true`; HTTP/1.1. */
  function transport({ json = false, token: bearer = token } = {}) {
    const key = `${json}:${bearer}`;
    if (!transports.has(key)) {
      transports.set(
        key,
        createConnectTransport({
          baseUrl: info.url,
          httpVersion: "1.1",
          useBinaryFormat: !json,
          interceptors: bearer === null ? [] : [(next) => (req) => {
            req.header.set("Authorization", `Bearer ${bearer}`);
            return next(req);
          }],
        }),
      );
    }
    return transports.get(key);
  }
  return {
    info,
    token,
    child,
    stdout,
    stderr,
    exited,
    transport,
    client: (service, options) => createClient(service, transport(options)),
    /** Asks the bridge to shut down and waits for its exit. */
    async stop(graceMs = 0) {
      if (child.exitCode === null && child.signalCode === null) {
        try {
          await createClient(BridgeControlService, transport()).shutdown({ graceMs });
        } catch {
          child.kill("SIGKILL");
        }
      }
      return exited;
    },
  };
}
