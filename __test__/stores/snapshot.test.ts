/**
 * The snapshot checks (lib/store/snapshot.ts) on snapshots the real
 * agentlane wrote (tests/fixtures/snapshots/, and written afresh by the
 * same script), and their verdicts on broken documents next to agentlane's
 * own (`AgentSnapshot.from_json` in a real Python process): whatever
 * agentlane refuses is refused here, before anything starts, with its code
 * and field; where this package is stricter the case is named.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  checkSnapshot,
  parseSnapshot,
  SNAPSHOT_SCHEMA_VERSION,
  snapshotAgentId,
  snapshotRevision,
  snapshotTurnCount,
  SnapshotError,
  type Snapshot,
} from "../../lib/index";
import { repoRoot } from "../helpers";
import { cases, documentOf } from "./snapshot-cases";
import { fixture, fixturesDir } from "./snapshots";

const python = join(repoRoot, ".venv", "bin", "python");

function refusal(document: unknown, options?: Parameters<typeof checkSnapshot>[1]): SnapshotError {
  try {
    checkSnapshot(document, options);
  } catch (error) {
    expect(error).toBeInstanceOf(SnapshotError);
    return error as SnapshotError;
  }
  throw new Error("the document was accepted");
}

/** agentlane's verdict on each document: `AgentSnapshot.from_json` in the real package. */
function agentlaneVerdicts(documents: unknown[]): boolean[] {
  const script = `
import json, sys
from agentlane.harness import AgentSnapshot
for line in sys.stdin:
    try:
        AgentSnapshot.from_json(json.loads(line))
        print("ok")
    except Exception:
        print("refused")
`;
  const result = spawnSync(python, ["-c", script], { input: documents.map((d) => JSON.stringify(d)).join("\n") + "\n", encoding: "utf8", timeout: 60_000 });
  expect(result.stderr).toBe("");
  return result.stdout.trim().split("\n").map((line) => line === "ok");
}

describe("snapshot checks", () => {
  it("accept the snapshots a real agentlane run wrote, and read their revision, turn count and agent", () => {
    const one = checkSnapshot(fixture("one-turn"));
    expect([snapshotRevision(one), snapshotTurnCount(one), snapshotAgentId(one)]).toEqual([1, 1, { type: "Scenario", key: "fixture" }]);
    const conversation = parseSnapshot(readFileSync(join(fixturesDir, "conversation.json"), "utf8"));
    expect([snapshotRevision(conversation), snapshotTurnCount(conversation), conversation.state.history.length]).toEqual([5, 8, 16]);
    expect(conversation.state.shim_state).toHaveProperty(["harness-tools:plan"]);
    expect(SNAPSHOT_SCHEMA_VERSION).toBe(1);
  });

  it("accept what the installed agentlane writes now, in the fixtures' shape (make_snapshots.py run afresh)", () => {
    const out = mkdtempSync(join(tmpdir(), "pbn-snapshots-"));
    try {
      const run = spawnSync(python, [join(fixturesDir, "make_snapshots.py"), out], { encoding: "utf8", timeout: 60_000 });
      expect(run.stderr).toBe("");
      for (const name of ["one-turn", "conversation"] as const) {
        const fresh = parseSnapshot(readFileSync(join(out, `${name}.json`), "utf8"), { agentId: { type: "Scenario", key: "fixture" } });
        const committed = fixture(name);
        // The same document but for times and token counts.
        const shape = (snapshot: Snapshot): unknown =>
          JSON.parse(JSON.stringify(snapshot), (key, value: unknown) => (["created_at", "created", "prompt_tokens", "completion_tokens", "total_tokens"].includes(key) ? 0 : value));
        expect(shape(fresh)).toEqual(shape(committed));
      }
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 90_000);

  it("refuse each broken document with its code and field; agentlane refuses every one of them too, except the named stricter ones", () => {
    const verdicts = agentlaneVerdicts(cases.map(documentOf));
    cases.forEach((testCase, index) => {
      const document = documentOf(testCase);
      if (testCase.code === null) {
        expect(() => checkSnapshot(document), testCase.name).not.toThrow();
      } else {
        const error = refusal(document);
        expect([error.code, error.field], testCase.name).toEqual([testCase.code, testCase.field]);
        expect(error.message, testCase.name).toContain(`(${testCase.code})`);
      }
      const agentlaneAccepts = verdicts[index];
      expect(agentlaneAccepts, `agentlane on ${testCase.name}`).toBe(testCase.code === null || testCase.stricter === true);
    });
  });

  it("refuse another agent's snapshot (snapshot-agent-mismatch): another type, or another key when one is given", () => {
    const snapshot = fixture("conversation");
    expect(() => checkSnapshot(snapshot, { agentId: { type: "Scenario" } })).not.toThrow();
    const type = refusal(snapshot, { agentId: { type: "Support" } });
    expect([type.code, type.field]).toEqual(["snapshot-agent-mismatch", "agent_id.type"]);
    expect(type.message).toContain('agent_id.type is "Scenario", another agent\'s: this one is "Support"');
    const key = refusal(snapshot, { agentId: { type: "Scenario", key: "someone-else" } });
    expect([key.code, key.field]).toEqual(["snapshot-agent-mismatch", "agent_id.key"]);
    // A broken document is corrupted first, whoever it claims to be.
    const broken = { ...snapshot, revision: -1 };
    expect(refusal(broken, { agentId: { type: "Support" } }).code).toBe("snapshot-corrupted");
  });

  it("refuse a newer schema whatever its shape: the version is judged first", () => {
    const future = { schema_version: 2, conversation: { turns: [] } };
    const error = refusal(future);
    expect([error.code, error.field]).toEqual(["snapshot-version-unsupported", "schema_version"]);
    expect(error.message).toContain("is 2; this package reads version 1 (agentlane 0.22.0)");
  });

  it("refuse text that is not JSON (a truncated file) with the parser's error as cause", () => {
    const text = readFileSync(join(fixturesDir, "conversation.json"), "utf8");
    for (const broken of [text.slice(0, text.length / 2), "", "not json"]) {
      let error: unknown;
      try {
        parseSnapshot(broken);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(SnapshotError);
      expect([(error as SnapshotError).code, (error as SnapshotError).field]).toEqual(["snapshot-corrupted", ""]);
      expect((error as SnapshotError).cause).toBeInstanceOf(SyntaxError);
    }
  });
});
