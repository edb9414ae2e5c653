/**
 * Warm starts through the session, with the real backend (issue 21;
 * docs/prefork.md): what a warm backend is (its processes, what `-m`
 * gives it), what forks share and what they do not, refusals and their
 * fallbacks, a factory that raises, the servers' life (idle time,
 * `closeWarmServers`, a start given up while the server imports), and the
 * descriptors a warm session holds in the host.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  closeWarmServers,
  createAgentSession,
  prewarm,
  SessionStartError,
  WarmStartError,
  type AgentSession,
  type BridgeProcessOptions,
  type JsonObject,
  type SessionDiagnostic,
  type WarmOption,
} from "../lib/index";
import { alive, goneWithin, repoRoot } from "./helpers";

const backends = join(repoRoot, "tests", "e2e", "backends");

function backend(app: string, warm: WarmOption = { fallback: "error" }, extra: Partial<BridgeProcessOptions> = {}): BridgeProcessOptions {
  return { command: join(repoRoot, ".venv", "bin", "python"), args: ["-m", "agentlane_process_bridge", "--app", app], cwd: backends, warm, ...extra };
}

/** A backend spec with its own prefork server (a distinct environment is a distinct key). */
function ownServer(app: string, name: string, warm: WarmOption = { fallback: "error" }): BridgeProcessOptions {
  return backend(app, warm, { env: { ...process.env, PBN_WARM_TEST: name } });
}

function parentOf(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")[1]);
}

const fds = () => readdirSync("/proc/self/fd").length;

afterAll(() => closeWarmServers({ kill: true }));

