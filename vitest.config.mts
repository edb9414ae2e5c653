import { availableParallelism } from "node:os";
import { defineConfig } from "vitest/config";

export default defineConfig({
  // The package by its own name (examples/testing shows an application's
  // suite): the TypeScript sources, as every other suite uses them.
  resolve: {
    alias: [
      { find: /^@agentlanejs\/process-bridge-native\/testing$/, replacement: new URL("./lib/testing/index.ts", import.meta.url).pathname },
      { find: /^@agentlanejs\/process-bridge-native$/, replacement: new URL("./lib/index.ts", import.meta.url).pathname },
    ],
  },
  test: {
    // End-to-end suites start real Python backends; decoding suites build
    // lines of hundreds of megabytes.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
    // Two files at a time even on 2 cores (vitest's default there is one):
    // most of a file's time is spent waiting on its child processes (a
    // backend's start, a grace period, an exit), so one file at a time left
    // a core idle (CI: the files' own times summed to 95% of the run's).
    maxWorkers: Math.max(2, availableParallelism() - 1),
    projects: [
      {
        extends: true,
        test: { name: "main", include: ["__test__/**/*.test.ts", "examples/testing/*.test.ts"], exclude: ["__test__/session/**", "__test__/vm-realm.test.ts"] },
      },
      {
        // Test files in a vm context, as vitest's vmThreads pool and Jest
        // run them: the README's `await using` pattern must work there too
        // (the testing kit's example, and the session on the real backend).
        extends: true,
        test: { name: "vm-realm", pool: "vmThreads", include: ["__test__/vm-realm.test.ts", "examples/testing/*.test.ts"] },
      },
      {
        // The session suites drive createAgentSession through the harness's
        // spy of spawnBridgeProcess (__test__/session/spawn-spy.ts).
        extends: true,
        test: { name: "session", include: ["__test__/session/**/*.test.ts"], setupFiles: ["__test__/session/spawn-spy.ts"] },
      },
      {
        // The same suites through attachAgentSession and an in-memory fake
        // backend (harness.ts, MemoryFake): every scenario through both.
        extends: true,
        test: {
          name: "session-attach",
          include: ["__test__/session/**/*.test.ts"],
          setupFiles: ["__test__/session/spawn-spy.ts"],
          env: { PBN_SESSION_TRANSPORT: "attach" },
        },
      },
    ],
  },
});
