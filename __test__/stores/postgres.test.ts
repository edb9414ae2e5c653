/**
 * The PostgreSQL store on a real server (scripts/postgres-server.mjs: Debian's
 * PostgreSQL in a temporary folder, never a mock): the store contract;
 * two hosts (real Node processes, fixtures/store-host.js) on one database,
 * a conversation resumed on the second after the first is SIGKILLed
 * mid-save, and both saving one conversation at once; the server
 * restarted mid-conversation.
 */
import { randomUUID } from "node:crypto";
import { Pool } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SnapshotError, StoreConflictError, StoreFailedError, InvalidOptionError, type Snapshot } from "../../lib/index";
import { DEFAULT_TABLE, postgresSchema, postgresStore, type PostgresStore } from "../../lib/store/postgres";
import { rejectionOf, storeContract } from "./contract";
import { raceSaves, StoreHost } from "./hosts";
import { startPostgres, type PostgresServer } from "../../scripts/postgres-server.mjs";
import { fixture, revisionOfTagged, taggedSnapshot } from "./snapshots";

let server: PostgresServer;
let pool: Pool;
let store: PostgresStore;
/** What the pool reported through its `error` event (idle connections the server ended). */
const poolErrors: Error[] = [];

beforeAll(async () => {
  server = await startPostgres();
  pool = new Pool({ ...server.connection, max: 4 });
  pool.on("error", (error) => poolErrors.push(error));
  store = postgresStore({ pool });
  await store.createSchema();
}, 120_000);

afterAll(async () => {
  await pool?.end();
  await server?.dispose();
});

function at(revision: number): Snapshot {
  return { ...fixture("one-turn"), revision };
}

