/**
 * The session layer (docs/protocol.md §9.5): `createAgentSession` spawns a
 * backend and hosts a conversation on it; `attachAgentSession` hosts one on
 * a process the application already has. Both are one controller
 * (`controller.ts`) over a backend from the start seam (`backend.ts`:
 * spawned, or attached in `attach.ts`); `operations.ts` is what the
 * application calls.
 */
import { RuntimePermissionError, SessionStartError } from "../errors";
import type { JsonObject } from "../protocol";
import { resolveBackendSpec } from "../process";
import { resolveStart, type StartPlan } from "../spawn/start-plan";
import { startedBackend } from "./backend";
import { attachedBackend, notAttachable, type AgentProcessLike } from "./attach";
import { checkedBackend, checkSessionOptions } from "./backend-spec";
import { likelyCause } from "./diagnose";
import { SessionController } from "./controller";
import { resumeInto } from "../tools/resume";
import { laterStartSlot, withStartSlot } from "./start-slots";
import type { AgentSession, AgentSessionOptions, AttachSessionOptions } from "./types";

/**
 * Spawns the backend, waits for `ready` and resolves with the session handle
 * (§9.5.4 startup). Rejects with `SessionStartError` if startup fails.
 */
export function createAgentSession<TConfig = JsonObject, TConfigPatch = Partial<TConfig>>(
  options: AgentSessionOptions<TConfig, TConfigPatch>,
): Promise<AgentSession<TConfig, TConfigPatch>> {
  if (options?.resume !== undefined) return resumeInto(options).then(createAgentSession<TConfig, TConfigPatch>, startError);
  let controller: SessionController<TConfig, TConfigPatch>;
  let plan: StartPlan;
  let open;
  // A warm start that falls back cold takes a slot then, like every cold start.
  const fallbackSlot = laterStartSlot();
  try {
    checkSessionOptions(options);
    controller = new SessionController<TConfig, TConfigPatch>(options);
    // The host channel is declared when the session has something to serve over it (tools, a store):
    // cold or warm, the backend gets it at fd 4 and its host end comes through onHostChannel.
    const hostChannel = controller.hostChannel !== undefined;
    if (hostChannel && process.platform === "win32") throw new SessionStartError(NO_CHANNEL_HERE, "no-host-channel");
    if (hostChannel && process.versions.bun !== undefined) throw new SessionStartError(NO_CHANNEL_BUN, "no-host-channel");
    // The start, resolved once: every layer below takes this plan.
    plan = resolveStart({ termGraceMs: controller.termGraceMs, ...resolveBackendSpec(checkedBackend(options.backend)), flow: controller.flow, ...(hostChannel ? { hostChannel } : {}) }, "backend.");
    const notify = controller.notify;
    open = startedBackend(plan, (diagnostic) => notify.diagnostic(diagnostic), { coldSlot: fallbackSlot.take, readyTimeoutMs: options.readyTimeoutMs ?? 30_000 });
  } catch (error) {
    if (error instanceof SessionStartError) return Promise.reject(error);
    // A runtime that may not start the backend (Deno's permissions) is a failed spawn, not a bad spec.
    const code = error instanceof RuntimePermissionError ? "spawn-failed" : "invalid-spec";
    return Promise.reject(new SessionStartError(error instanceof Error ? error.message : String(error), code, { cause: error }));
  }
  const { command } = plan.options;
  const signal = options.signal;
  if (signal?.aborted) return Promise.reject(aborted(signal, "before it began"));
  // A warm start forks in milliseconds and takes no slot (unless it falls
  // back cold); a cold one holds one of the host's start slots
  // (start-slots.ts) until it is ready or has failed.
  if (plan.warm !== undefined) {
    const started = controller.start(command, open);
    started.then(fallbackSlot.release, fallbackSlot.release);
    return started;
  }
  const cold = open;
  const start = (release: () => void) => {
    const started = controller.start(command, cold);
    started.then(release, release);
    return started;
  };
  return withStartSlot(start, signal && { signal, error: () => aborted(signal, "while it waited for a start slot") });
}

const NO_CHANNEL_HERE = "Tools and a store travel over the host channel, a Unix socket pair: not available on Windows.";
// Bun 1.4 reads nothing from a net.Socket made on a descriptor (lib/spawn/control.ts): a started
// backend's channel would never be read. attachAgentSession with the application's own socket is not
// refused (its socket is the runtime's own).
const NO_CHANNEL_BUN =
  "Tools and a store travel over the host channel, which Bun (1.4) cannot read on a started backend (a net.Socket on a descriptor reads nothing there): " +
  "use Node or Deno, or attachAgentSession with a socket Bun made.";
