/**
 * Whether a backend can start warm, and which prefork server it needs: one
 * per distinct interpreter invocation, app, working directory and
 * environment (docs/prefork.md). Pure but for finding the supervisor.
 */
import { resolve as resolvePath } from "node:path";
import { WarmStartError } from "../../errors";
import { native } from "../../native";
import type { BridgeProcessOptions } from "../../process";
import { findSupervisor } from "../supervisor";

/** What starts one prefork server. */
export interface ServerPlan {
  /** Equal for every backend this server can fork. */
  key: string;
  /** The interpreter invocation: what precedes `-m agentlane_process_bridge`. */
  command: string;
  prefix: string[];
  app: string;
  cwd: string;
  env: Record<string, string>;
  supervisor: string;
}

/** A server plan for these options, or why there can be none. */
export function planServer(options: BridgeProcessOptions): ServerPlan | WarmStartError {
  if (process.platform !== "linux" && process.platform !== "darwin") {
    return new WarmStartError(`A warm start needs Linux or macOS (this is ${process.platform}).`, "platform");
  }
  if (options.supervise === false) {
    return new WarmStartError("A warm start needs the native supervisor, and supervise is false.", "no-supervisor");
  }
  const supervisor = findSupervisor();
  if (supervisor === null) {
    return new WarmStartError("A warm start needs the native supervisor, and this platform's package has none.", "no-supervisor");
  }
  const invocation = options.shell ? null : native.warmInvocation(options.args ?? []);
  if (invocation === null) {
    return new WarmStartError(
      "A warm start needs a backend run as `<python> -m agentlane_process_bridge --app module:factory` (or `{ app, projectDir }`), without a shell.",
      "not-warmable",
    );
  }
  const cwd = resolvePath(options.cwd ?? process.cwd());
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(options.env ?? process.env)) {
    if (value !== undefined) env[name] = value;
  }
  const names = Object.keys(env).sort();
  const key = JSON.stringify([options.command, invocation.prefix, invocation.app, cwd, supervisor, names.map((name) => [name, env[name]])]);
  return { key, command: options.command, prefix: invocation.prefix, app: invocation.app, cwd, env, supervisor };
}
