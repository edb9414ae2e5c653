// N real backends (the demo app, a scripted model) started at once with
// createAgentSession's default options: how many get ready, when the first
// and the last are ready, and the start slots afterwards (issue 19, item 8).
//
//   node bench/many-starts.mjs [N=32]     (after npm run build and scripts/setup-python.sh)
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const pkg = createRequire(import.meta.url)(join(root, "dist", "index.js"));
const n = Number(process.argv[2] ?? 32);
const backend = { command: join(root, ".venv", "bin", "python"), args: ["-m", "agentlane_process_bridge", "--app", "demo_app:create_backend"], cwd: join(root, "examples", "backend") };
const started = performance.now();
const readyAt = [];
const results = await Promise.allSettled(
  Array.from({ length: n }, () =>
    pkg.createAgentSession({ backend, onDiagnostic: () => {} }).then((session) => {
      readyAt.push(performance.now() - started);
      return session;
    }),
  ),
);
const ready = results.filter((r) => r.status === "fulfilled");
console.log(
  JSON.stringify({
    n,
    ready: ready.length,
    failed: results.filter((r) => r.status === "rejected").map((r) => r.reason.code),
    firstReadyMs: Math.round(Math.min(...readyAt)),
    lastReadyMs: Math.round(Math.max(...readyAt)),
    slots: pkg.startSlots(),
  }),
);
await Promise.all(ready.map((r) => r.value.close()));
