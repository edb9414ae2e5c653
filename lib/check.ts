/**
 * `checkBackend`: the two-step check of a backend, as an API (and the
 * `process-bridge-native check` command in `cli.ts`).
 *
 * Step 1 starts it and waits for `ready` with a supported protocol version;
 * step 2, when asked, runs one real prompt whose approvals a given policy
 * answers. Beside them, the containment: a platform package that should
 * ship the native supervisor and does not fails the check (`supervisor`),
 * since its backends would run, silently, in the weaker grouped mode. The result is a structured report, never an exception, and no
 * process of the backend is left behind: the session is closed and every
 * pid it reported is checked.
 */
import type { ApprovalPolicy, ApprovalResolution, ReadyInfo, RunResult, ToolActivity } from "./session/types";
import { createAgentSession } from "./session/index";
import { AgentSessionError, SessionStartError } from "./errors";
import type { BackendProcess, BackendSpec, ContainmentMode } from "./process";
import { checkHostTool, type HostToolCheck } from "./check-host-tool";

export interface CheckOptions {
  /** Step 2: one prompt to run (leave it out for step 1 only). */
  prompt?: string;
  /** Answers the approvals of step 2 (default: deny each). */
  approvals?: ApprovalPolicy;
  /** Default 30000. */
  readyTimeoutMs?: number;
  /** How long step 2 may take (default 60000); the run is cancelled after. */
  runTimeoutMs?: number;
  /**
   * Last step: a conversation in which the agent calls the host's own
   * `lookup` tool and its result must reach the final answer (the factory
   * needs `shims=[host.tools()]`). `true`, or the prompt to use.
   */
  hostTool?: boolean | { prompt?: string };
}

export interface CheckReport {
  /** Every step that ran passed. */
  ok: boolean;
  start: {
    ok: boolean;
    ms: number;
    ready?: ReadyInfo;
    error?: { code: string; message: string; likelyCause?: string; exitCode: number | null; signal: string | null; stderrTail: string[] };
  };
  run?: {
    ok: boolean;
    ms: number;
    result?: RunResult;
    approvals: (ApprovalResolution & { tool: string })[];
    tools: { tool: string; ok: boolean; result: unknown }[];
    error?: { code: string; message: string };
  };
  /**
   * How the backend was contained (`process.mode`); `ok` is false when this
   * platform's package lacks its supervisor (the session's
   * `supervisor-missing` diagnostic).
   */
  supervisor: {
    ok: boolean;
    mode?: ContainmentMode;
    error?: { code: "supervisor-missing"; errno: "ENOENT" | "EACCES"; path: string; message: string };
  };
  /** The host tool step, when asked (`hostTool`). */
  hostTool?: HostToolCheck;
  /** Processes of the backend still running after the check (0 when all went well). */
  processesLeft: number;
}

/** Runs the two-step check; resolves with the report, never rejects. */
export async function checkBackend(backend: BackendSpec, options: CheckOptions = {}): Promise<CheckReport> {
  const started = Date.now();
  const tools: NonNullable<CheckReport["run"]>["tools"] = [];
  const approvals: NonNullable<CheckReport["run"]>["approvals"] = [];
  const stderr: string[] = [];
  const supervisor: CheckReport["supervisor"] = { ok: true };
  let session;
  try {
    session = await createAgentSession({
      backend,
      readyTimeoutMs: options.readyTimeoutMs ?? 30_000,
      approvals: options.approvals ?? (() => ({ allowed: false, reason: "Denied by the check." })),
      onToolActivity: (activity: ToolActivity) => {
        if (activity.phase === "end") tools.push({ tool: activity.call.tool, ok: activity.ok, result: activity.result });
      },
      onApprovalResolved: (resolution) => approvals.push({ ...resolution, tool: resolution.request.tool_name }),
      onDiagnostic: (diagnostic) => {
        if (diagnostic.kind === "stderr") stderr.push(diagnostic.line);
        if (diagnostic.kind === "supervisor-missing") {
          supervisor.ok = false;
          supervisor.error = { code: "supervisor-missing", errno: diagnostic.code, path: diagnostic.path, message: diagnostic.message };
        }
      },
    });
  } catch (error) {
    const start = error instanceof SessionStartError ? error : new SessionStartError(String(error), "spawn-failed", { cause: error });
    return {
      ok: false,
      start: {
        ok: false,
        ms: Date.now() - started,
        error: {
          code: start.code,
          message: start.message,
          likelyCause: start.likelyCause,
          exitCode: start.exitCode,
          signal: start.signal,
          stderrTail: [...start.stderrTail],
        },
      },
      supervisor,
      processesLeft: 0,
    };
  }
  const processes = session.process;
  supervisor.mode = processes?.mode;
  const report: CheckReport = { ok: supervisor.ok, start: { ok: true, ms: Date.now() - started, ready: session.ready }, supervisor, processesLeft: 0 };
  try {
    if (options.prompt !== undefined) {
      const runStarted = Date.now();
      const timeout = AbortSignal.timeout(options.runTimeoutMs ?? 60_000);
      try {
        const result = await session.run(options.prompt, { signal: timeout });
        const timedOut = timeout.aborted && result.status === "cancelled";
        report.run = {
          ok: !timedOut,
          ms: Date.now() - runStarted,
          result,
          approvals,
          tools,
          ...(timedOut ? { error: { code: "run-timeout", message: `The run did not end within ${options.runTimeoutMs ?? 60_000} ms.` } } : {}),
        };
      } catch (error) {
        const code = error instanceof AgentSessionError ? error.code : "unknown";
        report.run = { ok: false, ms: Date.now() - runStarted, approvals, tools, error: { code, message: error instanceof Error ? error.message : String(error) } };
      }
      report.ok = report.ok && report.run.ok;
    }
  } finally {
    await session.close();
  }
  report.processesLeft = await processesLeft(processes);
  if (report.processesLeft > 0) report.ok = false;
  if (options.hostTool) {
    const prompt = typeof options.hostTool === "object" ? options.hostTool.prompt : undefined;
    report.hostTool = await checkHostTool(backend, { prompt, readyTimeoutMs: options.readyTimeoutMs, runTimeoutMs: options.runTimeoutMs });
    report.ok = report.ok && report.hostTool.ok;
  }
  return report;
}

/** How many of the session's processes still run, after a moment to exit. */
async function processesLeft(processes: BackendProcess | undefined): Promise<number> {
  const pids = [processes?.pid, processes?.supervisorPid].filter((pid): pid is number => pid !== undefined);
  const running = () => pids.filter((pid) => isRunning(pid)).length;
  for (let waited = 0; waited < 2000 && running() > 0; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
  return running();
}

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie (Linux) has exited: it only waits for its parent to reap it.
  try {
    return !/\) Z/.test(require("node:fs").readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return true;
  }
}
