/**
 * Every error class of the package (docs/protocol.md §7, §9.5.3), in one module.
 *
 * Each error has a stable `code` a program can switch on, in addition to the
 * reference's `name` and `message` (which stay exactly the reference's);
 * an error that wraps another keeps it as `cause`. Session errors share the
 * base class {@link AgentSessionError}, so one `instanceof` catches them all.
 */
import type { FlightRecord } from "./session/flight-recorder";
import type { SessionClose } from "./session/types";
import type { ConfigErrorCode } from "./protocol";

/**
 * `BridgeDecodeError.code`. The first eight come from the Rust core's
 * decoder (`bridge_core::DecodeErrorKind`, one per check of §7.2, plus the
 * reader's line limit); the others are the session's own protocol checks.
 */
export type BridgeDecodeErrorCode =
  | "invalid-json"
  | "not-an-object"
  | "version-not-a-string"
  | "unsupported-version"
  | "type-not-a-string"
  | "unknown-type"
  | "invalid-payload"
  | "line-too-long"
  /** An event that answers nothing the session sent (a `config` with no pending configure). */
  | "unexpected-event"
  /** The application's `decodeConfig` rejected a config document. */
  | "invalid-config-document"
  /** §7.4: something other than a decode error went wrong while decoding. */
  | "decode-failed"
  /** Made by application code without a code. */
  | "unknown";

/**
 * A line from the backend that is not a valid bridge event (docs/protocol.md §7).
 *
 * Instances are created by the native decoder (which registers a factory at
 * load time) and by the process layers; `instanceof` works across both.
 * `fields` lists the dotted paths of the failing fields, first occurrence
 * kept, `[]` when no field applies. It is frozen.
 */
export class BridgeDecodeError extends Error {
  readonly fields: readonly string[];
  readonly code: BridgeDecodeErrorCode;

  constructor(message: string, fields: readonly string[] = [], options: { code?: BridgeDecodeErrorCode; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "BridgeDecodeError";
    this.fields = Object.freeze([...fields]);
    this.code = options.code ?? "unknown";
  }
}

/**
 * Reading a backend's output stream failed (an I/O error, not a bad line):
 * nothing more will come from it. `stream` says which one.
 */
export class BridgeReadError extends Error {
  readonly code = "read-failed" as const;
  readonly stream: "stdout" | "stderr";

  constructor(stream: "stdout" | "stderr", reason: string) {
    super(`Reading the backend's ${stream} failed: ${reason}`);
    this.name = "BridgeReadError";
    this.stream = stream;
  }
}

/** `BridgeCommandError.code`: why the encoder refused a command (`bridge_core::command::CommandErrorKind`). */
export type BridgeCommandErrorCode =
  | "not-a-command-object"
  | "invalid-json"
  | "not-an-object"
  | "type-not-a-string"
  | "unknown-type"
  | "invalid-field"
  | "unpaired-surrogate"
  | "too-long";

/**
 * A command `encodeBridgeCommand` refuses to write because the backend would
 * mishandle it. A `TypeError`, as the programming error it is; `command` and
 * `field` name what is at fault when known.
 */
export class BridgeCommandError extends TypeError {
  readonly code: BridgeCommandErrorCode;
  /** The command's `type`, when it names a known command. */
  readonly command: string | undefined;
  /** The top-level field at fault, when one is. */
  readonly field: string | undefined;

  constructor(message: string, details: { code: BridgeCommandErrorCode; command?: string | null; field?: string | null }) {
    super(message);
    this.name = "BridgeCommandError";
    this.code = details.code;
    this.command = details.command ?? undefined;
    this.field = details.field ?? undefined;
  }
}

// ---- session errors ------------------------------------------------------------

/** The base of every session error: `code` says which failure it is. */
export class AgentSessionError extends Error {
  readonly code: string;

  constructor(message: string, code: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "AgentSessionError";
    this.code = code;
  }
}

/** `SessionStartError.code`. */
/**
 * A number the application gave that cannot be used (`NaN`, negative, a
 * fraction of a byte, a time beyond Node's timers), refused before
 * anything starts. Its option's name is in the message and in `option`.
 */
export class InvalidOptionError extends RangeError {
  readonly code = "invalid-option" as const;

