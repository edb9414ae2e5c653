/**
 * A prefork server shared with other processes (docs/prefork.md §7): test
 * suites pay the app's import once per run instead of once per worker. The
 * process that shares it (a test runner's global setup) starts it listening
 * on a Unix socket in a directory only this user can enter, and lists it in
 * an environment variable (`shared-env.ts`) that the processes it starts
 * afterwards inherit; a warm start there whose spec matches connects to it
 * instead of starting its own (`registry.ts`).
 *
 * What a worker forks is contained by that worker: each conversation's
 * supervisor has its control socket from the worker, so a worker's end
 * ends its conversations. The server itself is the sharing process's: it
 * ends with that process, or `close()`.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WarmStartError } from "../../errors";
import { resolveBackendSpec, type BackendSpec, type BridgeProcessOptions } from "../../process";
import { DEFAULT_TERM_GRACE_MS } from "../start-plan";
import { planServer } from "./plan";
import { DEFAULT_PREWARM_TIMEOUT_MS, settled, startShared } from "./registry";
import type { WarmServer, WarmServerInfo } from "./server";
import { listShared } from "./shared-env";

/** A shared prefork server, as its sharing process holds it. */
export interface SharedWarmServer extends WarmServerInfo {
  /** The Unix socket other processes connect to. */
  socket: string;
  /**
   * Stops sharing: unlisted, no more forks; the server exits once the
   * conversations it forked (in every process) have ended (`kill: true`:
   * now, with them). Resolves once it has exited.
   */
  close(options?: { kill?: boolean }): Promise<void>;
}

/**
 * Starts the prefork server of `backend` (as `prewarm` does) and shares it
 * with the processes this one starts from now on (a test runner's workers):
 * a warm start there with the same spec forks from it. With `env` absent in
 * the spec, it serves every process's spec without `env`, and its
 * conversations run with this process's environment (a test runner gives
 * each worker variables of its own); with `env`, exactly that environment.
 * It never idles out. Rejects as `prewarm` does.
 */
export async function shareWarmServer(backend: BackendSpec, options: { timeoutMs?: number } = {}): Promise<SharedWarmServer> {
  const spec: BridgeProcessOptions = resolveBackendSpec(backend);
  const plan = planServer(spec);
  if (plan instanceof WarmStartError) throw plan;
  const directory = mkdtempSync(join(tmpdir(), "pbn-warm-"));
  const socket = join(directory, "server.sock");
  let server: WarmServer;
  try {
    server = startShared(plan, spec.termGraceMs ?? DEFAULT_TERM_GRACE_MS, socket);
  } catch (error) {
    rmSync(directory, { recursive: true, force: true });
    throw error;
  }
  const unshare = () => {
    listShared(plan.sharingKey, undefined);
    rmSync(directory, { recursive: true, force: true });
  };
  server.whenExited(unshare);
  // A host that exits without closing it: its supervisor kills the server,
  // which leaves its socket's directory behind.
  const removeOnExit = () => rmSync(directory, { recursive: true, force: true });
  process.once("exit", removeOnExit);
  server.whenExited(() => process.removeListener("exit", removeOnExit));
  let info: WarmServerInfo;
  try {
    info = await settled(server, options.timeoutMs ?? DEFAULT_PREWARM_TIMEOUT_MS);
  } catch (error) {
    server.close("kill");
    throw error;
  }
  listShared(plan.sharingKey, { socket, importOutput: server.importOutput });
  return {
    ...info,
    socket,
    close: (how = {}) => {
      listShared(plan.sharingKey, undefined);
      server.close(how.kill ? "kill" : "close");
      return server.exited();
    },
  };
}
