/**
 * Prefork servers under abuse (issue 29), through the session with the real
 * backend: an app that starts a process at import (item 2), fallbacks and
 * start slots (item 3), servers that never had a conversation (item 9),
 * what an import does, warm as cold (item 10), servers that multiply with
 * their key, and one shared by the workers of a test run (item 11), starts
 * caught by `closeWarmServers()` (item 13), and a refusal's log tail
 * (item 17).
 */
import { execFile } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  closeWarmServers,
  createAgentSession,
  prewarm,
  SessionStartError,
  setMaxConcurrentStarts,
  startSlots,
  WarmStartError,
  type AgentSession,
  type BridgeProcessOptions,
  type JsonObject,
  type SessionDiagnostic,
  type WarmOption,
} from "../lib/index";
import { alive, goneWithin, repoRoot } from "./helpers";

const backends = join(repoRoot, "tests", "e2e", "backends");
const python = join(repoRoot, ".venv", "bin", "python");

/** A backend spec with its own prefork server (a distinct environment is a distinct key). */
function ownServer(app: string, name: string, warm: WarmOption = { fallback: "error" }): BridgeProcessOptions {
  return { command: python, args: ["-m", "agentlane_process_bridge", "--app", app], cwd: backends, warm, env: { ...process.env, PBN_WARM_TEST: name } };
}

function childrenOf(pid: number): number[] {
  const text = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim();
  return text === "" ? [] : text.split(/\s+/).map(Number);
}

function parentOf(pid: number): number {
  return Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ")[1]);
}

/** The processes whose environment has `PBN_WARM_TEST=<name>` (a server of `ownServer(…, name)`, what it forked). */
function processesOf(name: string): number[] {
  const marker = `PBN_WARM_TEST=${name}\0`;
  const found: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, "latin1").includes(marker) && alive(Number(entry))) found.push(Number(entry));
    } catch {
      // Gone meanwhile, or not ours.
    }
  }
  return found;
}

async function noneLeftOf(name: string, timeoutMs = 15_000): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  while (processesOf(name).length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  return processesOf(name);
}

afterAll(() => closeWarmServers({ kill: true }));

describe.runIf(process.platform === "linux")("an app that starts a process at import (item 2)", () => {
  for (const app of ["warm_popen_app:create_backend", "warm_fork_app:create_backend"]) {
    it(`${app}: closeWarmServers() resolves once the conversation has ended, and the import's process ends with the server`, async () => {
      const spec = ownServer(app, `import-child-${app}`);
      const server = await prewarm(spec);
      const [helper] = childrenOf(server.pid);
      expect(alive(helper)).toBe(true);
      const session = await createAgentSession({ backend: spec, onDiagnostic: () => {} });
      expect(await session.run("chat")).toMatchObject({ status: "completed" });
      await session.close();
      await closeWarmServers();
      expect(alive(server.pid)).toBe(false);
      expect(await goneWithin(helper, 10_000)).toBe(true);
    });
  }

  it("its server goes after its idle time, the import's process with it", async () => {
    const spec = ownServer("warm_popen_app:create_backend", "import-child-idle", { fallback: "error", idleMs: 200 });
    const server = await prewarm(spec);
    const [helper] = childrenOf(server.pid);
    const session = await createAgentSession({ backend: spec, onDiagnostic: () => {} });
    await session.close();
    expect(await goneWithin(server.pid, 15_000)).toBe(true);
    expect(await goneWithin(helper, 10_000)).toBe(true);
  });

  it("closeWarmServers({ kill: true }) still reaches a server closed before, and its conversation", async () => {
    const spec = ownServer("warm_popen_app:create_backend", "import-child-kill");
    const server = await prewarm(spec);
    let closed!: (close: unknown) => void;
    const sessionClosed = new Promise((resolve) => (closed = resolve));
    const session = await createAgentSession({ backend: spec, onClose: (close) => closed(close), onDiagnostic: () => {} });
    // Closed, it waits for its running conversation...
    const closing = closeWarmServers();
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(alive(server.pid)).toBe(true);
    // ...which a later kill ends, with the server.
    await closeWarmServers({ kill: true });
    await closing;
    expect(alive(server.pid)).toBe(false);
    expect(alive(session.process!.pid!)).toBe(false);
    expect(await sessionClosed).toMatchObject({ reason: "exit" });
    expect(await noneLeftOf("import-child-kill")).toEqual([]);
  });
});

