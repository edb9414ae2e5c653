/**
 * The PostgreSQL store (`@agentlanejs/process-bridge-native/stores/postgres`):
 * one row per conversation in a table several hosts share, so that a
 * conversation started on one machine resumes on another.
 *
 * The database decides every revision check, in the statement that writes:
 * a first save is `INSERT … ON CONFLICT DO NOTHING`, a later one
 * `UPDATE … WHERE revision = $expected`, a delete `DELETE … WHERE revision
 * = $expected`; the row count says who won (1: this call; 0: the revision
 * was not the expected one, and a read says what it was). Each is one
 * statement, atomic on its own: no transaction or lock is held between
 * round trips, so a host that dies mid-call leaves nothing behind.
 *
 * The application brings its own node-postgres pool (`pg`, an optional peer
 * dependency: this module never loads it); anything with pg's
 * `query(text, values)` fits, a `pg.Client` too.
 */
import { InvalidOptionError, StoreConflictError, StoreFailedError, type StoreOperation } from "../errors";
import { checkConversationId, reportedError, requireRevision, revisionArguments, snapshotToSave, textToSave, untilAborted } from "./rules";
import type { SnapshotText } from "./snapshot-text";
import { parseSnapshot } from "./snapshot";
import type { ConversationStore, ConversationStores, RevisionOptions, Snapshot, StoreCallOptions } from "./types";

/** What the store needs of a node-postgres `Pool` (or `Client`). */
export interface PgQueryable {
  query(text: string, values?: unknown[]): Promise<{ rowCount: number | null; rows: Array<Record<string, unknown>> }>;
}

/** `postgresStore` options. */
export interface PostgresStoreOptions {
  /** The application's `pg.Pool` (give it an `error` listener, as node-postgres asks: an idle connection the server drops is reported there). */
  pool: PgQueryable;
  /** The table, optionally schema-qualified (`app.snapshots`); default `agentlane_snapshots`. */
  table?: string;
}

/** The PostgreSQL store (`postgresStore()`). */
export interface PostgresStore extends ConversationStores {
  /** The table's name as SQL (quoted). */
  readonly table: string;
  /** Creates the table if it is missing (`postgresSchema(table)`); safe when several hosts do it at once. */
  createSchema(): Promise<void>;
  /** The ids of the conversations that have a snapshot, sorted. */
  conversationIds(): Promise<string[]>;
}

/** The default table. */
export const DEFAULT_TABLE = "agentlane_snapshots";

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_$]{0,62}$/;

/** The table name quoted for SQL (`InvalidOptionError` for a name that is not one or two plain identifiers). */
function quotedTable(table: string): string {
  const parts = typeof table === "string" ? table.split(".") : [];
  if (parts.length < 1 || parts.length > 2 || !parts.every((part) => IDENTIFIER.test(part))) {
    throw new InvalidOptionError(
      `table must be a table name, optionally schema-qualified (letters, digits, _ and $, at most 63 each), not ${JSON.stringify(table)}.`,
      "table",
    );
  }
  return parts.map((part) => `"${part}"`).join(".");
}

/**
 * The SQL that creates the store's table (what `createSchema()` runs), for
 * applications that apply their schema with migrations. `snapshot` is
 * `json` (kept as written: a load returns exactly what was saved), and
 * `revision` a column of its own for the checks.
 */
export function postgresSchema(table: string = DEFAULT_TABLE): string {
  return (
    `CREATE TABLE IF NOT EXISTS ${quotedTable(table)} (\n` +
    "  conversation_id text PRIMARY KEY,\n" +
    "  revision bigint NOT NULL CHECK (revision >= 0),\n" +
    "  snapshot json NOT NULL,\n" +
    "  updated_at timestamptz NOT NULL DEFAULT now()\n" +
    ")"
  );
}

