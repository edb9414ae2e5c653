/** The in-memory store against the store contract. */
import { describe, expect, it } from "vitest";
import { memoryStore } from "../../lib/index";
import { storeContract } from "./contract";
import { fixture } from "./snapshots";

describe("memoryStore", () => {
  const stores = memoryStore();
  storeContract(() => stores);

  it("lists the conversations that have a snapshot; each store is its own", async () => {
    const mine = memoryStore();
    await mine.conversation("b").save(fixture("one-turn"), { expectedRevision: null });
    await mine.conversation("a").save(fixture("one-turn"), { expectedRevision: null });
    expect(await mine.conversationIds()).toEqual(["b", "a"]);
    expect(await memoryStore().conversation("a").load()).toBeNull();
    await mine.conversation("b").delete({ expectedRevision: 1 });
    expect(await mine.conversationIds()).toEqual(["a"]);
  });
});
