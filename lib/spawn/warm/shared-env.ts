/**
 * Where a host finds the prefork servers another host shares with it
 * (`shared.ts`): an environment variable, which a test runner's workers
 * inherit from the process that started them, mapping each server's
 * sharing key (`ServerPlan.sharingKey`) to its socket and what its import
 * wrote.
 */
import type { ServerPlan } from "./plan";

/** The variable (a JSON object: sharing key → `SharedEntry`). */
export const SHARED_SERVERS_VARIABLE = "PROCESS_BRIDGE_WARM_SERVERS";

export interface SharedEntry {
  /** The Unix socket the server listens on. */
  socket: string;
  /** What its import wrote (given to every conversation, as a server's own host does). */
  importOutput: string[];
}

function entries(): Record<string, SharedEntry> {
  const text = process.env[SHARED_SERVERS_VARIABLE];
  if (!text) return {};
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed !== null && typeof parsed === "object" ? (parsed as Record<string, SharedEntry>) : {};
  } catch {
    return {};
  }
}

/** The shared server for `plan`, if a host shares one. */
export function sharedServerFor(plan: ServerPlan): SharedEntry | undefined {
  const entry = entries()[plan.sharingKey];
  if (entry === undefined || typeof entry.socket !== "string") return undefined;
  return { socket: entry.socket, importOutput: Array.isArray(entry.importOutput) ? entry.importOutput.map(String) : [] };
}

/** Lists (`entry`) or removes (`undefined`) the shared server of a sharing key, for this process and the ones it starts. */
export function listShared(sharingKey: string, entry: SharedEntry | undefined): void {
  const all = entries();
  if (entry === undefined) delete all[sharingKey];
  else all[sharingKey] = entry;
  if (Object.keys(all).length === 0) delete process.env[SHARED_SERVERS_VARIABLE];
  else process.env[SHARED_SERVERS_VARIABLE] = JSON.stringify(all);
}
