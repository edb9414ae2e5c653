/**
 * The snapshot's text path (issue 33): the Rust check that judges each
 * `store_save` where the core reads it (crates/bridge-host-channel
 * snapshot.rs) against `checkSnapshot`, case by case (verdict, code, field,
 * message), on the text agentlane-like writers produce (compact, indented,
 * other key orders); `SnapshotText` itself; and the session's side of the
 * channel on a `store_save` the check refuses (no store call, the backend
 * answered `store-error` with `checkSnapshot`'s words).
 */
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { checkSnapshot, memoryStore, SnapshotError, snapshotText, SnapshotText, type ConversationStore, type Snapshot } from "../../lib/index";
import { HostChannelServer } from "../../lib/tools/server";
import { cases, documentOf, type Doc } from "./snapshot-cases";
import { fixture } from "./snapshots";

/** The JS check's verdict: `null`, or the error's code, field and message. */
function jsVerdict(document: unknown, agentId?: { type: string; key?: string }): [string, string, string] | null {
  try {
    checkSnapshot(document, { agentId });
    return null;
  } catch (error) {
    const refused = error as SnapshotError;
    return [refused.code, refused.field, refused.message];
  }
}

function rustVerdict(text: string, agentId?: { type: string; key?: string }): [string, string, string] | null {
  try {
    snapshotText(text, { agentId });
    return null;
  } catch (error) {
    expect(error).toBeInstanceOf(SnapshotError);
    const refused = error as SnapshotError;
    return [refused.code, refused.field, refused.message];
  }
}

/** Documents beyond the shared cases: what the text path reads differently if anything does. */
const more: Array<[string, (d: Doc) => unknown]> = [
  ["schema_version 1.0 (a double like any number)", (d) => void (d.schema_version = 1.0)],
  ["schema_version 1e21", (d) => void (d.schema_version = 1e21)],
  ["revision 2**53", (d) => void (d.revision = 2 ** 53)],
  ["revision -0.5e-7", (d) => void (d.revision = -0.5e-7)],
  ["a long agent key refused as a number", (d) => void (d.agent_id = { type: "x".repeat(41), key: 12345678901234567890 })],
  ["agent type a long string, key empty", (d) => void (d.agent_id = { type: "y".repeat(80), key: "" })],
  ["created_at with quotes, a tab and a lone surrogate", (d) => void (d.created_at = 'he said "now"\t\ud800')],
  ["created_at 29 February 2024 and 1900", (d) => void (d.created_at = "1900-02-29T00:00:00Z")],
  ["created_at 0004-02-29 (Date.UTC's 1904)", (d) => void (d.created_at = "0004-02-29T00:00:00Z")],
  ["instructions missing among unicode keys", (d) => void (delete d.state.instructions, (d.state["ünïcödé 🌍"] = 1))],
  ["a role that is an array", (d) => void (d.state.history[1].role = [1])],
  ["a response index 1.5", (d) => void (d.state.responses[0].choices[0].index = 1.5)],
  ["a choice without message", (d) => void delete d.state.responses[0].choices[0].message],
  ["choices a number", (d) => void (d.state.responses[0].choices = 3)],
  ["a response an array", (d) => void (d.state.responses[0] = [])],
  ["created a float", (d) => void (d.state.responses[0].created = 1.25)],
  ["model null", (d) => void (d.state.responses[0].model = null)],
  ["turn_count true", (d) => void (d.state.turn_count = true)],
  ["state null", (d) => void (d.state = null)],
  ["the document a string", () => "a snapshot"],
  ["the document a number", () => 42],
];

describe("the Rust snapshot check against checkSnapshot", () => {
  const documents = [...cases.map((c) => [c.name, documentOf(c)] as const), ...more.map(([name, change]) => {
    const document = fixture("one-turn") as unknown as Doc;
    const replaced = change(document);
    return [name, replaced === undefined ? document : replaced] as const;
  })];

  it("gives the same verdict, code, field and message on every document, compact and indented", () => {
    for (const [name, document] of documents) {
      const expected = jsVerdict(document);
      expect(rustVerdict(JSON.stringify(document)), name).toEqual(expected);
      expect(rustVerdict(JSON.stringify(document, null, 2)), `${name}, indented`).toEqual(expected);
    }
  });

  it("judges the agent as checkSnapshot's agentId option does, after the document", () => {
    const text = JSON.stringify(fixture("conversation"));
    for (const agentId of [{ type: "Scenario" }, { type: "Support" }, { type: "Scenario", key: "fixture" }, { type: "Scenario", key: "other \"one\"" }]) {
      expect(rustVerdict(text, agentId), JSON.stringify(agentId)).toEqual(jsVerdict(fixture("conversation"), agentId));
    }
    expect(rustVerdict(JSON.stringify({ ...fixture("conversation"), revision: -1 }), { type: "Support" })?.[0]).toBe("snapshot-corrupted");
  });

  it("reads JSON as JSON.parse does: the last of duplicate keys wins, lone surrogates are text, and text that is not JSON is refused", () => {
    const text = JSON.stringify(fixture("one-turn"));
    expect(rustVerdict(text.replace('{"schema_version":1,', '{"schema_version":2,"schema_version":1,'))).toBeNull();
    expect(rustVerdict(text.replace('{"schema_version":1,', '{"schema_version":1,"schema_version":2,'))?.[0]).toBe("snapshot-version-unsupported");
    expect(rustVerdict(text.replace('"role":"user"', '"role":"\\ud800"'))).toBeNull();
    for (const broken of [text.slice(0, 100), "", "{} x", "{'a':1}"]) {
      expect(rustVerdict(broken), broken).toEqual(["snapshot-corrupted", "", "Snapshot refused (snapshot-corrupted): the document is not JSON."]);
    }
  });
});

