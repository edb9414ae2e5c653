/**
 * The child process behind the testing kit (`./index.ts`): a tiny backend in
 * plain Node, no Python, that speaks the bridge protocol.
 *
 *   node backend.js scripted <script.json> <log.json>
 *   node backend.js replay <transcript.ndjson> <log.json>
 *
 * `scripted` answers each prompt with the next run of the script (the last
 * one repeats) and the other commands as the real backend does; `replay`
 * writes a recorded transcript's events and checks each command the host
 * sends against the recording. Either way, every command received (and, for
 * a replay, every mismatch) is written to the log file as it happens.
 */
import { readFileSync, writeFileSync, writeSync } from "node:fs";
import { HostChannelClient } from "./host-channel-client";
import { MODEL_EVENT_NULLS, nativeRecord } from "./wire";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Obj = { [key: string]: Json };

/** A step of a scripted run (see `ScriptedStep` in `./index.ts`). */
interface Step {
  text?: string;
  reasoning?: string;
  tool?: string;
  hostTool?: string;
  args?: Obj;
  result?: Json;
  approval?: boolean | { reason?: string; operation?: string; path?: string };
  plan?: { step: string; status: string }[];
  record?: Obj;
  event?: Obj;
  fail?: string;
  delayMs?: number;
}
interface Run {
  steps: Step[];
  final?: Json;
}
interface Script {
  ready?: { version?: string; metadata?: Obj; config?: Obj };
  runs?: Run[];
  configure?: "accept" | "reject";
}

const [mode, source, logFile] = process.argv.slice(2);
const log: { commands: Obj[]; mismatches: string[] } = { commands: [], mismatches: [] };
const saveLog = () => writeFileSync(logFile, JSON.stringify(log));
let ts = 1_700_000_000;

function write(text: string): void {
  const buffer = Buffer.from(text);
  for (let at = 0; at < buffer.length; ) {
    try {
      at += writeSync(1, buffer, at);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EAGAIN") throw error;
    }
  }
}

const emit = (event: Obj) => write(`${JSON.stringify({ protocol_version: "1.0", ts: (ts += 0.001), ...event })}\n`);
const lineage = { task_name: "Scripted", task_id: "task-1", parent_task_id: null, is_root: true };
const record = (kind: string, payload: Obj): Obj => nativeRecord(kind, payload) as unknown as Obj;
const modelEvent = (kind: string, fields: Obj): Obj => ({ kind, ...MODEL_EVENT_NULLS, ...fields });
const toolCall = (id: string, name: string, args: Obj): Obj => ({ id, type: "function", function: { name, arguments: JSON.stringify(args) } });
const result = (finalOutput: Json): Obj => ({ final_output: finalOutput, responses: [], turn_count: 1, run_state: null });

/** Reads commands from stdin, one JSON object a line; `onCommand` gets each (after it is logged). */
function readCommands(onCommand: (command: Obj) => void, onEnd: () => void): void {
  let buffered = "";
  process.stdin.setEncoding("utf8");
  process.stdin.on("data", (chunk: string) => {
    buffered += chunk;
    for (let end = buffered.indexOf("\n"); end >= 0; end = buffered.indexOf("\n")) {
      const line = buffered.slice(0, end);
      buffered = buffered.slice(end + 1);
      let command: Obj;
      try {
        command = JSON.parse(line) as Obj;
      } catch {
        emit({ type: "error", message: "Invalid JSON command.", scope: "command" });
        continue;
      }
      log.commands.push(command);
      saveLog();
      onCommand(command);
    }
  });
  process.stdin.on("end", onEnd);
}

// ---- scripted ------------------------------------------------------------------

/** A run in progress: how to stop it, and the approval it waits for. */
interface ActiveRun {
  cancelled: boolean;
  /** A host tool call it waits for (cancelled with the run). */
  hostCall?: string;
  waiting?: { id: string; decide: (allowed: boolean, reason?: string) => void };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Answers prompts with the script's runs, and the other commands as the real backend does. */
class ScriptedBackend {
  private config: Obj;
  private readonly runs: Run[];
  private runIndex = 0;
  private approvals = 0;
  private active: ActiveRun | undefined;
  /** The host channel, when the host gave one: the tools are listed before `ready`, as the module does. */
  private readonly channel = HostChannelClient.open();

  constructor(private readonly script: Script) {
    this.config = script.ready?.config ?? {};
    this.runs = script.runs ?? [{ steps: [{ text: "Hello from the scripted backend." }] }];
  }

  async start(): Promise<void> {
    if (this.channel) await this.channel.request("list_tools").reply;
    const ready = this.script.ready;
    emit({ type: "ready", version: ready?.version ?? "0.0.0-scripted", package: "agentlane-process-bridge", metadata: ready?.metadata ?? {}, ...(ready?.config ? { config: this.config } : {}) });
    readCommands(
      (command) => this.onCommand(command),
      () => process.exit(0),
    );
  }