  constructor(
    message: string,
    /** The option, as the application named it (`readyTimeoutMs`, `flightRecorder.lines`). */
    readonly option: string,
  ) {
    super(message);
    this.name = "InvalidOptionError";
  }
}

/**
 * The runtime refuses what the package needs: Deno without one of the
 * permissions a host needs (`--allow-env` and `--allow-ffi` to load the
 * addon, `--allow-read` and `--allow-run` to start a backend or the
 * supervisor; the supervisor's lookup is native, so `--allow-sys` is not
 * asked for). Deno's own error (`NotCapable`) is the `cause`; without
 * this, a denied load read as a missing binary and a denied supervisor
 * lookup as a broken install.
 */
export class RuntimePermissionError extends Error {
  readonly code = "permission-denied" as const;

  constructor(
    /** Deno's permission name: `env`, `ffi`, `read`, `write`, `run`, `net`, `sys`. */
    readonly permission: string,
    /** What the package needed it for. */
    neededFor: string,
    options?: { cause?: unknown },
  ) {
    super(
      `Deno denies ${permission} access, which @agentlanejs/process-bridge-native needs ${neededFor}: run with --allow-${permission} ` +
        "(a host needs --allow-env --allow-ffi --allow-read --allow-run, or -A).",
      options,
    );
    this.name = "RuntimePermissionError";
  }
}

/** The permission a Deno `NotCapable` error (in `error` or its causes) names, or `undefined`. */
export function deniedPermission(error: unknown): string | undefined {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth += 1) {
    const match = /Requires (\w+) access/.exec(current.message);
    if (match && (current.name === "NotCapable" || process.versions.deno !== undefined)) return match[1];
  }
  return undefined;
}

export type SessionStartErrorCode =
  /** The backend spec is unusable (nothing was spawned). */
  | "invalid-spec"
  /** The OS could not start the backend (`cause` holds its error). */
  | "spawn-failed"
  /** The backend exited before its `ready` event. */
  | "exited-before-ready"
  /** No `ready` event within `readyTimeoutMs`. */
  | "ready-timeout"
  /** The `ready` event was invalid, or its config failed the application's `decodeConfig`. */
  | "bad-ready"
  /** The backend speaks another protocol major version. */
  | "unsupported-protocol"
  /** The backend wrote a line that is not a valid bridge event before `ready`. */
  | "protocol-error"
  /** A warm start was asked for with `fallback: "error"` and is not possible (`cause`: the `WarmStartError`). */
  | "warm-unavailable"
  /** The application called the start off (its `signal`; `cause`: the signal's reason); what had started was killed. */
  | "aborted"
  /** The session gives the agent tools (`tools`), and the backend's factory did not add `host.tools()` (docs/host-channel.md §1). */
  | "tools-not-taken"
  /** The session gives the agent a store or a snapshot to resume, and the backend's factory did not pass `host.state_store()`. */
  | "store-not-taken"
  /** The `tools` option cannot be served (a schema that is not usable JSON Schema, a bad name or handler). */
  | "invalid-tools"
  /** `resume` names a snapshot the session refuses (corrupted, of an unknown version, of another agent); `cause`: the `SnapshotError`. */
  | "invalid-snapshot"
  /** `resume` with a `store` that holds another snapshot (or could not take it); nothing was overwritten. */
  | "resume-conflict"
  /** Tools or a store were given where this start has no host channel to carry them (an attached process without `hostChannel`). */
  | "no-host-channel";

/** `WarmStartError.reason`: why a warm start (docs/prefork.md) is not possible. */
export type WarmUnavailableReason =
  /** Not Linux or macOS. */
  | "platform"
  /** No native supervisor (`supervise: false`, or none for this platform). */
  | "no-supervisor"
  /** The backend is not `… -m agentlane_process_bridge --app module:factory` (or runs through a shell). */
  | "not-warmable"
  /** The app started threads when it was imported: forking it is not safe. */
  | "threads"
  /** An asyncio event loop was running after the import. */
  | "event-loop"
  /** `agentlane_process_bridge` or the app's module failed to import. */
  | "import-failed"
  /** The `--app` reference is malformed, or names nothing callable. */
  | "bad-app"
  /** The prefork server could not be started, or ended before or instead of forking. */
  | "server-failed"
  /** The prefork server did not become ready in time (`prewarm`'s `timeoutMs`): its import hangs, or is slower than that. */
  | "timeout"
  /**
   * The prefork server stopped taking requests (stopped, hung): it forked
   * nothing for 3 s (or half the ready timeout, if less) while this start waited.
   */
  | "server-unresponsive"
  /** The prefork server could not fork this backend (out of processes or descriptors, …; the message says which). */
  | "fork-failed"
  /** `closeWarmServers()` closed the prefork server before this backend was forked, or (`kill: true`) before it was ready. */
  | "server-closed";

