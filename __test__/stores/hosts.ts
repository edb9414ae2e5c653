/**
 * Hosts as separate processes for the store tests: each a real Node child
 * (fixtures/store-host.js) with its own store on the same directory or
 * database, driven by JSON lines, and SIGKILLed when a test says so.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { expect } from "vitest";
import type { ConversationStore, Snapshot } from "../../lib/index";
import { repoRoot } from "../helpers";
import { taggedSnapshot } from "./snapshots";

/** A command's answer (fixtures/store-host.js). */
export interface HostAnswer {
  ok: boolean;
  snapshot?: Snapshot | null;
  error?: { name: string; code: string; message: string; expectedRevision?: number | null; actualRevision?: number | null; field?: string };
}

export class StoreHost {
  /** Revisions the host's churn reported committed, in order. */
  readonly committed: number[] = [];
  private readonly waiting: Array<(answer: HostAnswer) => void> = [];
  private readonly commitWaiters: Array<() => void> = [];
  private readonly exited: Promise<void>;
  private stderr = "";

  private constructor(private readonly child: ChildProcess, ready: () => void) {
    this.exited = new Promise((resolve) => child.once("exit", () => resolve()));
    child.stderr!.on("data", (chunk: Buffer) => (this.stderr += chunk.toString()));
    createInterface({ input: child.stdout! }).on("line", (line) => {
      const message = JSON.parse(line) as HostAnswer & { ready?: number; committed?: number };
      if (message.ready !== undefined) ready();
      else if (message.committed !== undefined) {
        this.committed.push(message.committed);
        this.commitWaiters.splice(0).forEach((wake) => wake());
      } else this.waiting.shift()?.(message);
    });
  }

  /** Starts a host on `store` (`{ kind: "disk", directory }` or `{ kind: "postgres", connection, table }`), once it is ready. */
  static start(store: object): Promise<StoreHost> {
    const child = spawn(process.execPath, [join(repoRoot, "__test__", "fixtures", "store-host.js"), repoRoot, JSON.stringify(store)], {
      stdio: ["pipe", "pipe", "pipe"],
    });
    return new Promise((resolve, reject) => {
      const host: StoreHost = new StoreHost(child, () => resolve(host));
      child.once("exit", (code, signal) => reject(new Error(`store host exited before ready (${code ?? signal}): ${host.stderr}`)));
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  /** Sends a command; its answer. */
  send(command: object): Promise<HostAnswer> {
    return new Promise((resolve, reject) => {
      this.waiting.push(resolve);
      this.child.stdin!.write(`${JSON.stringify(command)}\n`, (error) => error && reject(error));
    });
  }

  /** Resolves at the next committed revision the churn reports (or when the host ends). */
  nextCommit(): Promise<void> {
    return Promise.race([new Promise<void>((resolve) => this.commitWaiters.push(resolve)), this.exited]);
  }

  /** What the host wrote on stderr (its crash, if any). */
  get errors(): string {
    return this.stderr;
  }

  /** SIGKILLs the host and waits for its end. */
  async kill(): Promise<void> {
    this.child.kill("SIGKILL");
    await this.exited;
  }

  /** Ends the host (closing its pool) and waits for its end. */
  async end(): Promise<void> {
    this.child.stdin!.write('{"op":"end"}\n');
    await this.exited;
  }
}

/**
 * Two hosts saving conversation `id` at once, `rounds` times, each round
 * from the revision the last one left: exactly one wins, the other is told
 * `revision-conflict` with the winner's revision, and `reader` loads the
 * winner's snapshot (each host's differs by its `created_at`).
 */
export async function raceSaves(hosts: StoreHost[], id: string, reader: ConversationStore, rounds: number): Promise<void> {
  let revision: number | null = null;
  for (let round = 0; round < rounds; round += 1) {
    const next: number = (revision ?? 0) + 1;
    const snapshots = hosts.map((_, index) => ({ ...taggedSnapshot(next, 20), created_at: `2026-01-0${index + 1}T00:00:00Z` }));
    const answers = await Promise.all(hosts.map((host, index) => host.send({ op: "save", id, snapshot: snapshots[index], expectedRevision: revision })));
    const winners = answers.flatMap((answer, index) => (answer.ok ? [index] : []));
    expect(winners, `round ${round}: ${JSON.stringify(answers)}`).toHaveLength(1);
    for (const loser of answers.filter((answer) => !answer.ok)) {
      expect(loser.error).toMatchObject({ name: "StoreConflictError", code: "revision-conflict", expectedRevision: revision, actualRevision: next });
    }
    expect(await reader.load()).toEqual(snapshots[winners[0]!]);
    revision = next;
  }
}
