/**
 * The contract every store keeps (lib/store/types.ts: agentlane's
 * `StateStore` rules), run against each ready store by its own test file:
 * the memory store, the disk store and the PostgreSQL store (a real
 * server). Each test uses conversations of its own, so one store can serve
 * the whole suite.
 */
import { randomUUID } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  InvalidConversationIdError,
  InvalidOptionError,
  SnapshotError,
  snapshotText,
  SnapshotText,
  StoreConflictError,
  type ConversationStore,
  type ConversationStores,
  type Snapshot,
} from "../../lib/index";
import { fixture, revisionOfTagged, taggedSnapshot } from "./snapshots";

/** A snapshot of the one-turn fixture at `revision`. */
function at(revision: number): Snapshot {
  return { ...fixture("one-turn"), revision };
}

/** The error `promise` rejects with, checked to be a `Class`. */
export async function rejectionOf<T>(Class: new (...args: never[]) => T, promise: Promise<unknown>): Promise<T> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  expect(error).toBeInstanceOf(Class);
  return error as T;
}

const conflictOf = (promise: Promise<unknown>): Promise<StoreConflictError> => rejectionOf(StoreConflictError, promise);

/** Registers the contract's tests for the stores `stores()` returns (called in each test, after the file's hooks ran). */
export function storeContract(stores: () => ConversationStores): void {
  const fresh = (label = "c"): ConversationStore => stores().conversation(`${label}-${randomUUID()}`);

  describe("the store contract (agentlane's StateStore rules)", () => {
    it("an empty conversation loads as null; a saved snapshot loads back equal, as a copy", async () => {
      const store = fresh();
      expect(await store.load()).toBeNull();
      const snapshot = fixture("conversation");
      await store.save(snapshot, { expectedRevision: null });
      const loaded = await store.load();
      expect(loaded).toEqual(snapshot);
      // Changing what was saved or loaded changes nothing stored.
      snapshot.state.history.length = 0;
      loaded!.state.turn_count = 99;
      expect(await store.load()).toEqual(fixture("conversation"));
    });

    it("a first save needs expectedRevision null; a later one the stored revision, and a higher revision", async () => {
      const store = fresh();
      await store.save(at(1), { expectedRevision: null });
      await store.save(at(2), { expectedRevision: 1 });
      await store.save(at(7), { expectedRevision: 2 });
      expect((await store.load())!.revision).toBe(7);
    });

    it("a save with a stale or absent expected revision is a revision-conflict naming both revisions, and writes nothing", async () => {
      const store = fresh();
      const onEmpty = await conflictOf(store.save(at(2), { expectedRevision: 1 }));
      expect([onEmpty.code, onEmpty.operation, onEmpty.expectedRevision, onEmpty.actualRevision]).toEqual(["revision-conflict", "save", 1, null]);
      expect(await store.load()).toBeNull();
      await store.save(at(1), { expectedRevision: null });
      const again = await conflictOf(store.save(at(5), { expectedRevision: null }));
      expect([again.expectedRevision, again.actualRevision]).toEqual([null, 1]);
      const stale = await conflictOf(store.save(at(5), { expectedRevision: 4 }));
      expect([stale.expectedRevision, stale.actualRevision]).toEqual([4, 1]);
      expect(stale.message).toContain("expected revision 4, the store has revision 1");
      expect((await store.load())!.revision).toBe(1);
    });

    it("a snapshot whose revision is not above the expected one is refused (snapshot-revision-not-increasing) and not written", async () => {
      const store = fresh();
      await store.save(at(3), { expectedRevision: null });
      for (const revision of [3, 2]) {
        const error = await store.save(at(revision), { expectedRevision: 3 }).catch((reason: unknown) => reason);
        expect(error).toBeInstanceOf(SnapshotError);
        expect([(error as SnapshotError).code, (error as SnapshotError).field]).toEqual(["snapshot-revision-not-increasing", "revision"]);
      }
      expect((await store.load())!.revision).toBe(3);
    });

    it("delete needs the stored revision; null on an empty conversation does nothing", async () => {
      const store = fresh();
      await store.delete({ expectedRevision: null });
      const onEmpty = await conflictOf(store.delete({ expectedRevision: 1 }));
      expect([onEmpty.operation, onEmpty.expectedRevision, onEmpty.actualRevision]).toEqual(["delete", 1, null]);
      await store.save(at(1), { expectedRevision: null });
      const absent = await conflictOf(store.delete({ expectedRevision: null }));
      expect([absent.expectedRevision, absent.actualRevision]).toEqual([null, 1]);
      await conflictOf(store.delete({ expectedRevision: 2 }));
      expect((await store.load())!.revision).toBe(1);
      await store.delete({ expectedRevision: 1 });
      expect(await store.load()).toBeNull();
      // After a delete the conversation starts again from nothing.
      await store.save(at(1), { expectedRevision: null });
      expect((await store.load())!.revision).toBe(1);
    });

    it("two saves from one revision at once: exactly one wins, the other is a conflict", async () => {
      const store = fresh();
      await store.save(at(1), { expectedRevision: null });
      const outcomes = await Promise.allSettled([2, 3, 4, 5].map((revision) => store.save(at(revision), { expectedRevision: 1 })));
      const won = outcomes.filter((outcome) => outcome.status === "fulfilled");
      expect(won).toHaveLength(1);
      for (const outcome of outcomes) {
        if (outcome.status === "rejected") expect(outcome.reason).toBeInstanceOf(StoreConflictError);
      }
      const winner = outcomes.findIndex((outcome) => outcome.status === "fulfilled") + 2;
      expect((await store.load())!.revision).toBe(winner);
    });

    it("conversations are separate, however alike their ids (case, escapes, dots, slashes, non-ASCII)", async () => {
      const base = randomUUID();
      const ids = ["a", "A", "a/b", "a%2Fb", "a.b", ".", "..", "con", "ü", "u\u0308", "a b", "日本語", "🌍"].map((suffix) => `${base}-${suffix}`);
      await Promise.all(ids.map((id, index) => stores().conversation(id).save(at(index + 1), { expectedRevision: null })));
      for (const [index, id] of ids.entries()) expect((await stores().conversation(id).load())!.revision, id).toBe(index + 1);
      for (const [index, id] of ids.entries()) await stores().conversation(id).delete({ expectedRevision: index + 1 });
    });

    it("a long conversation with non-ASCII, emoji and line separators round-trips exactly", async () => {
      const store = fresh();
      const snapshot = taggedSnapshot(12, 100, 200);
      await store.save(snapshot, { expectedRevision: null });
      const loaded = await store.load();
      expect(loaded).toEqual(snapshot);
      expect(revisionOfTagged(loaded!)).toBe(12);
    });

    it("keeps fields agentlane ignores", async () => {
      const store = fresh();
      const snapshot = { ...at(1), extra: { note: "kept" } } as Snapshot;
      await store.save(snapshot, { expectedRevision: null });
      expect(await store.load()).toEqual(snapshot);
    });

    it("refuses a corrupted snapshot before writing anything (snapshot-corrupted, with the field)", async () => {
      const store = fresh();
      const broken = fixture("one-turn");
      (broken.state.history[1] as { role: unknown }).role = 7;
      const error = await store.save(broken, { expectedRevision: null }).catch((reason: unknown) => reason);
      expect(error).toBeInstanceOf(SnapshotError);
      expect([(error as SnapshotError).code, (error as SnapshotError).field]).toEqual(["snapshot-corrupted", "state.history.1.role"]);
      const unencodable = { ...at(1), extra: 10n } as unknown as Snapshot;
      const encoding = await store.save(unencodable, { expectedRevision: null }).catch((reason: unknown) => reason);
      expect((encoding as SnapshotError).code).toBe("snapshot-corrupted");
      expect(await store.load()).toBeNull();
    });

    it("refuses unusable arguments with typed errors: ids, expectedRevision", async () => {
      for (const id of ["", "a\0b", "lone \uD800 surrogate", 42 as unknown as string]) {
        expect(() => stores().conversation(id)).toThrow(InvalidConversationIdError);
      }
      const store = fresh();
      for (const expectedRevision of [-1, 1.5, Number.NaN, "1" as unknown as number, undefined as unknown as number]) {
        const error = await store.save(at(2), { expectedRevision }).catch((reason: unknown) => reason);
        expect(error, String(expectedRevision)).toBeInstanceOf(InvalidOptionError);
        expect((error as InvalidOptionError).option).toBe("expectedRevision");
      }
      const missing = await store.delete(undefined as unknown as { expectedRevision: null }).catch((reason: unknown) => reason);
      expect(missing).toBeInstanceOf(InvalidOptionError);
    });

    it("saveText (the session's path) stores the text as given, under the same rules as save, and mixes with save", async () => {
      const store = fresh();
      expect(typeof store.saveText).toBe("function");
      const first = snapshotText(JSON.stringify(taggedSnapshot(1, 20)));
      await store.saveText!(first, { expectedRevision: null });
      expect(await store.load()).toEqual(first.document);
      await store.save(taggedSnapshot(2, 20), { expectedRevision: 1 });
      await store.saveText!(snapshotText(taggedSnapshot(3, 20)), { expectedRevision: 2 });
      expect(revisionOfTagged((await store.load())!)).toBe(3);
      const stale = await conflictOf(store.saveText!(snapshotText(JSON.stringify(at(9))), { expectedRevision: 2 }));
      expect([stale.operation, stale.expectedRevision, stale.actualRevision]).toEqual(["save", 2, 3]);
      const backwards = await store.saveText!(snapshotText(at(3)), { expectedRevision: 3 }).catch((reason: unknown) => reason);
      expect([(backwards as SnapshotError).code, (backwards as SnapshotError).field]).toEqual(["snapshot-revision-not-increasing", "revision"]);
      const unchecked = await store.saveText!({ text: "{}", revision: 4 } as unknown as SnapshotText, { expectedRevision: 3 }).catch((reason: unknown) => reason);
      expect(unchecked).toBeInstanceOf(TypeError);
      const aborted = new AbortController();
      aborted.abort(new Error("gave up"));
      await expect(store.saveText!(snapshotText(at(4)), { expectedRevision: 3, signal: aborted.signal })).rejects.toBe(aborted.signal.reason);
      expect(revisionOfTagged((await store.load())!)).toBe(3);
    });

    it("an aborted signal rejects with its reason and changes nothing", async () => {
      const store = fresh();
      await store.save(at(1), { expectedRevision: null });
      const controller = new AbortController();
      const reason = new Error("gave up");
      controller.abort(reason);
      await expect(store.save(at(2), { expectedRevision: 1, signal: controller.signal })).rejects.toBe(reason);
      await expect(store.delete({ expectedRevision: 1, signal: controller.signal })).rejects.toBe(reason);
      await expect(store.load({ signal: controller.signal })).rejects.toBe(reason);
      expect((await store.load())!.revision).toBe(1);
    });
  });
}