describe.runIf(process.platform === "linux")("a warm start that falls back cold takes a start slot (item 3)", () => {
  it("six refused warm starts at once import cold two at a time", async () => {
    const previous = setMaxConcurrentStarts(2);
    const spec = ownServer("warm_thread_app:create_backend", "slots", { fallback: "cold" });
    const seen: ReturnType<typeof startSlots>[] = [];
    const poll = setInterval(() => seen.push(startSlots()), 5);
    let sessions: AgentSession[] = [];
    try {
      sessions = await Promise.all(Array.from({ length: 6 }, () => createAgentSession({ backend: spec, onDiagnostic: () => {} })));
    } finally {
      clearInterval(poll);
      setMaxConcurrentStarts(previous);
    }
    expect(sessions.map((s) => s.process!.start)).toEqual(Array(6).fill("cold"));
    expect(Math.max(...seen.map((s) => s.starting))).toBe(2);
    expect(Math.max(...seen.map((s) => s.waiting))).toBeGreaterThan(0);
    expect(startSlots()).toMatchObject({ starting: 0, waiting: 0 });
    await Promise.all(sessions.map((s) => s.close()));
  });
});

describe.runIf(process.platform === "linux")("a server that never had a conversation idles out too (item 9)", () => {
  it("prewarm() alone", async () => {
    const server = await prewarm(ownServer("scenario_app:create_backend", "idle-prewarm", { fallback: "error", idleMs: 300 }));
    expect(await goneWithin(server.pid, 15_000)).toBe(true);
    expect(await noneLeftOf("idle-prewarm")).toEqual([]);
  });

  it("a server whose only start gave up while it imported", async () => {
    const spec = ownServer("scenario_app:create_backend", "idle-given-up", { fallback: "error", idleMs: 300 });
    const error = await createAgentSession({ backend: spec, readyTimeoutMs: 50 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "ready-timeout" });
    expect(processesOf("idle-given-up").length).toBeGreaterThan(0);
    expect(await noneLeftOf("idle-given-up")).toEqual([]);
  });
});

describe.runIf(process.platform === "linux")("what an import does, warm as cold (item 10)", () => {
  it("its output reaches every conversation's stderr diagnostics; its SIGCHLD handler is the backend's", async () => {
    const open = async (warm: WarmOption) => {
      const lines: string[] = [];
      const session = await createAgentSession({
        backend: { ...ownServer("warm_banner_app:create_backend", "banner", warm) },
        onDiagnostic: (d) => d.kind === "stderr" && lines.push(d.line),
      });
      const metadata = session.ready.metadata as JsonObject;
      await session.close();
      return { start: session.process!.start, lines, sigchld: metadata.sigchld, atexit: metadata.atexit };
    };
    const cold = await open(false);
    expect(cold.lines).toContain("banner: warm_banner_app imported");
    const first = await open({ fallback: "error" });
    const second = await open({ fallback: "error" });
    expect(first).toEqual({ ...cold, start: "warm" });
    expect(second).toEqual(first);
  });
});

describe.runIf(process.platform === "linux")("servers and their keys (item 11)", () => {
  it("a new server started because the key differs says which variables differ (not their values)", async () => {
    const spec = ownServer("scenario_app:create_backend", "key");
    await prewarm(spec);
    const diagnostics: SessionDiagnostic[] = [];
    const session = await createAgentSession({
      backend: { ...spec, env: { ...spec.env, REQUEST_ID: "secret-request-7" } },
      onDiagnostic: (d) => diagnostics.push(d),
    });
    await session.close();
    const warm = diagnostics.filter((d) => d.kind === "warm");
    expect(warm).toEqual([expect.objectContaining({ kind: "warm", event: "new-server", reason: null })]);
    const message = (warm[0] as { message: string }).message;
    expect(message).toContain("the environment (REQUEST_ID)");
    expect(message).not.toContain("secret-request-7");
    // The same key again: no new server, nothing said.
    const again: SessionDiagnostic[] = [];
    const next = await createAgentSession({ backend: spec, onDiagnostic: (d) => again.push(d) });
    await next.close();
    expect(again.filter((d) => d.kind === "warm")).toEqual([]);
  });

  for (const pool of ["forks", "threads"]) {
    it(`a test run's workers (vitest, pool ${pool}) share one server started in globalSetup`, async () => {
      const results = mkdtempSync(join(tmpdir(), "pbn-shared-results-"));
      const sockets = () => readdirSync(tmpdir()).filter((name) => name.startsWith("pbn-warm-"));
      const socketsBefore = sockets();
      try {
        const config = join(__dirname, "fixtures", "shared-warm", "vitest.config.mjs");
        const env = { ...process.env, PBN_BACKENDS: backends, PBN_RESULTS: results, PBN_POOL: pool };
        const vitest = join(repoRoot, "node_modules", "vitest", "vitest.mjs");
        const output = await new Promise<string>((resolve, reject) =>
          execFile(process.execPath, [vitest, "run", "--config", config], { env, timeout: 120_000 }, (error, stdout, stderr) =>
            error ? reject(new Error(`${error.message}\n${stdout}\n${stderr}`)) : resolve(stdout),
          ),
        );
        expect(output).toContain("3 passed");
        const files = ["a", "b", "c"].map((name) => JSON.parse(readFileSync(join(results, `${name}.json`), "utf8")) as { start: string; server: number; worker: string; diagnostics: string[] });
        // Three workers, one server: every conversation forked from it (one import for the run).
        expect(new Set(files.map((f) => f.worker)).size).toBe(3);
        const server = files[0].server;
        expect(files.map((f) => ({ start: f.start, server: f.server, diagnostics: f.diagnostics }))).toEqual(Array(3).fill({ start: "warm", server, diagnostics: [] }));
        // The run's end closed it, and removed its socket.
        expect(await goneWithin(server, 10_000)).toBe(true);
        expect(sockets().filter((name) => !socketsBefore.includes(name))).toEqual([]);
      } finally {
        rmSync(results, { recursive: true, force: true });
      }
    }, 150_000);
  }
});