describe("SnapshotText", () => {
  it("of text: the same document with its revision first (one revision member), read without parsing; the document parsed on demand", () => {
    const document = fixture("conversation");
    const made = snapshotText(JSON.stringify(document));
    expect(made).toBeInstanceOf(SnapshotText);
    expect(made.text.startsWith(`{"revision":${document.revision},"schema_version":1,`)).toBe(true);
    expect(made.text.match(/"revision":/g)).toHaveLength(1);
    expect([made.revision, made.agentId]).toEqual([5, { type: "Scenario", key: "fixture" }]);
    expect(made.document).toEqual(document);
    expect(made.document).toBe(made.document);
    expect(Object.isFrozen(made)).toBe(true);
    // Text already in that form is kept as it is.
    expect(snapshotText(made.text).text).toBe(made.text);
    expect(snapshotText(made)).toBe(made);
  });

  it("of a document: checked and encoded (a copy: changing the document later changes nothing)", () => {
    const document = fixture("one-turn");
    const made = snapshotText(document);
    document.state.history.length = 0;
    expect(made.document).toEqual(fixture("one-turn"));
    expect(() => snapshotText({ ...document, revision: -1 })).toThrow(SnapshotError);
  });

  it("is made only by snapshotText, and saveText takes nothing else", async () => {
    expect(() => new (SnapshotText as unknown as new (...args: unknown[]) => SnapshotText)(Symbol("checked"), "{}", 1, { type: "a", key: "b" })).toThrow(TypeError);
    const store = memoryStore().conversation("fake");
    const fake = { text: "{}", revision: 1, agentId: { type: "a", key: "b" }, document: {} } as unknown as SnapshotText;
    await expect(store.saveText!(fake, { expectedRevision: null })).rejects.toBeInstanceOf(TypeError);
    expect(await store.load()).toBeNull();
  });
});

/** A socket end in memory: what the server writes, and a way to write to it as the backend. */
class FakeEnd extends EventEmitter {
  readonly written: string[] = [];
  destroyed = false;
  write(chunk: Uint8Array): boolean {
    this.written.push(Buffer.from(chunk).toString());
    return true;
  }
  end(): void {}
  destroy(): void {
    this.destroyed = true;
  }
}

describe("a store_save the Rust check refuses", () => {
  it("never reaches the store; the backend is answered store-error with checkSnapshot's words", async () => {
    const saved: unknown[] = [];
    const store: ConversationStore = { load: async () => null, save: async (s) => void saved.push(s), delete: async () => {}, saveText: async (s) => void saved.push(s) };
    const committed: unknown[] = [];
    const server = new HostChannelServer({ tools: [], store: true }, { tools: {}, store, approve: async () => ({ allowed: false, reason: null }), diagnostic: () => {}, committed: (s) => committed.push(s) });
    const end = new FakeEnd();
    server.serve(end);
    const broken = fixture("one-turn") as unknown as Doc;
    broken.state.history[1].role = 7;
    const good = { ...fixture("one-turn"), revision: 2 } as Snapshot;
    end.emit("data", Buffer.from('{"type":"hello","version":"1.0"}\n'));
    end.emit("data", Buffer.from(`{"type":"store_save","id":"1","snapshot":${JSON.stringify(broken)},"expected_revision":null}\n`));
    end.emit("data", Buffer.from(`{"type":"store_save","id":"2","snapshot":${JSON.stringify(good)},"expected_revision":1}\n`));
    await new Promise((resolve) => setTimeout(resolve, 50));
    const answers = end.written.map((line) => JSON.parse(line) as { id: string; type: string; error?: { kind: string; message: string } });
    const refused = answers.find((answer) => answer.id === "1")!;
    expect(refused.error).toEqual({ kind: "store-error", message: jsVerdict(broken)![2] });
    expect(answers.find((answer) => answer.id === "2")).toMatchObject({ type: "result" });
    // Only the good one reached the store (through saveText, as text) and became the committed snapshot.
    expect(saved).toHaveLength(1);
    expect(saved[0]).toBeInstanceOf(SnapshotText);
    expect((saved[0] as SnapshotText).document).toEqual(good);
    expect(committed).toEqual([saved[0]]);
    server.close();
  });
});
