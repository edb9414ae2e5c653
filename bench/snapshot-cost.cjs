// The host's cost of one committed run's snapshot (issue 33), two ways side
// by side, interleaved, on the same document:
// - before: what the save path did until issue 33 (`JSON.parse` of the
//   backend's snapshot text, `checkSnapshot`, the memory store's
//   `save(document)`, which checks and encodes it again);
// - after, end to end: the `store_save` request's bytes fed to the addon's
//   host channel core (the line decoded, the snapshot checked in Rust, its
//   text handed to JavaScript), the `SnapshotText` the session makes, the
//   memory store's `saveText`, and the answer the core writes.
// Used by bench/resume.mjs and bench/stores.mjs; needs a build (dist/).
const { join } = require("node:path");

const dist = join(__dirname, "..", "dist");
const { memoryStore, checkSnapshot } = require(join(dist, "index.js"));
const { native } = require(join(dist, "native.js"));
const { checkedSnapshotText } = require(join(dist, "store", "snapshot-text.js"));

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
const HELLO = Buffer.from('{"type":"hello","version":"1.0","package":"agentlane-host-channel","package_version":"0.1.0"}\n');

/** `text`: a snapshot document's JSON at revision 100 (agentlane's key order). Returns p50s in ms. */
function snapshotCost(text, rounds) {
  const at = (revision) => text.replace('"revision":100', `"revision":${revision}`);
  const old = memoryStore().conversation("before");
  const store = memoryStore().conversation("after");
  old.save(JSON.parse(at(100)), { expectedRevision: null });
  store.save(JSON.parse(at(100)), { expectedRevision: null });
  const core = new native.HostChannel({ tools: [], store: true });
  core.feed(HELLO);
  const before = [];
  const after = [];
  const parts = { feed: [], save: [], answer: [] };
  for (let i = 0; i < rounds; i += 1) {
    const revision = 101 + i;
    const snapshot = at(revision);
    const line = Buffer.from(`{"type":"store_save","id":"${i}","snapshot":${snapshot},"expected_revision":${revision - 1}}\n`);
    let t0 = performance.now();
    old.save(checkSnapshot(JSON.parse(snapshot)), { expectedRevision: revision - 1 });
    before.push(performance.now() - t0);

    t0 = performance.now();
    const [request] = core.feed(line);
    const t1 = performance.now();
    if (request?.kind !== "request" || request.refused != null) throw new Error(`not a checked save: ${JSON.stringify(request?.refused ?? request)}`);
    store.saveText(checkedSnapshotText(request.json, request.revision, { type: request.agentType, key: request.agentKey }), { expectedRevision: request.expectedRevision ?? null });
    const t2 = performance.now();
    const sent = core.answerValue(request.call, "{}");
    const t3 = performance.now();
    if (sent?.[0]?.kind !== "send") throw new Error("the save was not answered");
    after.push(t3 - t0);
    parts.feed.push(t1 - t0);
    parts.save.push(t2 - t1);
    parts.answer.push(t3 - t2);
  }
  return {
    before: median(before),
    after: median(after),
    parts: { feed: median(parts.feed), save: median(parts.save), answer: median(parts.answer) },
  };
}

module.exports = { snapshotCost };