const NO_CHANNEL_ATTACHED =
  "The session gives the agent tools or a store, which travel over the host channel: pass its host end as hostChannel " +
  '(spawn the backend with stdio ["pipe", "pipe", "pipe", "ignore", "pipe"], AGENTLANE_HOST_CHANNEL_FD=4, and pass child.stdio[4]).';

/** A failure before the start as the start's error. */
function startError(error: unknown): never {
  if (error instanceof SessionStartError) throw error;
  throw new SessionStartError(error instanceof Error ? error.message : String(error), "invalid-spec", { cause: error });
}

/**
 * A start called off through its `signal` before anything was started
 * (the controller fails a start under way the same way, `aborted`, and
 * kills what it started).
 */
function aborted(signal: AbortSignal, when: string): SessionStartError {
  return new SessionStartError(`The start was aborted ${when}.`, "aborted", { cause: signal.reason });
}

/**
 * Hosts a session on a process the application already has (a
 * `ChildProcess` it spawned its own way, or any object with `stdin`,
 * `stdout`, optional `stderr`, optional `kill`, and `exit`/`close`/`error`
 * events): the same options (without `backend`), callbacks, errors,
 * promises and close semantics as `createAgentSession`. Its stdout and
 * stderr are judged in each chunk's `data` handling; containment is what
 * its `kill` does. Rejects with `SessionStartError` (`invalid-spec` for an
 * object that is not process-like).
 */
export function attachAgentSession<TConfig = JsonObject, TConfigPatch = Partial<TConfig>>(
  child: AgentProcessLike,
  options: AttachSessionOptions<TConfig, TConfigPatch> = {},
): Promise<AgentSession<TConfig, TConfigPatch>> {
  const problem = notAttachable(child);
  if (problem !== undefined) return refusedAttach(child, problem);
  if (options.resume !== undefined) return resumeInto(options).then((resumed) => attachAgentSession<TConfig, TConfigPatch>(child, resumed), startError);
  try {
    checkSessionOptions(options);
  } catch (error) {
    return Promise.reject(new SessionStartError((error as Error).message, "invalid-spec", { cause: error }));
  }
  // Nothing is attached: the process stays the application's, untouched.
  if (options.signal?.aborted) return Promise.reject(aborted(options.signal, "before it began"));
  let controller: SessionController<TConfig, TConfigPatch>;
  try {
    controller = new SessionController<TConfig, TConfigPatch>(options as AgentSessionOptions<TConfig, TConfigPatch>);
  } catch (error) {
    return Promise.reject(error);
  }
  if (controller.hostChannel !== undefined) {
    if (options.hostChannel === undefined) return Promise.reject(new SessionStartError(NO_CHANNEL_ATTACHED, "no-host-channel"));
    controller.hostChannel.serve(options.hostChannel);
  }
  const program = (child as { spawnfile?: unknown }).spawnfile;
  return controller.start(typeof program === "string" ? program : "the attached process", attachedBackend(child, options, controller.flow));
}

/**
 * An object that cannot be attached. A ChildProcess whose spawn failed for
 * want of descriptors has no stdio, and its `error` event is still to
 * come: that error is the rejection (spawn-failed), and it must not reach
 * the application as an unhandled `error` event.
 */
function refusedAttach(child: unknown, problem: string): Promise<never> {
  const emitter = child as { once?: (event: "error", listener: (error: Error) => void) => unknown } | null;
  if (emitter === null || typeof emitter !== "object" || typeof emitter.once !== "function") {
    return Promise.reject(new SessionStartError(problem, "invalid-spec"));
  }
  return new Promise((_, reject) => {
    const refuse = setImmediate(() => reject(new SessionStartError(problem, "invalid-spec")));
    emitter.once!("error", (error: Error) => {
      clearImmediate(refuse);
      const cause = likelyCause({ code: "spawn-failed", command: String((child as { spawnfile?: unknown }).spawnfile ?? "the attached process"), spawnError: error, exitCode: null, stderrTail: [] });
      reject(new SessionStartError(error.message, "spawn-failed", { cause: error, likelyCause: cause }));
    });
  });
}
