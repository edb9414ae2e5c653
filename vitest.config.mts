import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["__test__/**/*.test.ts"],
    // End-to-end suites start real Python backends; decoding suites build
    // lines of hundreds of megabytes.
    testTimeout: 60_000,
    hookTimeout: 120_000,
    pool: "forks",
  },
});