/** PostgreSQL's error code (SQLSTATE) on a node-postgres error. */
function sqlState(error: unknown): string | undefined {
  const code = (error as { code?: unknown })?.code;
  return typeof code === "string" && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** A stored revision as node-postgres returns a `bigint` (a string by default). */
function revisionOf(row: Record<string, unknown> | undefined): number | null {
  return row === undefined ? null : Number(row.revision);
}

/** A store of snapshots in a PostgreSQL table. */
export function postgresStore(options: PostgresStoreOptions): PostgresStore {
  const pool = options?.pool;
  if (typeof pool?.query !== "function") throw new TypeError("postgresStore needs a pool: a pg.Pool (or anything with its query(text, values)).");
  const table = quotedTable(options.table ?? DEFAULT_TABLE);
  const schema = postgresSchema(options.table ?? DEFAULT_TABLE);
  const sql = {
    load: `SELECT revision, snapshot::text AS snapshot FROM ${table} WHERE conversation_id = $1`,
    revision: `SELECT revision FROM ${table} WHERE conversation_id = $1`,
    insert: `INSERT INTO ${table} (conversation_id, revision, snapshot) VALUES ($1, $2, $3) ON CONFLICT (conversation_id) DO NOTHING`,
    update: `UPDATE ${table} SET revision = $2, snapshot = $3, updated_at = now() WHERE conversation_id = $1 AND revision = $4`,
    delete: `DELETE FROM ${table} WHERE conversation_id = $1 AND revision = $2`,
    ids: `SELECT conversation_id FROM ${table} ORDER BY conversation_id`,
  };

  /** `error` as the store reports it (`reportedError`), a missing table with what to do. */
  function reported(error: unknown, operation: StoreOperation, id: string, signal: AbortSignal | undefined): unknown {
    const hint = sqlState(error) === "42P01" ? "create the table with the store's createSchema(), or the SQL of postgresSchema()" : undefined;
    return reportedError(error, operation, id, signal, hint);
  }

  /** The revision stored now, after a write the database refused: what the conflict reports. */
  async function currentRevision(id: string): Promise<number | null> {
    return revisionOf((await pool.query(sql.revision, [id])).rows[0]);
  }

  /** One statement decides the revision check and writes `text` (the snapshot's JSON, sent as it is). */
  async function write(id: string, text: string, revision: number, expected: number | null, signal: AbortSignal | undefined): Promise<void> {
    try {
      const query = expected === null ? pool.query(sql.insert, [id, revision, text]) : pool.query(sql.update, [id, revision, text, expected]);
      const { rowCount } = await untilAborted(query, signal);
      if (rowCount !== 1) throw new StoreConflictError("save", id, expected, await currentRevision(id));
    } catch (error) {
      throw reported(error, "save", id, signal);
    }
  }

  return {
    table,
    async createSchema(): Promise<void> {
      try {
        await pool.query(schema);
      } catch (error) {
        // Two hosts creating the table at once: one of them sees the other's
        // type or table appear (23505 on pg_type, 42710 "type … already
        // exists", 42P07); the table exists.
        if (!["23505", "42710", "42P07"].includes(sqlState(error) ?? "")) throw error;
      }
    },
    async conversationIds(): Promise<string[]> {
      return (await pool.query(sql.ids)).rows.map((row) => String(row.conversation_id));
    },
    conversation(id: string): ConversationStore {
      checkConversationId(id);
      return {
        async load(callOptions?: StoreCallOptions): Promise<Snapshot | null> {
          const signal = callOptions?.signal;
          let row: Record<string, unknown> | undefined;
          try {
            row = (await untilAborted(pool.query(sql.load, [id]), signal)).rows[0];
          } catch (error) {
            throw reported(error, "load", id, signal);
          }
          if (row === undefined) return null;
          const snapshot = parseSnapshot(String(row.snapshot));
          // The column decides the checks: a row edited by hand so that the two differ would conflict for ever.
          if (snapshot.revision !== revisionOf(row)) {
            throw new StoreFailedError("load", id, `the row's revision (${revisionOf(row)}) is not its snapshot's (${snapshot.revision}): it was changed outside the store`);
          }
          return snapshot;
        },
        async save(snapshot: Snapshot, callOptions: RevisionOptions): Promise<void> {
          const { expected, signal } = revisionArguments(callOptions);
          await write(id, snapshotToSave(snapshot, expected), snapshot.revision, expected, signal);
        },
        async saveText(snapshot: SnapshotText, callOptions: RevisionOptions): Promise<void> {
          const { expected, signal } = revisionArguments(callOptions);
          await write(id, textToSave(snapshot, expected), snapshot.revision, expected, signal);
        },
        async delete(callOptions: RevisionOptions): Promise<void> {
          const { expected, signal } = revisionArguments(callOptions);
          try {
            if (expected === null) {
              // Nothing to remove: the answer is whether a snapshot exists.
              requireRevision("delete", id, null, await untilAborted(currentRevision(id), signal));
              return;
            }
            const { rowCount } = await untilAborted(pool.query(sql.delete, [id, expected]), signal);
            if (rowCount !== 1) throw new StoreConflictError("delete", id, expected, await currentRevision(id));
          } catch (error) {
            throw reported(error, "delete", id, signal);
          }
        },
      };
    },
  };
}
