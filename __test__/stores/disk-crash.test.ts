/**
 * The on-disk store across processes (issue 33, "Must hold"): a host
 * SIGKILLed in the middle of a save leaves the previous snapshot readable,
 * whole (killed at random points, 200 times), and two hosts saving one
 * conversation at once: exactly one wins, the other gets the conflict.
 * Every host is a real Node process (fixtures/store-host.js).
 */
import { mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { diskStore } from "../../lib/index";
import { raceSaves, StoreHost } from "./hosts";
import { revisionOfTagged, taggedSnapshot } from "./snapshots";

const scratch = mkdtempSync(join(tmpdir(), "pbn-disk-crash-"));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Kills in all, spread over lanes (one conversation and one host at a time each) that run side by side. */
const KILLS = 200;
const LANES = 4;
/** A kill lands up to this long after the host's first commit (a few saves' time: each save is mostly its two flushes). */
const KILL_WINDOW_MS = 30;

describe("diskStore across processes", () => {
  it(`a host SIGKILLed at a random point of its saves leaves a whole snapshot: the last committed or the one being saved (${KILLS} kills)`, async () => {
    const directory = join(scratch, "crash");
    // 100 turns of about 1 KB per message: a 270 KB file, so a kill can land in the middle of its write.
    const template = JSON.stringify(taggedSnapshot(0, 100, 1000));
    const reader = diskStore({ directory });
    const outcomes = { previous: 0, next: 0 };

    async function lane(id: string, kills: number): Promise<void> {
      let committed = 0;
      // The next host boots while this one saves (it does nothing until told): the test's time is the kills', not Node's start-up.
      let booting = StoreHost.start({ kind: "disk", directory, lockTimeoutMs: 5_000 });
      try {
        for (let kill = 0; kill < kills; kill += 1) {
          const host = await booting;
          booting = kill + 1 < kills ? StoreHost.start({ kind: "disk", directory, lockTimeoutMs: 5_000 }) : booting;
          void host.send({ op: "churn", id, template });
          await host.nextCommit();
          await new Promise((resolve) => setTimeout(resolve, Math.random() * KILL_WINDOW_MS));
          await host.kill();
          expect(host.errors, "the host failed instead of being killed").toBe("");
          committed = Math.max(committed, ...host.committed);
          const loaded = await reader.conversation(id).load();
          // Whole and of one revision (every message says which), and no older than the last committed one.
          const revision = revisionOfTagged(loaded!);
          expect([committed, committed + 1]).toContain(revision);
          outcomes[revision === committed ? "previous" : "next"] += 1;
          committed = revision;
        }
      } finally {
        // A lane that failed leaves no host booted for nothing.
        await (await booting).kill();
      }
    }

    // allSettled: a failing lane must not leave the others killing and recreating the folder after the test.
    const lanes = await Promise.allSettled(Array.from({ length: LANES }, (_, index) => lane(`lane-${index}`, KILLS / LANES)));
    for (const outcome of lanes) if (outcome.status === "rejected") throw outcome.reason;
    console.log(`disk store crash test: ${KILLS} kills, ${outcomes.previous} left the last committed snapshot, ${outcomes.next} the one being saved`);
    expect(outcomes.previous + outcomes.next).toBe(KILLS);
    // Kills landed on both sides of the rename (each side is hit in about one kill in ten or more).
    expect(outcomes.previous).toBeGreaterThan(0);
    expect(outcomes.next).toBeGreaterThan(0);
    // Nothing but the snapshots, their temporary files and the lock files.
    expect(readdirSync(directory).filter((name) => !/^(lane-\d\.json|\.lane-\d\.json\.tmp|\.locks)$/.test(name))).toEqual([]);
  }, 600_000);

  it("two hosts saving one conversation at once: exactly one wins, the other gets revision-conflict, 40 rounds", async () => {
    const directory = join(scratch, "race");
    const hosts = await Promise.all([StoreHost.start({ kind: "disk", directory }), StoreHost.start({ kind: "disk", directory })]);
    try {
      await raceSaves(hosts, "contested", diskStore({ directory }).conversation("contested"), 40);
    } finally {
      await Promise.all(hosts.map((host) => host.kill()));
    }
  }, 120_000);
});