describe.runIf(process.platform === "linux")("warm starts", () => {
  it("a warm backend is forked by the prefork server and adopted by a supervisor of its own", async () => {
    const spec = backend("scenario_app:create_backend");
    const server = await prewarm(spec);
    const session = await createAgentSession({ backend: spec, onDiagnostic: () => {} });
    try {
      const info = session.process!;
      expect(info).toMatchObject({ start: "warm", mode: "supervised", processGroup: info.pid });
      expect(parentOf(info.pid!)).toBe(info.supervisorPid);
      expect(parentOf(info.supervisorPid!)).toBe(server.pid);
      expect(server).toMatchObject({ app: "scenario_app:create_backend", agentlane: "0.22.0" });
      expect(await session.run("chat warm")).toMatchObject({ status: "completed" });
    } finally {
      await session.close();
    }
  });

  it("every conversation draws its own randomness; the module is shared as imported, the factory's state is its own", async () => {
    const spec = backend("warm_probe_app:create_backend");
    const server = await prewarm(spec);
    const [a, b] = await Promise.all([createAgentSession({ backend: spec }), createAgentSession({ backend: spec })]);
    try {
      const [x, y] = [a.ready.metadata, b.ready.metadata] as JsonObject[];
      for (const key of ["random", "uuid", "secret", "pid"]) expect(x[key], key).not.toEqual(y[key]);
      // The module-level counter: each fork starts from its value at import.
      expect([x.factory_calls, y.factory_calls]).toEqual([1, 1]);
      // What was made at import was made once, in the server.
      expect([x.imported_in, y.imported_in]).toEqual([server.pid, server.pid]);
      // The conversation, made by the factory, is each one's own.
      expect(await a.run("count")).toMatchObject({ finalOutput: "This conversation has 1 user message(s)." });
      expect(await a.run("count")).toMatchObject({ finalOutput: "This conversation has 2 user message(s)." });
      expect(await b.run("count")).toMatchObject({ finalOutput: "This conversation has 1 user message(s)." });
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it("the backend sees what `python -m agentlane_process_bridge` gives it cold", async () => {
    const warm = await createAgentSession({ backend: backend("warm_probe_app:create_backend") });
    const cold = await createAgentSession({ backend: backend("warm_probe_app:create_backend", false) });
    try {
      expect(cold.process!.start).toBe("cold");
      const [w, c] = [warm.ready.metadata, cold.ready.metadata] as JsonObject[];
      for (const key of ["argv", "path0", "main_file", "main_spec", "stdio", "factory_calls"]) expect(w[key], key).toEqual(c[key]);
      expect(w.pgid).toBe(warm.process!.pid);
      expect(c.imported_in).toBe(c.pid);
    } finally {
      await Promise.all([warm.close(), cold.close()]);
    }
  });

  it("an app that starts a thread at import is refused (threads): fallback error fails the start, fallback cold starts it cold", async () => {
    const refused = await createAgentSession({ backend: backend("warm_thread_app:create_backend") }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(SessionStartError);
    expect(refused).toMatchObject({ code: "warm-unavailable" });
    const cause = (refused as SessionStartError).cause as WarmStartError;
    expect(cause).toBeInstanceOf(WarmStartError);
    expect(cause.reason).toBe("threads");
    expect(cause.message).toContain("import-time-poller");

    for (let i = 0; i < 2; i++) {
      // The second start of the key falls back at once: the refusal is remembered.
      const diagnostics: SessionDiagnostic[] = [];
      const session = await createAgentSession({
        backend: backend("warm_thread_app:create_backend", { fallback: "cold" }),
        onDiagnostic: (d) => diagnostics.push(d),
      });
      try {
        expect(session.process!.start).toBe("cold");
        expect(diagnostics.filter((d) => d.kind === "warm")).toEqual([expect.objectContaining({ kind: "warm", event: "fallback", reason: "threads" })]);
        expect(await session.run("chat")).toMatchObject({ status: "completed" });
      } finally {
        await session.close();
      }
    }
  });

  it("without the supervisor, or for a command that is not `-m agentlane_process_bridge --app`, a warm start falls back, or fails, as asked", async () => {
    const cases: [BridgeProcessOptions, string][] = [
      [backend("scenario_app:create_backend", { fallback: "cold" }, { supervise: false }), "no-supervisor"],
      [{ command: join(repoRoot, ".venv", "bin", "python"), args: [join(backends, "stubborn.py")], warm: { fallback: "cold" } }, "not-warmable"],
    ];
    for (const [spec, reason] of cases) {
      const diagnostics: SessionDiagnostic[] = [];
      const session = await createAgentSession({ backend: spec, onDiagnostic: (d) => diagnostics.push(d), shutdownGraceMs: 200, termGraceMs: 200 });
      expect(session.process!.start).toBe("cold");
      expect(diagnostics.find((d) => d.kind === "warm")).toMatchObject({ event: "fallback", reason });
      await session.close();
      const failed = await createAgentSession({ backend: { ...spec, warm: { fallback: "error" } } }).catch((error: unknown) => error);
      expect(failed).toMatchObject({ name: "SessionStartError", code: "warm-unavailable", cause: { name: "WarmStartError", reason } });
    }
  });

  it("a factory that raises fails the start as it does cold: exited-before-ready, its message in the stderr tail", async () => {
    const outcomes = [];
    for (const warm of [{ fallback: "error" as const }, false]) {
      const error = (await createAgentSession({ backend: backend("warm_probe_app:failing_backend", warm) }).catch((e: unknown) => e)) as SessionStartError;
      expect(error).toBeInstanceOf(SessionStartError);
      outcomes.push({ code: error.code, exitCode: error.exitCode, likelyCause: error.likelyCause, last: error.stderrTail.at(-1) });
    }
    expect(outcomes[0]).toEqual({
      code: "exited-before-ready",
      exitCode: 1,
      likelyCause: "The backend stopped at startup: the factory failed on purpose",
      last: "agentlane_process_bridge: the factory failed on purpose",
    });
    expect(outcomes[1]).toEqual(outcomes[0]);
  });

  it("an app that cannot be imported: fallback cold fails as cold does, fallback error names import-failed", async () => {
    const diagnostics: SessionDiagnostic[] = [];
    const cold = (await createAgentSession({
      backend: ownServer("no_such_module:create_backend", "import", { fallback: "cold" }),
      onDiagnostic: (d) => diagnostics.push(d),
    }).catch((e: unknown) => e)) as SessionStartError;
    expect(diagnostics.find((d) => d.kind === "warm")).toMatchObject({ event: "fallback", reason: "import-failed" });
    expect(cold).toMatchObject({ code: "exited-before-ready", exitCode: 1 });
    expect(cold.likelyCause).toContain("The app module failed to import (No module named 'no_such_module')");
    const refused = await createAgentSession({ backend: ownServer("no_such_module:create_backend", "import") }).catch((e: unknown) => e);
    expect(refused).toMatchObject({ code: "warm-unavailable", cause: { reason: "import-failed" } });
  });

  it("an unusable warm option is refused before anything starts", async () => {
    for (const warm of [{ fallback: "never" }, { idleMs: -1 }, { idleMs: Number.NaN }, "yes"]) {
      const error = await createAgentSession({ backend: backend("scenario_app:create_backend", warm as WarmOption) }).catch((e: unknown) => e);
      expect(error).toMatchObject({ name: "SessionStartError", code: "invalid-spec", cause: { name: "InvalidOptionError" } });
    }
  });

  it("a server goes after its idle time once its last conversation has ended; the next conversation starts a new one", async () => {
    const spec = ownServer("scenario_app:create_backend", "idle", { fallback: "error", idleMs: 200 });
    const first = await prewarm(spec);
    const session = await createAgentSession({ backend: spec });
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(alive(first.pid), "the server went while a conversation ran").toBe(true);
    await session.close();
    expect(await goneWithin(first.pid, 5000)).toBe(true);
    expect(await goneWithin(first.supervisorPid!, 5000)).toBe(true);
    const second = await prewarm(spec);
    expect(second.pid).not.toBe(first.pid);
    await closeWarmServers();
    expect(await goneWithin(second.pid, 5000)).toBe(true);
  });

  it("closeWarmServers lets running conversations finish, then the servers exit", async () => {
    const spec = ownServer("scenario_app:create_backend", "close");
    const server = await prewarm(spec);
    const session = await createAgentSession({ backend: spec });
    let closedAll = false;
    const closing = closeWarmServers().then(() => (closedAll = true));
    // A new conversation of the key gets a new server.
    const next = await createAgentSession({ backend: spec });
    expect(parentOf(next.process!.supervisorPid!)).not.toBe(server.pid);
    expect(await session.run("chat still")).toMatchObject({ status: "completed" });
    expect(closedAll).toBe(false);
    await session.close();
    await closing;
    expect(await goneWithin(server.pid, 5000)).toBe(true);
    await next.close();
  });

  it("a start given up while the server imports forks nothing, and the server still serves the next one", async () => {
    const spec = ownServer("scenario_app:create_backend", "given-up");
    const error = await createAgentSession({ backend: spec, readyTimeoutMs: 50 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "ready-timeout" });
    const server = await prewarm(spec);
    // The server's only children are the conversations' supervisors: none.
    expect(readFileSync(`/proc/${server.pid}/task/${server.pid}/children`, "utf8").trim()).toBe("");
    const session = await createAgentSession({ backend: spec });
    expect(session.process!.start).toBe("warm");
    await session.close();
  });

  it("a warm session holds as many descriptors in the host as a cold one (4)", async () => {
    const perSession = async (warm: WarmOption) => {
      const spec = backend("scenario_app:create_backend", warm);
      if (warm) await prewarm(spec); // the server's own descriptors are per server
      const before = fds();
      const sessions: AgentSession[] = [];
      for (let i = 0; i < 6; i++) {
        const session = await createAgentSession({ backend: spec });
        sessions.push(session);
        // Started is known before ready is (warm: held back until the supervisor says it).
        expect(session.process?.pid).toBeGreaterThan(0);
      }
      const during = fds();
      await Promise.all(sessions.map((s) => s.close()));
      await new Promise((resolve) => setTimeout(resolve, 100));
      return { perSession: (during - before) / sessions.length, left: fds() - before };
    };
    const cold = await perSession(false);
    const warm = await perSession({ fallback: "error" });
    expect(cold).toEqual({ perSession: 4, left: 0 });
    expect(warm).toEqual(cold);
  });
});

describe.runIf(process.platform === "linux")("warm starts in a host of their own", () => {
  it("a host awaiting closeWarmServers() stays until its servers have exited, then exits by itself", async () => {
    const script = `
      const { prewarm, closeWarmServers } = require(${JSON.stringify(join(repoRoot, "dist", "index.js"))});
      (async () => {
        const server = await prewarm(${JSON.stringify(backend("scenario_app:create_backend"))});
        await closeWarmServers();
        console.log(JSON.stringify({ closed: server.pid }));
      })();`;
    const { execFileSync } = await import("node:child_process");
    const out = execFileSync(process.execPath, ["-e", script], { encoding: "utf8", timeout: 60_000 });
    const { closed } = JSON.parse(out.trim()) as { closed: number };
    expect(alive(closed)).toBe(false);
  });
});
