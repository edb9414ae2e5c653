#!/usr/bin/env node
/**
 * `process-bridge-native check`: the two-step check of a backend from the
 * command line (see `check.ts`).
 *
 * ```text
 * process-bridge-native check --app module:factory [--project-dir D] [--python P]
 *                             [--prompt TEXT] [--allow | --deny] [--json] [--timeout-ms N]
 * process-bridge-native check [options] -- <command> [args…]
 * ```
 *
 * Without `--python` an `--app` backend is started with `uv run` in its
 * project (the `{ app, projectDir }` spec); with it, that Python runs
 * `-m agentlane_process_bridge`. Exit status 0 when every step passed, 1
 * when one failed, 2 for a usage error. `--help` / `-h` (anywhere before a
 * `--`, with or without `check`) prints the usage on stdout and exits 0.
 */
import { parseArgs } from "node:util";
import { checkBackend, type CheckReport } from "./check";
import { checkMilliseconds } from "./options";
import type { BackendSpec } from "./process";

const USAGE = `usage: process-bridge-native check --app module:factory [--project-dir DIR] [--python PATH]
                                   [--prompt TEXT] [--allow | --deny] [--host-tool [--host-tool-prompt TEXT]]
                                   [--json] [--timeout-ms N]
       process-bridge-native check [options] -- <command> [args...]

  step 1: start the backend, wait for ready, check its protocol version
  step 2 (with --prompt): one real prompt; approvals are denied, or allowed with --allow
  step 3 (with --host-tool): a conversation in which the agent calls the host's own tool
         lookup and its result reaches the final answer (the factory needs shims=[host.tools()])
  also: the native supervisor is checked (a platform package that should ship one and
        does not fails the check: the backend would run without its containment)

  -h, --help   this text`;

/** `--help` or `-h` before any `--` (after it, the words are the backend's). */
function wantsHelp(argv: string[]): boolean {
  const end = argv.indexOf("--");
  return (end === -1 ? argv : argv.slice(0, end)).some((word) => word === "--help" || word === "-h");
}

async function main(argv: string[]): Promise<number> {
  if (wantsHelp(argv)) {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  const [subcommand, ...rest] = argv;
  if (subcommand !== "check") {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  let parsed;
  try {
    parsed = parseArgs({
      args: rest,
      allowPositionals: true,
      options: {
        app: { type: "string" },
        "project-dir": { type: "string" },
        python: { type: "string" },
        prompt: { type: "string" },
        allow: { type: "boolean" },
        deny: { type: "boolean" },
        json: { type: "boolean" },
        "timeout-ms": { type: "string" },
        "host-tool": { type: "boolean" },
        "host-tool-prompt": { type: "string" },
      },
    });
  } catch (error) {
    process.stderr.write(`process-bridge-native: ${error instanceof Error ? error.message : String(error)}\n${USAGE}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  let backend: BackendSpec;
  const projectDir = values["project-dir"];
  if (positionals.length > 0) {
    backend = { command: positionals[0], args: positionals.slice(1), cwd: projectDir };
  } else if (values.app !== undefined && values.python !== undefined) {
    backend = { command: values.python, args: ["-m", "agentlane_process_bridge", "--app", values.app], cwd: projectDir };
  } else if (values.app !== undefined) {
    backend = { app: values.app, projectDir };
  } else {
    process.stderr.write(`process-bridge-native: give --app module:factory or -- <command> [args...]\n${USAGE}\n`);
    return 2;
  }
  const rawTimeout = values["timeout-ms"];
  // Number("") is 0: an empty value is as unusable as "abc".
  const timeoutMs = rawTimeout === undefined ? undefined : rawTimeout.trim() === "" ? Number.NaN : Number(rawTimeout);
  try {
    checkMilliseconds("--timeout-ms", timeoutMs);
  } catch (error) {
    process.stderr.write(`process-bridge-native: ${(error as Error).message}\n${USAGE}\n`);
    return 2;
  }
  const report = await checkBackend(backend, {
    prompt: values.prompt,
    approvals: () => (values.allow ? true : { allowed: false, reason: "Denied by the check." }),
    readyTimeoutMs: timeoutMs,
    runTimeoutMs: timeoutMs,
    hostTool: values["host-tool"] || values["host-tool-prompt"] !== undefined ? { prompt: values["host-tool-prompt"] } : undefined,
  });
  process.stdout.write(values.json ? `${JSON.stringify(report, null, 2)}\n` : describe(report));
  return report.ok ? 0 : 1;
}

/** The report as a person reads it. */
function describe(report: CheckReport): string {
  const out: string[] = [];
  const { start, run } = report;
  if (start.ok) {
    out.push(`step 1 ok: the backend is ready in ${start.ms} ms (agentlane ${start.ready?.version}, ${start.ready?.package}, protocol 1.x)`);
  } else {
    out.push(`step 1 FAILED (${start.error?.code}): ${start.error?.message}`);
    if (start.error?.likelyCause) out.push(`  likely cause: ${start.error.likelyCause}`);
    if (start.error && (start.error.exitCode !== null || start.error.signal !== null)) {
      out.push(`  exit: code ${start.error.exitCode}, signal ${start.error.signal}`);
    }
    for (const line of start.error?.stderrTail ?? []) out.push(`  stderr: ${line}`);
  }
  if (run) {
    const status = run.result ? run.result.status : "failed";
    out.push(`step 2 ${run.ok ? "ok" : "FAILED"}: the run ended ${status} in ${run.ms} ms`);
    for (const approval of run.approvals) {
      out.push(`  approval of ${approval.tool}: ${approval.allowed ? "allowed" : "denied"}${approval.reason ? ` (${approval.reason})` : ""}`);
    }
    for (const tool of run.tools) out.push(`  tool ${tool.tool}: ${tool.ok ? "ok" : "failed"}, result ${JSON.stringify(tool.result)}`);
    if (run.result?.status === "completed") out.push(`  final answer: ${JSON.stringify(run.result.finalOutput)}`);
    if (run.error) out.push(`  ${run.error.code}: ${run.error.message}`);
  }
  const tool = report.hostTool;
  if (tool) {
    out.push(`step 3 ${tool.ok ? "ok" : `FAILED (${tool.error?.code})`}: the agent ${tool.called ? "called" : "did not call"} the host's own tool lookup (${tool.ms} ms)`);
    if (tool.finalOutput !== undefined) out.push(`  final answer: ${JSON.stringify(tool.finalOutput)}`);
    if (tool.error) out.push(`  ${tool.error.message}`);
  }
  const { supervisor } = report;
  if (supervisor.error) out.push(`supervisor FAILED (${supervisor.error.code}, ${supervisor.error.errno}): ${supervisor.error.message}`);
  else if (supervisor.mode) out.push(`supervisor ok: the backend ran ${supervisor.mode}`);
  if (report.processesLeft > 0) out.push(`FAILED: ${report.processesLeft} process(es) of the backend still running after the check`);
  out.push(report.ok ? "check passed" : "check failed");
  return `${out.join("\n")}\n`;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`process-bridge-native: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
