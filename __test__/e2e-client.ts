/**
 * A small promise-based client for the end-to-end tests: starts a backend with
 * `startBridgeProcess` (spawned, or warm when the options say so), talks to it through `createBridgeChannel`, and keeps
 * everything that happens (events, decode errors, invalid lines, stderr,
 * send errors, finalize, spawn error, exit) in one ordered log that tests
 * wait on and assert against.
 */
import { join } from "node:path";
import {
  createBridgeChannel,
  startBridgeProcess,
  type BridgeChild,
  type BridgeChannel,
  type BridgeCommand,
  type BridgeDecodeError,
  type BridgeEvent,
  type BridgeProcessOptions,
  type ReadyEvent,
  type RunStartEvent,
} from "../lib/index";

export const repoRoot = join(__dirname, "..");
export const backendsDir = join(repoRoot, "tests/e2e/backends");
/** The venv's interpreter, deliberately not resolved (the target lies outside the venv). */
export const venvPython = join(repoRoot, ".venv/bin/python");

/**
 * The real AgentLane backend running `scenario_app` (NOTES.md §2–§3),
 * spawned (`cold`) or forked from a prefork server (`warm`, docs/prefork.md:
 * failing the start rather than falling back, so that a warm test is warm).
 */
export function scenarioBackend(start: "cold" | "warm" = "cold"): BridgeProcessOptions {
  return {
    command: venvPython,
    args: ["-m", "agentlane_process_bridge", "--app", "scenario_app:create_backend"],
    cwd: backendsDir,
    ...(start === "warm" ? { warm: { fallback: "error" as const } } : {}),
  };
}

/** One of the plain-Python fake backends of `tests/e2e/backends`. */
export function fakeBackend(script: "dies_midline.py" | "ignores_shutdown.py"): BridgeProcessOptions {
  return { command: venvPython, args: [join(backendsDir, script)], cwd: backendsDir };
}

export type LogEntry =
  | { kind: "event"; event: BridgeEvent }
  | { kind: "decodeError"; error: BridgeDecodeError; line: string }
  | { kind: "invalidLine"; line: string }
  | { kind: "stderr"; line: string }
  | { kind: "sendError"; message: string }
  | { kind: "spawnError"; error: Error }
  | { kind: "finalize" }
  | { kind: "exit"; code: number | null; signal: string | null };

export interface WaitOptions {
  /** Default {@link DEFAULT_WAIT_MS}. */
  timeoutMs?: number;
  /** First log index to look at (default 0). */
  from?: number;
}

export interface Found<T> {
  value: T;
  /** Position in the log. */
  index: number;
}

export interface RunOutcome {
  runStart: RunStartEvent;
  /** Log index of `run_start`. */
  startIndex: number;
  /** `run_complete`, `run_cancelled` or `error` with scope `run`. */
  terminal: BridgeEvent;
  /** Log index of the terminal event. */
  terminalIndex: number;
  /** Every event from `run_start` to the terminal event, both included. */
  events: BridgeEvent[];
}

/**
 * Generous, because the suites of other files run in parallel on two cores;
 * a wait only takes this long when the test is about to fail anyway.
 */
export const DEFAULT_WAIT_MS = 20_000;
export const READY_TIMEOUT_MS = 30_000;
const ALREADY_ACTIVE = "A run is already active.";
/** Refusals tolerated for one prompt after the previous run's terminal event (§12 item 12). */
const MAX_PROMPT_ATTEMPTS = 200;

export function isTerminal(event: BridgeEvent): boolean {
  return (
    event.type === "run_complete" ||
    event.type === "run_cancelled" ||
    (event.type === "error" && event.scope === "run")
  );
}

export function isCommandError(event: BridgeEvent, message?: string): boolean {
  return event.type === "error" && event.scope === "command" && (message === undefined || event.message === message);
}

/** A compact description of a log entry, for failure messages. */
function describe(entry: LogEntry): string {
  switch (entry.kind) {
    case "event": {
      const event = entry.event;
      if (event.type === "run_event") {
        const payload = event.event.payload as { event?: { kind?: string; record?: { status?: string } } };
        const detail = payload.event?.kind ?? payload.event?.record?.status ?? "";
        return `run_event:${event.event.type}${detail ? `(${detail})` : ""}`;
      }
      const { protocol_version: _v, ts: _t, type, ...rest } = event as unknown as Record<string, unknown>;
      return `${String(type)} ${JSON.stringify(rest).slice(0, 160)}`;
    }
    case "decodeError":
      return `decodeError ${entry.error.message} <${entry.line.slice(0, 100)}>`;
    case "invalidLine":
      return `invalidLine <${entry.line.slice(0, 100)}>`;
    case "stderr":
      return `stderr ${entry.line.slice(0, 160)}`;
    case "sendError":
      return `sendError ${entry.message}`;
    case "spawnError":
      return `spawnError ${entry.error.message}`;
    case "finalize":
      return "finalize";
    case "exit":
      return `exit code=${entry.code} signal=${entry.signal}`;
  }
}