/**
 * A warm start is not possible: the prefork server refused the app (its
 * stable code is `reason`), or the platform, options or command do not
 * allow one. With `fallback: "cold"` (the default) the backend starts cold
 * instead (and a `warm` diagnostic says why); with `fallback: "error"` the
 * start fails with `SessionStartError` `warm-unavailable`, this as `cause`.
 */
export class WarmStartError extends Error {
  readonly code = "warm-unavailable" as const;
  /** The `SessionStartError` code this failure gives. */
  readonly startCode = "warm-unavailable" as const;

  constructor(
    message: string,
    readonly reason: WarmUnavailableReason,
    /** The last lines the prefork server wrote (its import's traceback, …). */
    readonly logTail: readonly string[] = [],
  ) {
    super(message);
    this.name = "WarmStartError";
  }
}

/** What a start failure carries besides its message. */
export interface SessionStartDetails {
  cause?: unknown;
  /** The backend's exit code, when it exited (a failed spawn: minus the errno). */
  exitCode?: number | null;
  /** The signal that ended it, if one did. */
  signal?: string | null;
  /** Its last stderr lines (at most 20, each cut to 1 KiB). */
  stderrTail?: string[];
  /** Why it failed, in a sentence, when recognisable (uv or Python missing, an import error, …). */
  likelyCause?: string;
}

/** Startup failed; `createAgentSession` rejects with it. */
export class SessionStartError extends AgentSessionError {
  declare readonly code: SessionStartErrorCode;
  readonly exitCode: number | null;
  readonly signal: string | null;
  readonly stderrTail: readonly string[];
  readonly likelyCause: string | undefined;

  constructor(message: string, code: SessionStartErrorCode = "exited-before-ready", details: SessionStartDetails = {}) {
    super(message, code, details.cause === undefined ? undefined : { cause: details.cause });
    this.name = "SessionStartError";
    this.exitCode = details.exitCode ?? null;
    this.signal = details.signal ?? null;
    this.stderrTail = Object.freeze([...(details.stderrTail ?? [])]);
    this.likelyCause = details.likelyCause;
  }
}

/** `RunError.code`. */
export type RunErrorCode =
  /** The run failed inside the backend (a run-scoped `error` event). */
  | "run-failed"
  /** The backend refused the command (a command-scoped `error`): a prompt, cancel or reset. */
  | "command-refused";

/** The backend failed or refused a run, or refused a cancel or reset. */
export class RunError extends AgentSessionError {
  declare readonly code: RunErrorCode;

  constructor(message: string, code: RunErrorCode = "run-failed") {
    super(message, code);
    this.name = "RunError";
  }
}

/** The session ended while the operation was pending, or had already ended. */
export class SessionClosedError extends AgentSessionError {
  declare readonly code: "session-closed";
  readonly close: SessionClose;
  /** The session's last lines when its flight recorder was on (`flightRecorder` option). */
  readonly flightRecord: readonly FlightRecord[] | undefined;

  constructor(close: SessionClose, flightRecord?: readonly FlightRecord[]) {
    super(`Agent session closed: ${close.reason}`, "session-closed", close.reason === "protocol-error" ? { cause: close.error } : undefined);
    this.name = "SessionClosedError";
    this.close = close;
    this.flightRecord = flightRecord;
  }
}

/** `SessionStateError.code`. */
export type SessionStateErrorCode =
  /** A run is already active. */
  | "run-active"
  /** The prompt is not a string, is blank, or the encoder refused it (`cause` holds why). */
  | "invalid-prompt"
  /** The backend is not reading its stdin: the command was not sent (see `maxStdinBufferBytes`). */
  | "stdin-full"
  /** A numeric option of the call (`timeoutMs`, `idleTimeoutMs`) is unusable (`cause`: the `InvalidOptionError`). */
  | "invalid-option";

