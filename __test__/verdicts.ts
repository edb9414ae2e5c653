/**
 * Verdicts of corpora, for comparing builds of the addon across CPU
 * architectures (scripts/cross-arm64.sh: the x86_64 build scans strings with
 * SSE2, the aarch64 build with the portable fallback). With PBN_VERDICTS_DIR
 * set, a suite's `verdicts(name)` records, per line, what both decoding paths
 * say about it, exact messages and fields included, and writes
 * `<PBN_VERDICTS_DIR>/<name>.tsv` when the suite ends; without it, recording
 * costs nothing. scripts/compare-verdicts.mjs compares two such folders.
 */
import { createHash } from "node:crypto";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll } from "vitest";
import { decodeViaText, decodeViaValue } from "../lib/codec";

const dir = process.env.PBN_VERDICTS_DIR;

const digest = (text: string) => createHash("sha256").update(text).digest("hex").slice(0, 16);

/** What one decoding path says about a line: the decoded value's digest, or the error. */
export function verdictOf(decode: (line: string) => unknown, line: string): string {
  try {
    return `ok ${digest(JSON.stringify(decode(line)))}`;
  } catch (error) {
    const fields = (error as { fields?: readonly string[] }).fields;
    // JSON-quoted: a message may echo a line break from the input.
    return `${(error as Error).name} ${JSON.stringify((error as Error).message)} ${JSON.stringify(fields ?? null)}`;
  }
}

/** Both paths' verdicts on one line, tab-separated. */
export const lineVerdict = (line: string) => `${verdictOf(decodeViaText, line)}\t${verdictOf(decodeViaValue, line)}`;

/**
 * A recorder for corpus `name`: `record(line)` stores the line's verdict,
 * `note(label, verdict)` any other verdict (e.g. what a stream delivered).
 * Both do nothing unless PBN_VERDICTS_DIR is set.
 */
export function verdicts(name: string): { record(line: string): void; note(label: string, verdict: string): void } {
  if (!dir) return { record() {}, note() {} };
  const rows: string[] = [];
  afterAll(() => {
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `${name}.tsv`), rows.join("\n") + "\n");
  });
  return {
    record: (line) => rows.push(`${digest(line)}\t${lineVerdict(line)}`),
    note: (label, verdict) => rows.push(`${label}\t${verdict}`),
  };
}
