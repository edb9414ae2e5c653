/**
 * Setup file of the session suites (vitest.config.mts, project "session"):
 * `spawnPlanned` (the cold spawn of a resolved start, what the session's
 * start seam and a warm start's cold fallback call), wrapped by the
 * harness's spy (`spySpawn`), so that a test can reach the child and the
 * moment the session has processed its exit. One place for every session
 * suite, instead of the same `vi.mock` in each file.
 */
import { vi } from "vitest";

vi.mock("../../lib/process", async (importOriginal) => {
  const actual = await importOriginal<typeof import("../../lib/process")>();
  const { spySpawn } = await import("./harness");
  return { ...actual, spawnPlanned: spySpawn(actual.spawnPlanned) };
});
