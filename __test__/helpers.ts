import { readFileSync } from "node:fs";
import { join } from "node:path";

export const repoRoot = join(__dirname, "..");

export interface ValidExample {
  name: string;
  line: string;
}
export interface InvalidExample {
  id: string;
  name: string;
  line: string;
  message: string;
  messageIsPrefix: boolean;
  fields: string[];
}

/** The worked examples of PROTOCOL.md §10, shared with the Rust tests. */
export const examples: {
  valid: ValidExample[];
  invalid: InvalidExample[];
  encodedCommands: string[];
} = JSON.parse(readFileSync(join(repoRoot, "tests/fixtures/protocol-examples.json"), "utf8"));