  /** One scripted run: its steps in order, then its completion (unless cancelled). */
  private async run(prompt: string, plan: Run): Promise<void> {
    const state: ActiveRun = { cancelled: false };
    this.active = state;
    emit({ type: "run_start", prompt });
    emit(record("agent_start", lineage));
    // The final output is the last model turn's text: a tool or plan step ends a turn.
    let text = "";
    let callCount = 0;
    for (const step of plan.steps) {
      if (state.cancelled) return;
      if (step.delayMs) await sleep(step.delayMs);
      if (state.cancelled) return;
      if (step.text !== undefined) {
        text += step.text;
        emit(record("model_stream", { event: modelEvent("text_delta", { text: step.text }) }));
      } else if (step.reasoning !== undefined) {
        emit(record("model_stream", { event: modelEvent("reasoning", { text: step.reasoning, reasoning: step.reasoning }) }));
      } else if (step.plan) {
        text = "";
        emit(record("plan_updated", { ...lineage, tool_call: toolCall(`call-${++callCount}`, "write_plan", {}), plan: step.plan, explanation: null }));
      } else if (step.record) {
        emit({ type: "run_event", event: step.record });
      } else if (step.event) {
        emit(step.event);
      } else if (step.fail !== undefined) {
        emit({ type: "error", message: step.fail, scope: "run" });
        this.active = undefined;
        return;
      } else if (step.hostTool) {
        text = "";
        if (!(await this.hostToolStep(state, step, toolCall(`call-${++callCount}`, step.hostTool, step.args ?? {})))) return;
      } else if (step.tool) {
        text = "";
        if (!(await this.toolStep(state, step, toolCall(`call-${++callCount}`, step.tool, step.args ?? {})))) return;
      }
    }
    if (state.cancelled) return;
    const finalOutput = plan.final !== undefined ? plan.final : text;
    emit(record("agent_end", { ...lineage, result: result(finalOutput) }));
    emit({ type: "run_complete", final_output: finalOutput, turn_count: 1, response_count: 1, shim_state: {} });
    this.active = undefined;
  }

  /**
   * A tool step: `tool_start`, with `approval` a pending record and the wait
   * for the host's answer (then the resolved record), then `tool_end`.
   * False when the run was cancelled meanwhile.
   */
  private async toolStep(state: ActiveRun, step: Step, call: Obj): Promise<boolean> {
    emit(record("tool_start", { ...lineage, tool_call: call, is_delegation: false }));
    let allowed = true;
    let reason: string | undefined;
    if (step.approval) {
      const id = `tool-approval-${++this.approvals}`;
      const details = typeof step.approval === "object" ? step.approval : {};
      const request = {
        tool_name: step.tool!,
        operation: details.operation ?? "call",
        cwd: process.cwd(),
        path: details.path ?? null,
        command: null,
        skill_name: null,
        reason: details.reason ?? null,
        run_id: null,
        agent_name: "Scripted",
        tool_call_id: call.id,
        metadata: {},
      };
      const approvalRecord = (status: string, final: Obj | null) =>
        record("tool_approval", { event: { record: { request_id: id, request, approval_required_decision: { outcome: "require_approval", reason: details.reason ?? null }, status, final_decision: final } } });
      emit(approvalRecord("pending", null));
      [allowed, reason] = await new Promise<[boolean, string | undefined]>((resolve) => {
        state.waiting = { id, decide: (a, r) => resolve([a, r]) };
      });
      state.waiting = undefined;
      if (state.cancelled) return false;
      emit(approvalRecord("resolved", { outcome: allowed ? "allow" : "deny", reason: allowed ? null : (reason ?? "Denied by bridge client.") }));
    }
    const denied = allowed ? null : { message: reason ?? "Denied by bridge client.", kind: "permission_denied" };
    emit(record("tool_end", { ...lineage, tool_call: call, is_delegation: false, result: denied ? null : (step.result ?? "ok"), ok: !denied, error: denied }));
    return true;
  }

  /** A host tool step: `tool_start`, the call over the host channel, `tool_end` with the host's result or failure. */
  private async hostToolStep(state: ActiveRun, step: Step, call: Obj): Promise<boolean> {
    emit(record("tool_start", { ...lineage, tool_call: call, is_delegation: false }));
    let reply: { type: "result"; value: Json } | { type: "error"; error: { kind: string; message: string } };
    if (this.channel === undefined) {
      reply = { type: "error", error: { kind: "no-channel", message: "The host gave this backend no host channel." } };
    } else {
      const request = this.channel.request("call_tool", { name: step.hostTool!, arguments: step.args ?? {}, tool_call_id: call.id as string, run_id: "scripted-run" });
      state.hostCall = request.id;
      reply = await request.reply;
      state.hostCall = undefined;
    }
    if (state.cancelled) return false;
    const error = reply.type === "error" ? { message: reply.error.message, kind: reply.error.kind } : null;
    emit(record("tool_end", { ...lineage, tool_call: call, is_delegation: false, result: reply.type === "result" ? reply.value : null, ok: error === null, error }));
    return true;
  }

