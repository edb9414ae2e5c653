/**
 * State and resume on a real PostgreSQL server (scripts/postgres-server.mjs),
 * at the session level: the host SIGKILLed and the conversation resumed by
 * another host process from the database; the server restarted in the
 * middle of a conversation. The store's own contract, its races and its
 * crash tests are in __test__/stores/postgres.test.ts.
 */
import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { createInterface } from "node:readline";
import { join } from "node:path";
import { Pool } from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RunError } from "../../lib/index";
import { postgresStore } from "../../lib/store/postgres";
import { startPostgres, type PostgresServer } from "../../scripts/postgres-server.mjs";
import { repoRoot } from "../helpers";
import { attachedSession, killBackends } from "./host-tools-harness";

let server: PostgresServer;
let pool: Pool;

beforeAll(async () => {
  server = await startPostgres();
  pool = new Pool({ ...server.connection, max: 4 });
  pool.on("error", () => {});
  await postgresStore({ pool }).createSchema();
}, 120_000);

afterAll(async () => {
  killBackends();
  await pool?.end();
  await server?.dispose();
});

describe.runIf(process.platform !== "win32")("state and resume on PostgreSQL, two hosts", () => {
  it("the first host SIGKILLed after three turns: a second host resumes from the database and answers turn four with all three", async () => {
    const id = `session-${randomUUID()}`;
    const host = spawn(process.execPath, [join(repoRoot, "__test__", "fixtures", "session-store-host.js"), repoRoot, JSON.stringify(server.connection), id, "one", "two", "three"], { stdio: ["ignore", "pipe", "inherit"] });
    const lines: Array<{ committed?: number; idle?: boolean; error?: string }> = [];
    for await (const line of createInterface({ input: host.stdout! })) {
      const message = JSON.parse(line);
      lines.push(message);
      if (message.idle || message.error) break;
    }
    expect(lines).toEqual([{ committed: 1 }, { committed: 2 }, { committed: 3 }, { idle: true }]);
    host.kill("SIGKILL");
    const { session } = await attachedSession({ env: { HOST_TOOLS_APP_STORE: "1" }, store: postgresStore({ pool }).conversation(id) });
    expect(await session.run("history")).toMatchObject({ finalOutput: "Seen 4 user messages: one | two | three | history" });
    expect((await postgresStore({ pool }).conversation(id).load())?.revision).toBe(4);
    await session.close();
  }, 60_000);

  it("two sessions continuing one conversation at once: exactly one run commits, the other fails with the revision conflict", async () => {
    const id = `race-${randomUUID()}`;
    const store = () => postgresStore({ pool }).conversation(id);
    const first = await attachedSession({ env: { HOST_TOOLS_APP_STORE: "1" }, store: store() });
    await first.session.run("one");
    const second = await attachedSession({ env: { HOST_TOOLS_APP_STORE: "1" }, store: store() });
    // Both loaded revision 1; both runs try to save revision 2.
    const outcomes = await Promise.all([first.session.run("left"), second.session.run("right")].map((run) => run.then(() => "committed", (e: unknown) => e)));
    expect(outcomes.filter((o) => o === "committed")).toHaveLength(1);
    const failure = outcomes.find((o) => o !== "committed");
    expect(failure).toBeInstanceOf(RunError);
    expect((failure as Error).message).toMatch(/[Rr]evision conflict/);
    const stored = await store().load();
    expect(stored?.revision).toBe(2);
    const winner = outcomes[0] === "committed" ? "left" : "right";
    expect(stored?.state.history.map((m) => m.content)).toContain(winner);
    await Promise.all([first.session.close(), second.session.close()]);
  }, 60_000);

  it("the server restarted mid-conversation: the run during the outage fails saying why, nothing committed is lost, the next run is saved", async () => {
    const id = `restart-${randomUUID()}`;
    const store = postgresStore({ pool }).conversation(id);
    const { session } = await attachedSession({ env: { HOST_TOOLS_APP_STORE: "1" }, store });
    await session.run("one");
    await server.stop();
    let failed: unknown;
    try {
      failed = await session.run("two").then(() => undefined, (e: unknown) => e);
    } finally {
      await server.start();
    }
    expect(failed).toBeInstanceOf(RunError);
    expect((failed as Error).message).toMatch(/store failed to save/i);
    expect((await store.load())?.revision).toBe(1);
    const third = await session.run("history");
    expect(third).toMatchObject({ status: "completed" });
    expect((await store.load())?.revision).toBe(2);
    await session.close();
  }, 60_000);
});
