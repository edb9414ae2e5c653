/**
 * Snapshots for the store tests: the fixtures a real agentlane run wrote
 * (tests/fixtures/snapshots/, make_snapshots.py says how), and longer
 * conversations grown from them whose every message names the revision, so
 * that a torn or mixed write is seen (`revisionOfTagged`).
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Snapshot } from "../../lib/index";
import { repoRoot } from "../helpers";

export const fixturesDir = join(repoRoot, "tests", "fixtures", "snapshots");

/** A fixture as parsed JSON (`one-turn`, `conversation`). */
export function fixture(name: "one-turn" | "conversation"): Snapshot {
  return JSON.parse(readFileSync(join(fixturesDir, `${name}.json`), "utf8")) as Snapshot;
}

/**
 * A conversation of `turns` user/assistant exchanges at `revision`, shaped
 * as agentlane writes one (the one-turn fixture's response repeated), each
 * message saying `r<revision> t<turn>`; `padding` characters more per
 * message make it larger.
 */
export function taggedSnapshot(revision: number, turns = 100, padding = 0, key = "fixture"): Snapshot {
  const base = fixture("one-turn");
  const response = base.state.responses[0]!;
  const pad = "x".repeat(padding);
  const history: Snapshot["state"]["history"] = [];
  const responses: Snapshot["state"]["responses"] = [];
  for (let turn = 0; turn < turns; turn += 1) {
    history.push({ role: "user", content: `r${revision} t${turn} question ${pad}` });
    history.push({ role: "assistant", content: `r${revision} t${turn} answer — ünïcödé 🌍 \u2028 ${pad}` });
    responses.push({ ...response, id: `resp-r${revision}-t${turn}` });
  }
  return {
    ...base,
    agent_id: { type: "Scenario", key },
    revision,
    state: { ...base.state, instructions: `r${revision}`, history, responses, turn_count: turns },
  };
}

/** The revision a tagged snapshot was made at, after checking every message says the same (throws otherwise). */
export function revisionOfTagged(snapshot: Snapshot): number {
  const revision = snapshot.revision;
  const expected = `r${revision} `;
  if (snapshot.state.instructions !== `r${revision}`) throw new Error(`instructions ${snapshot.state.instructions} at revision ${revision}`);
  snapshot.state.history.forEach((message, index) => {
    const content = String(message.content);
    if (!content.startsWith(expected) || !content.includes(` t${Math.floor(index / 2)} `)) {
      throw new Error(`message ${index} is ${content.slice(0, 40)} at revision ${revision}`);
    }
  });
  if (snapshot.state.history.length !== snapshot.state.turn_count * 2) throw new Error("history and turn_count disagree");
  return revision;
}