interface Waiter {
  from: number;
  match: (entry: LogEntry) => boolean;
  resolve: (found: Found<LogEntry>) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

/** Every client that was created and not closed yet, for `closeAllClients`. */
const openClients = new Set<E2EClient>();

export class E2EClient {
  readonly log: LogEntry[] = [];
  readonly child: BridgeChild;
  readonly channel: BridgeChannel;
  /** Settles once, with `onExit`'s arguments. */
  readonly exited: Promise<{ code: number | null; signal: string | null }>;
  finalizeCount = 0;
  private waiters: Waiter[] = [];
  private resolveExit!: (value: { code: number | null; signal: string | null }) => void;
  private exitEntry: LogEntry | undefined;
  /** Whether the last `run_start` seen has not had its terminal event yet. */
  private runActive = false;

  constructor(options: BridgeProcessOptions, channelOptions: { graceMs?: number } = {}) {
    this.exited = new Promise((resolve) => {
      this.resolveExit = resolve;
    });
    // Callbacks never throw: an exception would land in the native reader.
    this.child = startBridgeProcess(options, {
      onEvent: (event) => this.push({ kind: "event", event }),
      onDecodeError: (error, line) => this.push({ kind: "decodeError", error, line }),
      onInvalidLine: (line) => this.push({ kind: "invalidLine", line }),
      onStderr: (line) => this.push({ kind: "stderr", line }),
      onSpawnError: (error) => this.push({ kind: "spawnError", error }),
      onExit: (code, signal) => {
        const entry: LogEntry = { kind: "exit", code, signal };
        this.exitEntry = entry;
        this.push(entry);
        this.resolveExit({ code, signal });
        openClients.delete(this);
        // Whatever is still waiting can no longer be satisfied.
        for (const waiter of this.waiters.splice(0)) {
          clearTimeout(waiter.timer);
          waiter.reject(new Error(`backend exited before the awaited entry arrived\n${this.describeTail()}`));
        }
      },
    });
    this.channel = createBridgeChannel(this.child, {
      graceMs: channelOptions.graceMs,
      onSendError: (message) => this.push({ kind: "sendError", message }),
      onFinalize: () => {
        this.finalizeCount++;
        this.push({ kind: "finalize" });
      },
    });
    openClients.add(this);
  }

  /** Spawns a client and resolves with it once `ready` has arrived. */
  static async start(
    options: BridgeProcessOptions,
    channelOptions: { graceMs?: number } = {},
  ): Promise<{ client: E2EClient; ready: ReadyEvent }> {
    const client = new E2EClient(options, channelOptions);
    const ready = await client.ready();
    return { client, ready };
  }

  /**
   * Resolves with `ready`; rejects if the backend exits (or fails to spawn)
   * first, or if its first stdout line is anything else.
   */
  async ready(timeoutMs = READY_TIMEOUT_MS): Promise<ReadyEvent> {
    const found = await this.waitFor((entry) => entry.kind === "event" || entry.kind === "decodeError", { timeoutMs });
    const entry = found.value;
    if (entry.kind !== "event" || entry.event.type !== "ready") {
      throw new Error(`first stdout line is not ready: ${describe(entry)}`);
    }
    return entry.event;
  }

  get events(): BridgeEvent[] {
    return this.log.flatMap((entry) => (entry.kind === "event" ? [entry.event] : []));
  }

  get stderr(): string[] {
    return this.log.flatMap((entry) => (entry.kind === "stderr" ? [entry.line] : []));
  }

  /** Log entries from `from` to `to` (exclusive), events only. */
  eventsBetween(from: number, to = this.log.length): BridgeEvent[] {
    return this.log.slice(from, to).flatMap((entry) => (entry.kind === "event" ? [entry.event] : []));
  }

  /** Writes one command through the channel; `false` when it could not be sent. */
  send(command: BridgeCommand): boolean {
    return this.channel.send(command);
  }