/** Local misuse, detected before anything is sent. */
export class SessionStateError extends AgentSessionError {
  declare readonly code: SessionStateErrorCode;

  constructor(message: string, code: SessionStateErrorCode = "invalid-prompt", options?: { cause?: unknown }) {
    super(message, code, options);
    this.name = "SessionStateError";
  }
}

/** The backend reported a configure failure, or the patch was invalid locally. */
export class ConfigureError extends AgentSessionError {
  /** The backend's `error.code`, or `invalid` for a patch refused locally. */
  declare readonly code: ConfigErrorCode;

  constructor(code: ConfigErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, code, options);
    this.name = "ConfigureError";
  }
}

// ---- conversation stores and snapshots (lib/store/) ----------------------------

/** `SnapshotError.code`: why a snapshot document was refused. */
export type SnapshotErrorCode =
  /** Not agentlane's snapshot document: not JSON, not an object, a field missing or of the wrong type. */
  | "snapshot-corrupted"
  /** A `schema_version` other than 1 (a newer or older agentlane's document). */
  | "snapshot-version-unsupported"
  /** The snapshot belongs to another agent (`agent_id` differs from the one expected). */
  | "snapshot-agent-mismatch"
  /** `save()` was given a snapshot whose `revision` is not above `expectedRevision` (agentlane's rule). */
  | "snapshot-revision-not-increasing";

/**
 * A snapshot document refused before anything uses it (lib/store/snapshot.ts):
 * `field` is the dotted path of the failing field (`state.history.3.role`;
 * `""` for the document itself). A `cause` is kept (the JSON parser's
 * error for text that is not JSON).
 */
export class SnapshotError extends Error {
  readonly code: SnapshotErrorCode;
  readonly field: string;

  constructor(message: string, code: SnapshotErrorCode, field: string, options?: { cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "SnapshotError";
    this.code = code;
    this.field = field;
  }
}

/** A store operation, as store errors name it. */
export type StoreOperation = "load" | "save" | "delete";

/** The base of the store errors: which operation failed, on which conversation. */
export class StoreError extends Error {
  readonly code: string;

  constructor(
    message: string,
    code: string,
    readonly operation: StoreOperation,
    readonly conversationId: string,
    options?: { cause?: unknown },
  ) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "StoreError";
    this.code = code;
  }
}

/**
 * A `save` or `delete` whose `expectedRevision` is not the store's current
 * revision: another writer got there first (or the caller's state is
 * stale). Nothing was written. `actualRevision` is the revision the store
 * held when it refused (`null`: no snapshot).
 */
export class StoreConflictError extends StoreError {
  declare readonly code: "revision-conflict";

  constructor(
    operation: "save" | "delete",
    conversationId: string,
    readonly expectedRevision: number | null,
    readonly actualRevision: number | null,
  ) {
    super(
      `Revision conflict on ${operation} of conversation ${JSON.stringify(conversationId)}: expected ` +
        `${expectedRevision === null ? "no snapshot" : `revision ${expectedRevision}`}, the store has ` +
        `${actualRevision === null ? "no snapshot" : `revision ${actualRevision}`}.`,
      "revision-conflict",
      operation,
      conversationId,
    );
    this.name = "StoreConflictError";
  }
}

/**
 * The store itself failed (a file system or database error, a lock not
 * had in time, a stored document that cannot be read): the `cause` says
 * why. A failed `load` or `delete` changed nothing; a failed `save` wrote
 * nothing, except where the store's documentation says the outcome can be
 * unknown (the database store, when the connection broke after sending).
 */
export class StoreFailedError extends StoreError {
  declare readonly code: "store-failed";

  constructor(operation: StoreOperation, conversationId: string, reason: string, options?: { cause?: unknown }) {
    super(`The store failed to ${operation} conversation ${JSON.stringify(conversationId)}: ${reason}`, "store-failed", operation, conversationId, options);
    this.name = "StoreFailedError";
  }
}

/**
 * A conversation id a store cannot hold: not a string, empty, or holding a
 * NUL or an unpaired surrogate (two such ids could name one file or row);
 * a store may limit the length further (the disk store: its file name).
 */
export class InvalidConversationIdError extends TypeError {
  readonly code = "invalid-conversation-id" as const;

  constructor(message: string) {
    super(message);
    this.name = "InvalidConversationIdError";
  }
}
