/**
 * Whether a backend can start warm, and which prefork server it needs: one
 * per distinct interpreter invocation, app, working directory, supervisor
 * and environment (its *key*; docs/prefork.md). Pure but for finding the
 * supervisor.
 */
import { createHash } from "node:crypto";
import { resolve as resolvePath } from "node:path";
import { WarmStartError } from "../../errors";
import { native } from "../../native";
import type { BridgeProcessOptions } from "../../process";
import { findSupervisor } from "../supervisor";

/** What starts one prefork server. */
export interface ServerPlan {
  /** Equal for every backend this server can fork. */
  key: string;
  /**
   * What finds a shared server of another host (`shared.ts`): the key,
   * but with `env` absent standing for "the run's environment", whatever
   * this host's is (a test runner's workers each have their own variables).
   */
  sharingKey: string;
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
  const what = [options.command, invocation.prefix, invocation.app, cwd, supervisor];
  const key = JSON.stringify([...what, names.map((name) => [name, env[name]])]);
  const sharingKey = createHash("sha256")
    .update(JSON.stringify([...what, options.env === undefined ? null : names.map((name) => [name, env[name]])]))
    .digest("hex");
  return { key, sharingKey, command: options.command, prefix: invocation.prefix, app: invocation.app, cwd, env, supervisor };
}

/**
 * Why `next` needs a server of its own when `running` serves the same
 * app: what of the key differs (environment variables by name, never by
 * value: they may be secrets), or `undefined` for another app.
 */
export function keyDifference(running: ServerPlan, next: ServerPlan): string | undefined {
  if (running.app !== next.app || running.key === next.key) return undefined;
  const differs: string[] = [];
  if (running.command !== next.command || JSON.stringify(running.prefix) !== JSON.stringify(next.prefix)) differs.push("the interpreter invocation");
  if (running.cwd !== next.cwd) differs.push(`the working directory (${next.cwd}, not ${running.cwd})`);
  if (running.supervisor !== next.supervisor) differs.push("the supervisor");
  const names = new Set([...Object.keys(running.env), ...Object.keys(next.env)]);
  const changed = [...names].filter((name) => running.env[name] !== next.env[name]).sort();
  if (changed.length > 0) {
    const shown = changed.slice(0, 10).join(", ") + (changed.length > 10 ? `, and ${changed.length - 10} more` : "");
    differs.push(`the environment (${shown})`);
  }
  return differs.join(", ");
}