describe("postgresStore", () => {
  storeContract(() => store);

  it("keeps one row per conversation: the revision in its own column, the snapshot as written", async () => {
    const id = `row-${randomUUID()}`;
    await store.conversation(id).save(fixture("conversation"), { expectedRevision: null });
    const { rows } = await pool.query(`SELECT revision, snapshot::text AS text FROM ${DEFAULT_TABLE} WHERE conversation_id = $1`, [id]);
    expect(rows).toHaveLength(1);
    expect(Number(rows[0].revision)).toBe(5);
    expect(JSON.parse(rows[0].text)).toEqual(fixture("conversation"));
    expect(await store.conversationIds()).toContain(id);
  });

  it("createSchema is safe when several hosts run it at once, and on a table that exists; the SQL is there for migrations", async () => {
    for (let round = 0; round < 5; round += 1) {
      const table = `race_${round}_${randomUUID().slice(0, 8)}`;
      const stores = Array.from({ length: 4 }, () => postgresStore({ pool, table }));
      await Promise.all(stores.map((each) => each.createSchema()));
      await stores[0]!.createSchema();
      await stores[1]!.conversation("x").save(at(1), { expectedRevision: null });
      expect((await stores[2]!.conversation("x").load())!.revision).toBe(1);
    }
    expect(postgresSchema("app.snapshots")).toMatch(/^CREATE TABLE IF NOT EXISTS "app"\."snapshots" \(\n {2}conversation_id text PRIMARY KEY,/);
  });

  it("a table that does not exist: store-failed saying how to create it; a bad table name or pool is refused at once", async () => {
    const missing = postgresStore({ pool, table: `missing_${randomUUID().slice(0, 8)}` });
    const error = await rejectionOf(StoreFailedError, missing.conversation("x").load());
    expect([error.code, error.operation, error.conversationId]).toEqual(["store-failed", "load", "x"]);
    expect(error.message).toContain("createSchema()");
    expect((error.cause as { code: string }).code).toBe("42P01");
    for (const table of ['snap"shots', "a.b.c", "", "1abc", "x".repeat(64)]) {
      expect(() => postgresStore({ pool, table }), table).toThrow(InvalidOptionError);
    }
    expect(() => postgresStore({ pool: {} as Pool })).toThrow(TypeError);
  });

  it("a corrupted row is refused on load (snapshot-corrupted), not handed on", async () => {
    const id = `corrupt-${randomUUID()}`;
    await pool.query(`INSERT INTO ${DEFAULT_TABLE} (conversation_id, revision, snapshot) VALUES ($1, 1, $2)`, [id, JSON.stringify({ ...at(1), state: null })]);
    const error = await store.conversation(id).load().catch((reason: unknown) => reason);
    expect(error).toBeInstanceOf(SnapshotError);
    expect([(error as SnapshotError).code, (error as SnapshotError).field]).toEqual(["snapshot-corrupted", "state"]);
  });

  it("a row whose revision column and snapshot disagree (edited by hand) is store-failed on load, saying so", async () => {
    const id = `edited-${randomUUID()}`;
    await store.conversation(id).save(at(1), { expectedRevision: null });
    await pool.query(`UPDATE ${DEFAULT_TABLE} SET revision = 9 WHERE conversation_id = $1`, [id]);
    const error = await rejectionOf(StoreFailedError, store.conversation(id).load());
    expect(error.message).toContain("the row's revision (9) is not its snapshot's (1): it was changed outside the store");
  });

  it("two hosts on one database: the first SIGKILLed while saving, the second resumes the conversation where it was committed and goes on", async () => {
    const id = `resume-${randomUUID()}`;
    const template = JSON.stringify(taggedSnapshot(0, 100, 200));
    const first = await StoreHost.start({ kind: "postgres", connection: server.connection });
    const second = await StoreHost.start({ kind: "postgres", connection: server.connection });
    try {
      void first.send({ op: "churn", id, template });
      for (let commits = 0; commits < 5; commits += 1) await first.nextCommit();
      await first.kill();
      expect(first.errors).toBe("");
      const committed = Math.max(...first.committed);
      const loaded = await second.send({ op: "load", id });
      const revision = revisionOfTagged(loaded.snapshot!);
      expect([committed, committed + 1]).toContain(revision);
      // Nothing of the dead host is in the way (no lock, no open transaction).
      const next = { ...taggedSnapshot(revision + 1, 101, 200) };
      expect(await second.send({ op: "save", id, snapshot: next, expectedRevision: revision })).toEqual({ ok: true });
      expect(await store.conversation(id).load()).toEqual(next);
    } finally {
      await first.kill();
      await second.end();
    }
  }, 60_000);

  it("two hosts saving one conversation at once: exactly one wins, the other gets revision-conflict, 40 rounds", async () => {
    const id = `race-${randomUUID()}`;
    const hosts = await Promise.all([0, 1].map(() => StoreHost.start({ kind: "postgres", connection: server.connection })));
    try {
      await raceSaves(hosts, id, store.conversation(id), 40);
    } finally {
      await Promise.all(hosts.map((host) => host.end()));
    }
  }, 60_000);

  it("the server restarted mid-conversation: a clear store-failed while it is down, nothing committed lost, the next save works", async () => {
    const id = `restart-${randomUUID()}`;
    const conversation = store.conversation(id);
    await conversation.save(taggedSnapshot(1, 10), { expectedRevision: null });
    await conversation.save(taggedSnapshot(2, 11), { expectedRevision: 1 });
    await server.stop();
    try {
      const save = await rejectionOf(StoreFailedError, conversation.save(taggedSnapshot(3, 12), { expectedRevision: 2 }));
      expect([save.code, save.operation]).toEqual(["store-failed", "save"]);
      expect(save.message).toMatch(/^The store failed to save conversation "restart-[^"]+": /);
      expect(save.cause).toBeInstanceOf(Error);
      const load = await rejectionOf(StoreFailedError, conversation.load());
      expect(load.operation).toBe("load");
    } finally {
      await server.start();
    }
    const loaded = await conversation.load();
    expect(revisionOfTagged(loaded!)).toBe(2);
    await conversation.save(taggedSnapshot(3, 12), { expectedRevision: 2 });
    expect(revisionOfTagged((await conversation.load())!)).toBe(3);
    // The stale save of a host that missed the restart is still a conflict, not a lost update.
    await expect(conversation.save(taggedSnapshot(3, 12), { expectedRevision: 2 })).rejects.toBeInstanceOf(StoreConflictError);
  }, 60_000);
});