describe.runIf(process.platform === "linux")("starts caught by closeWarmServers() (item 13)", () => {
  it("starts waiting for an importing server fall back cold, or fail, as server-closed", async () => {
    for (const kill of [false, true]) {
      const name = `closed-waiting-${kill}`;
      const cold: SessionDiagnostic[] = [];
      const falling = createAgentSession({ backend: ownServer("scenario_app:create_backend", name, { fallback: "cold" }), onDiagnostic: (d) => cold.push(d) });
      const failing = createAgentSession({ backend: ownServer("scenario_app:create_backend", name) }).catch((e: unknown) => e);
      await closeWarmServers({ kill });
      const session = await falling;
      expect(session.process!.start).toBe("cold");
      expect(cold.filter((d) => d.kind === "warm" && d.event === "fallback")).toEqual([expect.objectContaining({ reason: "server-closed" })]);
      await session.close();
      const error = (await failing) as SessionStartError;
      expect(error).toMatchObject({ code: "warm-unavailable", cause: { reason: "server-closed" } });
      expect(error.message).toContain("closeWarmServers() closed the prefork server");
    }
  });

  it("with kill, starts forked but not yet ready fall back cold, or fail, as server-closed; a ready conversation says server-exited", async () => {
    const spec = (warm: WarmOption) => ownServer("scenario_app:create_backend", "closed-forked", warm);
    await prewarm(spec({ fallback: "error" }));
    const readyDiagnostics: SessionDiagnostic[] = [];
    let readyClosed!: () => void;
    const readyClosing = new Promise<void>((resolve) => (readyClosed = resolve));
    await createAgentSession({ backend: spec({ fallback: "error" }), onDiagnostic: (d) => readyDiagnostics.push(d), onClose: () => readyClosed() });
    const cold: SessionDiagnostic[][] = [];
    const falling = Array.from({ length: 3 }, () => {
      const diagnostics: SessionDiagnostic[] = [];
      cold.push(diagnostics);
      return createAgentSession({ backend: spec({ fallback: "cold" }), onDiagnostic: (d) => diagnostics.push(d) });
    });
    const failing = Array.from({ length: 3 }, () => createAgentSession({ backend: spec({ fallback: "error" }) }).catch((e: unknown) => e));
    // The forks are sent (this turn of the event loop), not yet ready.
    await closeWarmServers({ kill: true });
    const sessions = await Promise.all(falling);
    expect(sessions.map((s) => s.process!.start)).toEqual(["cold", "cold", "cold"]);
    for (const diagnostics of cold) {
      expect(diagnostics.filter((d) => d.kind === "warm" && d.event === "fallback")).toEqual([expect.objectContaining({ reason: "server-closed" })]);
    }
    for (const error of await Promise.all(failing)) {
      expect(error).toBeInstanceOf(SessionStartError);
      expect(error).toMatchObject({ code: "warm-unavailable", cause: { reason: "server-closed" } });
    }
    await readyClosing;
    expect(readyDiagnostics.filter((d) => d.kind === "warm")).toEqual([
      expect.objectContaining({ event: "server-exited", message: expect.stringContaining("was killed by closeWarmServers({ kill: true })") }),
    ]);
    await Promise.all(sessions.map((s) => s.close()));
  });
});

describe.runIf(process.platform === "linux")("a refusal's log tail (item 17)", () => {
  it("holds the import's whole traceback, every time", async () => {
    for (let attempt = 0; attempt < 10; attempt++) {
      const error = (await prewarm(ownServer("warm_boom_app:create_backend", "boom")).catch((e: unknown) => e)) as WarmStartError;
      expect(error).toBeInstanceOf(WarmStartError);
      expect(error.reason).toBe("import-failed");
      expect(error.logTail[0], `attempt ${attempt}`).toBe("Traceback (most recent call last):");
      expect(error.logTail.at(-1), `attempt ${attempt}`).toBe("RuntimeError: boom at import");
      await closeWarmServers();
    }
  });
});
