/**
 * Starting the real host-tools backend (tests/e2e/backends/host_tools_app.py,
 * a real agentlane agent with a scripted model) with its host channel, and
 * hosting a session on it: attached (the test spawns the backend with the
 * channel at fd 4), and, where the start seam gives the channel, cold and
 * warm.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import type { Socket } from "node:net";
import { attachAgentSession, closeWarmServers, createAgentSession, type AgentSession, type AttachSessionOptions, type SessionDiagnostic } from "../../lib/index";
import { repoRoot } from "../helpers";

export const python = join(repoRoot, ".venv", "bin", "python");
export const backendsDir = join(repoRoot, "tests", "e2e", "backends");
const moduleSource = join(repoRoot, "python", "src");

const children: ChildProcess[] = [];

/** Kills every backend the tests started (afterEach). */
export function killBackends(): void {
  for (const child of children.splice(0)) child.kill("SIGKILL");
}

/** The environment of the host-tools backend (the module from the repository's source). */
export function backendEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { ...(process.env as Record<string, string>), PYTHONPATH: moduleSource, ...extra };
}

/** Spawns the backend with its channel at fd 4; the host's end is `child.stdio[4]`. */
export function spawnBackend(env: Record<string, string> = {}, app = "host_tools_app:create_backend"): ChildProcess {
  const child = spawn(python, ["-m", "agentlane_process_bridge", "--app", app], {
    cwd: backendsDir,
    stdio: ["pipe", "pipe", "pipe", "ignore", "pipe"],
    env: backendEnv({ AGENTLANE_HOST_CHANNEL_FD: "4", ...env }),
  });
  children.push(child);
  return child;
}

/** A session attached to a fresh backend with its host channel; diagnostics collected. */
export async function attachedSession(
  options: AttachSessionOptions & { env?: Record<string, string>; app?: string },
): Promise<{ session: AgentSession; child: ChildProcess; diagnostics: SessionDiagnostic[] }> {
  const { env, app, ...rest } = options;
  const child = spawnBackend(env, app);
  const diagnostics: SessionDiagnostic[] = [];
  const session = await attachAgentSession(child, {
    onDiagnostic: (d) => diagnostics.push(d),
    ...rest,
    hostChannel: child.stdio[4] as Socket,
  });
  return { session, child, diagnostics };
}

/** How a test's session gets its backend: attached (the test spawns it), or started by the session cold or warm. */
export type StartMode = "attached" | "cold" | "warm";
export const START_MODES: StartMode[] = ["attached", "cold", "warm"];

/** Ends the warm servers the tests started (afterAll). */
export const closeServers = () => closeWarmServers();

/**
 * A session on a fresh backend in `mode`; `kill()` SIGKILLs the backend
 * (the attached child, or the started backend's pid).
 */
export async function sessionIn(
  mode: StartMode,
  options: AttachSessionOptions & { env?: Record<string, string>; app?: string },
): Promise<{ session: AgentSession; diagnostics: SessionDiagnostic[]; kill: () => Promise<void> }> {
  if (mode === "attached") {
    const { session, child, diagnostics } = await attachedSession(options);
    return { session, diagnostics, kill: async () => void (child.kill("SIGKILL"), await new Promise((resolve) => (child.exitCode !== null ? resolve(null) : child.once("exit", resolve)))) };
  }
  const { env, app, ...rest } = options;
  const diagnostics: SessionDiagnostic[] = [];
  const session = await createAgentSession({
    onDiagnostic: (d) => diagnostics.push(d),
    ...rest,
    backend: {
      command: python,
      args: ["-m", "agentlane_process_bridge", "--app", app ?? "host_tools_app:create_backend"],
      cwd: backendsDir,
      env: backendEnv(env),
      ...(mode === "warm" ? { warm: { fallback: "error" as const } } : {}),
    },
  });
  return {
    session,
    diagnostics,
    kill: async () => {
      const pid = session.process?.pid;
      if (pid !== undefined) process.kill(pid, "SIGKILL");
      await new Promise<void>((resolve) => session.close().then(resolve));
    },
  };
}

/** The scripted model's prompt that calls each tool once in one turn. */
export function calls(...list: Array<[name: string, args: object]>): string {
  return `calls ${JSON.stringify(list.map(([name, args]) => ({ name, arguments: args })))}`;
}
