/**
 * The session in a `vm` context (issue 29, item 8): vitest's `vmThreads`
 * pool and Jest run test files in one, where Node 20 and 22 have no
 * `Symbol.asyncDispose` and `await using` looks the disposer up by
 * `Symbol.for("Symbol.asyncDispose")`. This file runs only in the vitest
 * project "vm-realm" (pool `vmThreads`), with the real backend; the
 * testing kit's example (examples/testing/app.test.ts) runs there too.
 */
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { createAgentSession } from "../lib/index";
import { goneWithin, repoRoot } from "./helpers";

const backend = {
  command: join(repoRoot, ".venv", "bin", "python"),
  args: ["-m", "agentlane_process_bridge", "--app", "scenario_app:create_backend"],
  cwd: join(repoRoot, "tests", "e2e", "backends"),
};

/** The `Object.prototype` at the end of a value's prototype chain: its realm's. */
function realmOf(value: object): object {
  let prototype: object = value;
  for (let next = Object.getPrototypeOf(prototype); next !== null; next = Object.getPrototypeOf(prototype)) prototype = next;
  return prototype;
}

describe("in a vm context", () => {
  it("runs in one: Node's own objects come from another realm", () => {
    expect(realmOf(process)).not.toBe(Object.prototype);
  });

  it("await using session = await createAgentSession(…) closes the session at the end of its scope", async () => {
    let pid: number | undefined;
    {
      // Before: TypeError "Object is not disposable." here, on Node 20 and 22.
      await using session = await createAgentSession({ backend, onDiagnostic: () => {} });
      pid = session.process?.pid;
      expect(await session.run("chat in a vm")).toMatchObject({ status: "completed" });
    }
    expect(pid).toBeTypeOf("number");
    expect(await goneWithin(pid!)).toBe(true);
  });
});
