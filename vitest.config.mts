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
    include: ["__test__/**/*.test.ts", "examples/testing/*.test.ts"],
    // End-to-end suites start real Python backends; decoding suites build
    // lines of hundreds of megabytes.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
  },
});
