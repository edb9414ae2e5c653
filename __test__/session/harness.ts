/**
 * Test harness for the session layer: a control server driving the scripted
 * fake backend (fixtures/fake-backend.js), a recorder for every session
 * callback, a spy around `spawnPlanned` (the cold spawn) that exposes the child and the
 * moment the session has processed its exit, and builders for valid events.
 *
 * This module imports only types from lib/ (and the import-free
 * lib/testing/wire.ts and lib/testing/fake-child.ts): it is loaded from
 * inside the `vi.mock("../../lib/process")` factory (spawn-spy.ts), before
 * lib/ itself.
 *
 * Two transports, one set of scenarios: the vitest project "session" runs
 * each suite through `createAgentSession` and a real child
 * (fixtures/fake-backend.js); the project "session-attach" runs the same
 * suites through `attachAgentSession` and an in-memory fake (`MemoryFake`).
 */
import type { ChildProcess } from "node:child_process";
import { createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { fakeBackendChild, type FakeBackendChild } from "../../lib/testing/fake-child";
import { MODEL_EVENT_NULLS, nativeRecord } from "../../lib/testing/wire";
import type {
  AgentSession,
  ApprovalRequestPayload,
  AgentSessionOptions,
  BridgeEvent,
  BridgeProcessCallbacks,
  BridgeProcessOptions,
  SessionDiagnostic,
} from "../../lib/index";
import type { StartPlan } from "../../lib/spawn/start-plan";

export const FAKE_BACKEND = join(__dirname, "..", "fixtures", "fake-backend.js");

/** Upper bound for any single wait; only reached when a test is failing. */
const WAIT_MS = 5_000;

/** Rejects with a clear message if `promise` does not settle in time (a failure guard, not a sleep). */
export function within<T>(promise: Promise<T>, what: string, ms = WAIT_MS): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Lets every queued microtask (promise continuation) run. */
export function flushMicrotasks(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

export type Settled<T> = { status: "fulfilled"; value: T } | { status: "rejected"; error: unknown };

/** Observes a promise without ever leaving a rejection unhandled. */
export class Observed<T> {
  state: Settled<T> | { status: "pending" } = { status: "pending" };
  readonly settled: Promise<Settled<T>>;
  constructor(promise: Promise<T>) {
    this.settled = promise.then(
      (value) => (this.state = { status: "fulfilled", value }),
      (error) => (this.state = { status: "rejected", error }),
    );
  }
  /** Waits for settlement (with a failure guard). */
  result(what = "a promise to settle"): Promise<Settled<T>> {
    return within(this.settled, what);
  }
  async value(what = "a promise to resolve"): Promise<T> {
    const settled = await this.result(what);
    if (settled.status === "rejected") throw settled.error;
    return settled.value;
  }
  async error(what = "a promise to reject"): Promise<unknown> {
    const settled = await this.result(what);
    if (settled.status === "fulfilled") throw new Error(`expected a rejection, got ${JSON.stringify(settled.value)}`);
    return settled.error;
  }
}

export function observe<T>(promise: Promise<T>): Observed<T> {
  return new Observed(promise);
}

// ---- spawn spy ---------------------------------------------------------------

export interface ExitInfo {
  code: number | null;
  signal: string | null;
}

export interface SpawnRecord {
  options: BridgeProcessOptions;
  child: ChildProcess;
  /** Resolves right after the session's own `onExit` callback has returned. */
  exit: Promise<ExitInfo>;
  exited: ExitInfo | undefined;
}

/** Every child spawned through `spawnPlanned` in this test file, in order. */
export const spawned: SpawnRecord[] = [];

type SpawnFn = (plan: StartPlan, callbacks: BridgeProcessCallbacks) => ChildProcess;

/** Wraps the real `spawnPlanned`: records the child and signals when `onExit` has been handled. */
export function spySpawn(actual: SpawnFn): SpawnFn {
  return (plan, callbacks) => {
    let resolveExit!: (info: ExitInfo) => void;
    const record = { options: plan.options, exited: undefined, exit: new Promise<ExitInfo>((r) => (resolveExit = r)) } as unknown as SpawnRecord;
    record.child = actual(plan, {
      ...callbacks,
      onExit: (code, signal) => {
        try {
          callbacks.onExit?.(code, signal);
        } finally {
          record.exited = { code, signal };
          resolveExit({ code, signal });
        }
      },
    });
    spawned.push(record);
    return record.child;
  };
}

// ---- the fake backend and its control channel ---------------------------------

export type Line = string | Record<string, unknown>;
export type Step =
  | { emit: Line[] }
  | { raw: string }
  | { stderr: string[] }
  | { exit: number }
  | { closeStdin: true }
  | { closeStdout: true };

export interface FakeScript {
  start?: Step[];
  on?: Record<string, Step[]>;
  eof?: Step[];
  sigterm?: "exit" | "ignore";
}

/** A command as the fake received it. */
export interface Received {
  command: Record<string, unknown> | null;
  line: string;
}

/** Script options that make the fake die only by SIGKILL (no exit on stdin EOF, SIGTERM ignored). */
export const STUBBORN: FakeScript = { eof: [], sigterm: "ignore" };

/**
 * What both transports' fakes share: the commands they received, read in
 * order by the test (`next`, `expect`, `unread`), and the step shorthands.
 */
abstract class FakeCommands {
  /** Every command received so far, in order. */
  readonly received: Received[] = [];
  private readonly waiters: ((r: Received) => void)[] = [];
  private readCursor = 0;

  /** Runs steps in the fake, in order. */
  abstract steps(...steps: Step[]): void;

  /** Records a command the fake received, for the test's `next`. */
  protected receive(received: Received): void {
    this.received.push(received);
    const waiter = this.waiters.shift();
    if (waiter) {
      this.readCursor++;
      waiter(received);
    }
  }

  /** Writes lines (events as objects, or raw strings) to the fake's stdout. */
  emit(...lines: Line[]): void {
    this.steps({ emit: lines });
  }

  stderr(...lines: string[]): void {
    this.steps({ stderr: lines });
  }

  exit(code: number): void {
    this.steps({ exit: code });
  }

  /** The next command the fake received that the test has not read yet. */
  next(what = "the next command"): Promise<Received> {
    if (this.readCursor < this.received.length) return Promise.resolve(this.received[this.readCursor++]);
    return within(new Promise<Received>((r) => this.waiters.push(r)), what);
  }

  /** The next command, which must be of `type`; returns the parsed command. */
  async expect(type: string): Promise<Record<string, unknown>> {
    const received = await this.next(`a ${type} command`);
    if (received.command?.type !== type) {
      throw new Error(`expected a ${type} command, the fake received ${received.line}`);
    }
    return received.command;
  }

  /** Commands received but not read by `next`/`expect` yet. */
  unread(): Received[] {
    return this.received.slice(this.readCursor);
  }
}

export class Fake extends FakeCommands implements BackendFake {
  readonly spec: BridgeProcessOptions;
  pid: number | undefined;
  /** Resolves when the control connection is up (the fake has started). */
  readonly connected: Promise<void>;
  /** Resolves when the control connection has closed (the fake has exited or was killed). */
  readonly gone: Promise<void>;
  eof = false;

  private socket: Socket | undefined;
  private readonly outbox: string[] = [];
  private syncCounter = 0;
  private readonly syncWaiters = new Map<number, () => void>();
  private resolveConnected!: () => void;
  private resolveGone!: () => void;

  private constructor(private readonly server: Server, port: number, script: FakeScript) {
    super();
    this.spec = { command: process.execPath, args: [FAKE_BACKEND, JSON.stringify({ ...script, control: port })] };
    this.connected = new Promise((r) => (this.resolveConnected = r));
    this.gone = new Promise((r) => (this.resolveGone = r));
    server.on("connection", (socket) => this.attach(socket));
  }

  static launch(script: FakeScript = {}): Promise<Fake> {
    return new Promise((resolve, reject) => {
      const server = createServer();
      server.once("error", reject);
      server.listen(0, "127.0.0.1", () => {
        const address = server.address();
        if (address === null || typeof address === "string") return reject(new Error("no TCP address"));
        resolve(new Fake(server, address.port, script));
      });
    });
  }

  private attach(socket: Socket): void {
    if (this.socket) {
      socket.destroy();
      return;
    }
    this.socket = socket;
    socket.setEncoding("utf8");
    socket.setNoDelay(true);
    let buffered = "";
    socket.on("data", (chunk: string) => {
      buffered += chunk;
      let newline;
      while ((newline = buffered.indexOf("\n")) >= 0) {
        this.onMessage(JSON.parse(buffered.slice(0, newline)));
        buffered = buffered.slice(newline + 1);
      }
    });
    socket.on("error", () => {});
    socket.on("close", () => this.resolveGone());
    for (const message of this.outbox.splice(0)) socket.write(message);
  }

  private onMessage(message: Record<string, unknown>): void {
    if (message.hello) {
      this.pid = (message.hello as { pid: number }).pid;
      this.resolveConnected();
    } else if ("command" in message) {
      this.receive(message as unknown as Received);
    } else if (message.eof) {
      this.eof = true;
    } else if (typeof message.synced === "number") {
      this.syncWaiters.get(message.synced)?.();
      this.syncWaiters.delete(message.synced);
    }
  }

  private send(message: Record<string, unknown>): void {
    const text = JSON.stringify(message) + "\n";
    if (this.socket) this.socket.write(text);
    else this.outbox.push(text);
  }

  /** Runs steps in the fake, in order. */
  steps(...steps: Step[]): void {
    this.send({ steps });
  }

  /** Runs steps and resolves once the fake has run them. */
  stepsAndSync(...steps: Step[]): Promise<void> {
    const n = ++this.syncCounter;
    const done = new Promise<void>((r) => this.syncWaiters.set(n, r));
    this.send({ steps, sync: n });
    return within(done, `the fake to run steps ${JSON.stringify(steps)}`);
  }

  dispose(): void {
    this.socket?.destroy();
    this.server.close();
  }
}

/** What a test drives a fake backend through, whichever transport the harness uses. */
export interface BackendFake {
  readonly spec: BridgeProcessOptions;
  pid: number | undefined;
  readonly connected: Promise<void>;
  readonly gone: Promise<void>;
  readonly received: Received[];
  eof: boolean;
  steps(...steps: Step[]): void;
  stepsAndSync(...steps: Step[]): Promise<void>;
  emit(...lines: Line[]): void;
  stderr(...lines: string[]): void;
  exit(code: number): void;
  next(what?: string): Promise<Received>;
  expect(type: string): Promise<Record<string, unknown>>;
  unread(): Received[];
  dispose(): void;
}

/**
 * The session suites' second transport (vitest project "session-attach"):
 * the same scripted fake, in memory, under `attachAgentSession` through the
 * testing kit's `fakeBackendChild`. It runs the script as
 * fixtures/fake-backend.js does (start, on, eof, sigterm) and is driven by
 * the same calls, so every scenario runs through both.
 */
export class MemoryFake extends FakeCommands implements BackendFake {
  readonly spec: BridgeProcessOptions = { command: "in-memory-fake" };
  pid: number | undefined = undefined;
  readonly connected = Promise.resolve();
  readonly gone: Promise<void>;
  eof = false;
  readonly child: FakeBackendChild;
  private exiting = false;
  private readonly on: Record<string, Step[]>;

  constructor(private readonly script: FakeScript) {
    super();
    this.child = fakeBackendChild({ onTerm: script.sigterm === "ignore" ? "ignore" : "exit" });
    this.on = { shutdown: [{ emit: [{ type: "shutdown" }] }, { exit: 0 }], ...(script.on ?? {}) };
    this.gone = new Promise((resolve) => this.child.once("close", () => resolve()));
    this.child.on("command-line", (line: string) => {
      let command: Record<string, unknown> | null = null;
      try {
        command = JSON.parse(line) as Record<string, unknown>;
      } catch {
        command = null;
      }
      this.receive({ command, line });
      const type = command && typeof command === "object" ? command.type : undefined;
      if (typeof type === "string" && Object.prototype.hasOwnProperty.call(this.on, type)) this.run(this.on[type]);
    });
    this.child.once("stdin-end", () => {
      this.eof = true;
      this.run(script.eof ?? [{ exit: 0 }]);
    });
  }

  /** Runs the script's start steps (once the session is attached). */
  start(): void {
    this.run(this.script.start ?? [{ emit: [{ type: "ready", version: "0.0.0-fake", package: "agentlane-process-bridge", metadata: {} }] }]);
  }

  private run(steps: Step[]): void {
    for (const step of steps) {
      if (this.exiting) return;
      if ("emit" in step) {
        for (const line of step.emit) this.child.emitEvent(line as never);
      } else if ("raw" in step) {
        this.child.pushStdout(step.raw);
      } else if ("stderr" in step) {
        for (const line of step.stderr) this.child.pushStderr(`${line}\n`);
      } else if ("exit" in step) {
        this.exiting = true;
        this.child.exit(step.exit);
      } else if ("closeStdin" in step) {
        // As a process closing its stdin: the host's next write fails with EPIPE.
        this.child.failNextWrite();
      } else if ("closeStdout" in step) {
        this.child.stdout.end();
      }
    }
  }

  steps(...steps: Step[]): void {
    this.run(steps);
  }

  stepsAndSync(...steps: Step[]): Promise<void> {
    this.run(steps);
    return flushMicrotasks();
  }

  dispose(): void {
    this.child.kill("SIGKILL");
  }
}

/** Which transport the session suites run through (the vitest project sets it). */
export const TRANSPORT: "spawn" | "attach" = process.env.PBN_SESSION_TRANSPORT === "attach" ? "attach" : "spawn";

// ---- recording every callback ----------------------------------------------------

export type Entry =
  | { kind: "event"; event: BridgeEvent }
  | { kind: "assistant" | "reasoning"; chunk: { delta: string; text: string; segment: number; done: boolean } }
  | { kind: "tool"; activity: Record<string, any> }
  | { kind: "agent"; activity: Record<string, any> }
  | { kind: "plan"; plan: Record<string, any> }
  | { kind: "resolved"; resolution: Record<string, any> }
  | { kind: "configChanged"; config: unknown }
  | { kind: "close"; close: Record<string, any> }
  | { kind: "diagnostic"; diagnostic: SessionDiagnostic }
  | { kind: "note"; text: string };

type Pred = (entry: Entry) => boolean;

export class Recorder {
  readonly log: Entry[] = [];
  private readonly waiters: { pred: Pred; count: number; resolve: () => void }[] = [];

  push(entry: Entry): void {
    this.log.push(entry);
    for (const waiter of [...this.waiters]) {
      if (this.log.filter(waiter.pred).length >= waiter.count) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  }

  note(text: string): void {
    this.push({ kind: "note", text });
  }

  /** Resolves once at least `count` entries match (entries already logged count). */
  waitFor(pred: Pred, what: string, count = 1): Promise<void> {
    if (this.log.filter(pred).length >= count) return Promise.resolve();
    return within(new Promise<void>((resolve) => this.waiters.push({ pred, count, resolve })), what);
  }

  /** Resolves once `onEvent` has seen `count` events of `type` (and the batch around it was processed). */
  async waitEvent(type: string, count = 1): Promise<void> {
    await this.waitFor((e) => e.kind === "event" && e.event.type === type, `${count} ${type} event(s)`, count);
    await flushMicrotasks();
  }

  /** Resolves once `count` run_event records of `nativeType` reached `onEvent`. */
  async waitRecord(nativeType: string, count = 1): Promise<void> {
    await this.waitFor(
      (e) => e.kind === "event" && e.event.type === "run_event" && e.event.event.type === nativeType,
      `${count} ${nativeType} record(s)`,
      count,
    );
    await flushMicrotasks();
  }

  waitClose(): Promise<void> {
    return this.waitFor((e) => e.kind === "close", "onClose");
  }

  of<K extends Entry["kind"]>(kind: K): Extract<Entry, { kind: K }>[] {
    return this.log.filter((e) => e.kind === kind) as Extract<Entry, { kind: K }>[];
  }

  chunks(kind: "assistant" | "reasoning" | "text" = "text") {
    return this.log
      .filter((e): e is Extract<Entry, { kind: "assistant" | "reasoning" }> =>
        kind === "text" ? e.kind === "assistant" || e.kind === "reasoning" : e.kind === kind,
      )
      .map((e) => e.chunk);
  }

  diagnostics(kind?: SessionDiagnostic["kind"]): SessionDiagnostic[] {
    return this.of("diagnostic")
      .map((e) => e.diagnostic)
      .filter((d) => kind === undefined || d.kind === kind);
  }

  eventTypes(): string[] {
    return this.of("event").map((e) => (e.event.type === "run_event" ? `run_event:${e.event.event.type}` : e.event.type));
  }

  /** Compact trace of the log, for order assertions. */
  trace(): string[] {
    return this.log.map((e) => {
      switch (e.kind) {
        case "event":
          return `event ${e.event.type === "run_event" ? `run_event:${e.event.event.type}` : e.event.type}`;
        case "assistant":
        case "reasoning":
          return `${e.kind} ${e.chunk.segment} ${JSON.stringify(e.chunk.delta)}${e.chunk.done ? " done" : ""}`;
        case "tool":
          return `tool ${e.activity.phase} ${e.activity.call.callId}`;
        case "agent":
          return `agent ${e.activity.phase} ${e.activity.info.taskId}`;
        case "plan":
          return `plan ${e.plan.taskId}`;
        case "resolved":
          return `resolved ${e.resolution.allowed}`;
        case "configChanged":
          return `configChanged ${JSON.stringify(e.config)}`;
        case "close":
          return `close ${e.close.reason}`;
        case "diagnostic":
          return `diagnostic ${e.diagnostic.kind}`;
        case "note":
          return e.text;
      }
    });
  }

  /** Session options that record every callback. */
  callbacks(): Partial<AgentSessionOptions<any, any>> {
    return {
      onEvent: (event) => this.push({ kind: "event", event }),
      onAssistantText: (chunk) => this.push({ kind: "assistant", chunk: { ...chunk } }),
      onReasoningText: (chunk) => this.push({ kind: "reasoning", chunk: { ...chunk } }),
      onToolActivity: (activity) => this.push({ kind: "tool", activity }),
      onAgentActivity: (activity) => this.push({ kind: "agent", activity }),
      onPlan: (plan) => this.push({ kind: "plan", plan }),
      onApprovalResolved: (resolution) => this.push({ kind: "resolved", resolution }),
      onConfigChanged: (config) => this.push({ kind: "configChanged", config }),
      onClose: (close) => this.push({ kind: "close", close }),
      onDiagnostic: (diagnostic) => this.push({ kind: "diagnostic", diagnostic }),
    };
  }
}

// ---- valid events --------------------------------------------------------------------

interface Lineage {
  agent?: string;
  taskId?: string;
  parent?: string | null;
  isRoot?: boolean;
}

function lineage({ agent = "Assistant", taskId = "task-1", parent = null, isRoot = parent === null }: Lineage = {}) {
  return { task_name: agent, task_id: taskId, parent_task_id: parent, is_root: isRoot };
}

function toolCall(id: string, name: string, args: string) {
  return { id, type: "function", function: { name, arguments: args } };
}

export const APPROVAL_REQUEST: ApprovalRequestPayload = {
  tool_name: "write",
  operation: "create_file",
  cwd: "/srv/app",
  path: "/srv/app/notes.txt",
  command: null,
  skill_name: null,
  reason: null,
  run_id: null,
  agent_name: "Assistant",
  tool_call_id: "call-1",
  metadata: { note: "kept" },
};

function record(type: string, payload: Record<string, unknown>): Record<string, unknown> {
  return nativeRecord(type, payload);
}

function model(kind: string, fields: Record<string, unknown> = {}): Record<string, unknown> {
  return record("model_stream", { event: { kind, ...MODEL_EVENT_NULLS, ...fields } });
}

export const ev = {
  ready: (extra: Record<string, unknown> = {}) => ({
    type: "ready",
    version: "0.22.0",
    package: "agentlane-process-bridge",
    metadata: {},
    ...extra,
  }),
  runStart: (prompt = "hi") => ({ type: "run_start", prompt }),
  runComplete: (final_output: unknown = null, turn_count = 1, response_count = 1) => ({
    type: "run_complete",
    final_output,
    turn_count,
    response_count,
    shim_state: {},
  }),
  runCancelled: () => ({ type: "run_cancelled" }),
  runError: (message: string) => ({ type: "error", message, scope: "run" }),
  commandError: (message: string) => ({ type: "error", message, scope: "command" }),
  configOk: (config: Record<string, unknown>) => ({ type: "config", ok: true, error: null, config }),
  configFailed: (code: string, message: string, config: Record<string, unknown> | null = null) => ({
    type: "config",
    ok: false,
    error: { code, message },
    config,
  }),
  reset: (config?: Record<string, unknown>) => (config === undefined ? { type: "reset" } : { type: "reset", config }),
  cancelRequested: () => ({ type: "cancel_requested" }),
  cancelIgnored: (reason = "no active run") => ({ type: "cancel_ignored", reason }),
  shutdown: () => ({ type: "shutdown" }),

  record,
  model,
  text: (text: unknown) => model("text_delta", { text }),
  reasoning: (reasoning: unknown, text: unknown = null) => model("reasoning", { reasoning, text }),
  toolStart: (id: string, name = "write", args = "{}", opts: Lineage & { delegation?: boolean } = {}) =>
    record("tool_start", { ...lineage(opts), tool_call: toolCall(id, name, args), is_delegation: opts.delegation ?? false }),
  toolEnd: (
    id: string,
    name = "write",
    args = "{}",
    end: { ok?: boolean; result?: unknown; error?: { message: string; kind: string | null } | null } = {},
    opts: Lineage & { delegation?: boolean } = {},
  ) =>
    record("tool_end", {
      ...lineage(opts),
      tool_call: toolCall(id, name, args),
      is_delegation: opts.delegation ?? false,
      result: end.result === undefined ? null : end.result,
      ok: end.ok ?? true,
      error: end.error ?? null,
    }),
  agentStart: (opts: Lineage = {}) => record("agent_start", lineage(opts)),
  agentEnd: (result: { final_output: unknown } | null, opts: Lineage = {}) =>
    record("agent_end", {
      ...lineage(opts),
      result: result === null ? null : { final_output: result.final_output, responses: [], turn_count: 1, run_state: null },
    }),
  plan: (steps: { step: string; status: string }[], explanation: string | null = null, opts: Lineage = {}) =>
    record("plan_updated", { ...lineage(opts), tool_call: toolCall("call-plan", "write_plan", "{}"), plan: steps, explanation }),
  approvalPending: (id: string, reason: string | null = "File writes need approval.", request = APPROVAL_REQUEST) =>
    record("tool_approval", {
      event: {
        record: {
          request_id: id,
          request,
          approval_required_decision: { outcome: "require_approval", reason },
          status: "pending",
          final_decision: null,
        },
      },
    }),
  approvalResolved: (id: string, outcome: "allow" | "deny", reason: string | null = null, request = APPROVAL_REQUEST) =>
    record("tool_approval", {
      event: {
        record: {
          request_id: id,
          request,
          approval_required_decision: { outcome: "require_approval", reason: "File writes need approval." },
          status: "resolved",
          final_decision: { outcome, reason },
        },
      },
    }),
  llmStart: () => record("llm_start", { ...lineage(), messages: [{ role: "user", content: "hi" }] }),
  stateSnapshot: () =>
    record("state_snapshot", { boundary: "run_start", snapshot: { turn_count: 0, history_length: 1, response_count: 0, shim_state: {} } }),
  handoffStart: () => record("handoff_start", { ...lineage(), tool_call: toolCall("call-h", "transfer", "{}"), target_name: "Reviewer" }),
  unknownKind: (kind = "subagent_progress") => ({ type: "run_event", event: { type: kind, payload: { kind, percent: 40 } } }),
};

// ---- sessions with automatic cleanup -----------------------------------------------

export interface Launched<TConfig = any> {
  session: AgentSession<TConfig, any>;
  fake: BackendFake;
  rec: Recorder;
  spawn: SpawnRecord;
}

/**
 * Creates fakes and sessions and cleans them all up: every session is
 * closed, every fake disconnected, every child that still lives is
 * SIGKILLed and its exit awaited.
 */
export class Harness {
  private readonly fakes: Fake[] = [];
  private readonly sessions: AgentSession<any, any>[] = [];

  private readonly fakes2: MemoryFake[] = [];

  constructor(private readonly create: (options: AgentSessionOptions<any, any>) => Promise<AgentSession<any, any>>) {}

  async fake(script: FakeScript = {}): Promise<Fake> {
    const fake = await Fake.launch(script);
    this.fakes.push(fake);
    return fake;
  }

  /**
   * Starts a fake and a session on it with every callback recorded
   * (`options` override the recorder's callbacks). Does not wait for ready.
   */
  async begin(script: FakeScript = {}, options: Partial<AgentSessionOptions<any, any>> = {}) {
    if (TRANSPORT === "attach") return this.beginAttached(script, options);
    const fake = await this.fake(script);
    const rec = new Recorder();
    const before = spawned.length;
    const pending = observe(
      this.create({ backend: fake.spec, shutdownGraceMs: 1000, textDelivery: "immediate", ...rec.callbacks(), ...options }),
    );
    const spawn = spawned[before];
    void pending.settled.then((s) => {
      if (s.status === "fulfilled") this.sessions.push(s.value);
    });
    return { fake, rec, spawn, pending };
  }

  /** `begin` through `attachAgentSession` over an in-memory fake. */
  private async beginAttached(script: FakeScript, options: Partial<AgentSessionOptions<any, any>>) {
    // Loaded here, not at the top: this module is imported by the mock of lib/process.
    const { attachAgentSession } = await import("../../lib/session/index");
    const fake = new MemoryFake(script);
    this.fakes2.push(fake);
    const rec = new Recorder();
    const { backend: _backend, ...sessionOptions } = { shutdownGraceMs: 1000, textDelivery: "immediate" as const, ...rec.callbacks(), ...options };
    const pending = observe(attachAgentSession(fake.child, sessionOptions));
    let resolveExit!: (info: ExitInfo) => void;
    const spawn = { options: fake.spec, child: fake.child as unknown as ChildProcess, exited: undefined, exit: new Promise<ExitInfo>((r) => (resolveExit = r)) } as SpawnRecord;
    // After the session's own `close` listener: its exit has been processed.
    fake.child.once("close", (code: number | null, signal: string | null) => {
      spawn.exited = { code, signal };
      resolveExit({ code, signal });
    });
    spawned.push(spawn);
    fake.start();
    void pending.settled.then((s) => {
      if (s.status === "fulfilled") this.sessions.push(s.value);
    });
    return { fake: fake as BackendFake, rec, spawn, pending };
  }

  /** Like `begin`, and waits for the session to be ready. */
  async launch<TConfig = any>(script: FakeScript = {}, options: Partial<AgentSessionOptions<TConfig, any>> = {}): Promise<Launched<TConfig>> {
    const { fake, rec, spawn, pending } = await this.begin(script, options as Partial<AgentSessionOptions<any, any>>);
    const session = await pending.value("createAgentSession to resolve");
    await within(fake.connected, "the fake to connect");
    return { session, fake, rec, spawn };
  }

  async cleanup(): Promise<void> {
    const errors: unknown[] = [];
    for (const session of this.sessions.splice(0)) {
      await within(session.close(), "close() during cleanup").catch((e) => errors.push(e));
    }
    for (const fake of this.fakes.splice(0)) fake.dispose();
    for (const fake of this.fakes2.splice(0)) fake.dispose();
    for (const record of spawned) {
      if (record.exited) continue;
      record.child.kill("SIGKILL");
      await within(record.exit, "a child to exit during cleanup").catch((e) => errors.push(e));
    }
    spawned.length = 0;
    if (errors.length > 0) throw errors[0];
  }
}