  /**
   * Resolves with the first log entry at or after `from` that matches. Rejects
   * on timeout, or as soon as the backend has exited without a match.
   */
  waitFor(match: (entry: LogEntry) => boolean, options: WaitOptions = {}): Promise<Found<LogEntry>> {
    const from = options.from ?? 0;
    for (let i = from; i < this.log.length; i++) {
      if (match(this.log[i])) return Promise.resolve({ value: this.log[i], index: i });
    }
    if (this.exitEntry) {
      return Promise.reject(new Error(`backend already exited; no matching entry\n${this.describeTail()}`));
    }
    const timeoutMs = options.timeoutMs ?? DEFAULT_WAIT_MS;
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        from,
        match,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters = this.waiters.filter((w) => w !== waiter);
          reject(new Error(`timed out after ${timeoutMs} ms waiting for a log entry\n${this.describeTail()}`));
        }, timeoutMs),
      };
      this.waiters.push(waiter);
    });
  }

  /** Like {@link waitFor}, over decoded events only. */
  async waitForEvent<E extends BridgeEvent = BridgeEvent>(
    match: (event: BridgeEvent) => boolean,
    options: WaitOptions = {},
  ): Promise<Found<E>> {
    const found = await this.waitFor((entry) => entry.kind === "event" && match(entry.event), options);
    return { value: (found.value as { kind: "event"; event: BridgeEvent }).event as E, index: found.index };
  }

  /** The first run terminal event at or after `from`. */
  waitForTerminal(options: WaitOptions = {}): Promise<Found<BridgeEvent>> {
    return this.waitForEvent(isTerminal, options);
  }

  /**
   * Sends a prompt and resolves with its `run_start`. The backend handles
   * commands one at a time, so the direct answer to the prompt is the first
   * `run_start` or command-scoped `error` after the send (the caller must not
   * have other commands awaiting an answer). A refusal with
   * "A run is already active." while this client has already seen the
   * previous run's terminal event is the documented race (§8.2, §12 item 12):
   * the prompt is sent again, immediately, until it is accepted. The same
   * refusal while a run is really active, or any other refusal, rejects.
   */
  async startRun(text: string, options: { timeoutMs?: number } = {}): Promise<Found<RunStartEvent>> {
    for (let attempt = 1; ; attempt++) {
      const from = this.log.length;
      if (!this.send({ type: "prompt", text })) throw new Error(`could not send the prompt\n${this.describeTail()}`);
      const answer = await this.waitForEvent((event) => event.type === "run_start" || isCommandError(event), {
        from,
        timeoutMs: options.timeoutMs,
      });
      if (answer.value.type === "run_start") return answer as Found<RunStartEvent>;
      const message = (answer.value as { message: string }).message;
      if (message !== ALREADY_ACTIVE || this.runActive) {
        throw new Error(`prompt ${JSON.stringify(text)} refused: ${message} (run active: ${this.runActive})`);
      }
      if (attempt >= MAX_PROMPT_ATTEMPTS) {
        throw new Error(`prompt still refused after ${attempt} attempts following a terminal event`);
      }
      this.raceRefusals.add(answer.index);
    }
  }

  /** Log indices of the "A run is already active." refusals that {@link startRun} retried. */
  readonly raceRefusals = new Set<number>();

  get raceRetries(): number {
    return this.raceRefusals.size;
  }

  /** Command-scoped errors in the log, except the race refusals {@link startRun} retried. */
  unexpectedCommandErrors(): BridgeEvent[] {
    return this.log.flatMap((entry, index) =>
      entry.kind === "event" && isCommandError(entry.event) && !this.raceRefusals.has(index) ? [entry.event] : [],
    );
  }

  /** Sends a prompt (see {@link startRun}) and waits for the run's terminal event. */
  async run(text: string, options: { timeoutMs?: number } = {}): Promise<RunOutcome> {
    const start = await this.startRun(text, options);
    const terminal = await this.waitForTerminal({ from: start.index, timeoutMs: options.timeoutMs });
    return {
      runStart: start.value,
      startIndex: start.index,
      terminal: terminal.value,
      terminalIndex: terminal.index,
      events: this.eventsBetween(start.index, terminal.index + 1),
    };
  }

  /** Shuts the backend down through the channel and waits for `onExit`. Idempotent. */
  async close(): Promise<{ code: number | null; signal: string | null }> {
    this.channel.shutdown();
    return this.exited;
  }

  describeTail(count = 25): string {
    const start = Math.max(0, this.log.length - count);
    return this.log
      .slice(start)
      .map((entry, i) => `  #${start + i} ${describe(entry)}`)
      .join("\n");
  }

  private push(entry: LogEntry): void {
    if (entry.kind === "event") {
      if (entry.event.type === "run_start") this.runActive = true;
      else if (isTerminal(entry.event)) this.runActive = false;
    }
    const index = this.log.length;
    this.log.push(entry);
    if (this.waiters.length === 0) return;
    const matched = this.waiters.filter((waiter) => index >= waiter.from && waiter.match(entry));
    if (matched.length === 0) return;
    this.waiters = this.waiters.filter((waiter) => !matched.includes(waiter));
    for (const waiter of matched) {
      clearTimeout(waiter.timer);
      waiter.resolve({ value: entry, index });
    }
  }
}

/** Closes every client that has not exited yet (for `afterEach`). */
export async function closeAllClients(): Promise<void> {
  await Promise.all([...openClients].map((client) => client.close()));
}