  /** Ends the active run as cancelled; false when there is none. */
  private cancelActive(): boolean {
    const active = this.active;
    if (!active) return false;
    active.cancelled = true;
    active.waiting?.decide(false);
    if (active.hostCall !== undefined) this.channel?.cancel(active.hostCall);
    this.active = undefined;
    emit({ type: "run_cancelled" });
    return true;
  }

  private onCommand(command: Obj): void {
    switch (command.type) {
      case "prompt": {
        const prompt = String(command.text ?? "").trim();
        if (prompt === "") return emit({ type: "error", message: "Prompt must not be empty.", scope: "command" });
        if (this.active) return emit({ type: "error", message: "A run is already active.", scope: "command" });
        const plan = this.runs[Math.min(this.runIndex++, this.runs.length - 1)];
        void this.run(prompt, plan);
        return;
      }
      case "approve": {
        const waiting = this.active?.waiting;
        if (!waiting || waiting.id !== command.id) {
          return emit({ type: "error", message: `No pending approval request for id ${String(command.id ?? "")}.`, scope: "command" });
        }
        waiting.decide(command.allowed === true, typeof command.reason === "string" && command.reason !== "" ? command.reason : undefined);
        return;
      }
      case "cancel":
        if (!this.active) return emit({ type: "cancel_ignored", reason: "no active run" });
        emit({ type: "cancel_requested" });
        this.cancelActive();
        return;
      case "reset":
        this.cancelActive();
        return emit({ type: "reset", ...(this.script.ready?.config ? { config: this.config } : {}) });
      case "configure":
        return this.configure(command.patch);
      case "shutdown":
        this.cancelActive();
        emit({ type: "shutdown" });
        process.exit(0);
        return;
      default:
        emit({ type: "error", message: `Unknown command: ${String(command.type)}`, scope: "command" });
    }
  }

  private configure(patch: Json | undefined): void {
    if (patch === null || typeof patch !== "object" || Array.isArray(patch)) {
      return emit({ type: "config", ok: false, error: { code: "invalid", message: "Configure command patch must be a JSON object." }, config: this.config });
    }
    if (this.script.configure === "reject") {
      return emit({ type: "config", ok: false, error: { code: "rejected", message: "Runtime configuration was rejected." }, config: this.config });
    }
    this.config = { ...this.config, ...patch };
    emit({ type: "config", ok: true, error: null, config: this.config });
  }
}

// ---- replay --------------------------------------------------------------------

/** One entry of a transcript: a line the backend wrote, or a command the host sent. */
type Entry = { out: string } | { in: Obj };

function replay(entries: Entry[]): void {
  let at = 0;
  let received = 0;
  const writeUntilCommand = () => {
    while (at < entries.length && "out" in entries[at]) write(`${(entries[at++] as { out: string }).out}\n`);
  };
  writeUntilCommand();
  readCommands(
    (command) => {
      received++;
      const expected = entries[at];
      if (expected === undefined || !("in" in expected)) {
        log.mismatches.push(`unexpected command ${JSON.stringify(command)}: the transcript has no more commands`);
      } else if (!sameCommand(expected.in, command)) {
        log.mismatches.push(`command ${received}: expected ${JSON.stringify(expected.in)}, got ${JSON.stringify(command)}`);
        at++;
      } else {
        at++;
      }
      saveLog();
      writeUntilCommand();
      if (command.type === "shutdown") process.exit(0);
    },
    () => {
      if (entries.slice(at).some((entry) => "in" in entry)) {
        log.mismatches.push(`the host ended before sending ${JSON.stringify((entries.slice(at).find((entry) => "in" in entry) as { in: Obj }).in)}`);
      }
      saveLog();
      process.exit(0);
    },
  );
}

/** A command matches its recording when every recorded field (but the version) is equal. */
function sameCommand(expected: Obj, got: Obj): boolean {
  const strip = ({ protocol_version: _version, ...rest }: Obj) => rest;
  return JSON.stringify(sortKeys(strip(expected))) === JSON.stringify(sortKeys(strip(got)));
}

function sortKeys(value: Json): Json {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value === null || typeof value !== "object") return value;
  return Object.fromEntries(Object.keys(value).sort().map((key) => [key, sortKeys(value[key])]));
}

saveLog();
if (mode === "scripted") void new ScriptedBackend(JSON.parse(readFileSync(source, "utf8")) as Script).start();
else if (mode === "replay") replay(readFileSync(source, "utf8").split("\n").filter((line) => line.trim() !== "").map((line) => JSON.parse(line) as Entry));
else {
  process.stderr.write(`backend.js: unknown mode ${mode}\n`);
  process.exit(2);
}
