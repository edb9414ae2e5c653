// The runtime suites: the package's public API as a user's program uses it,
// on whatever runtime runs this file (Bun, Deno or Node), imported from the
// package installed in this project's node_modules. Run by
// scripts/test-runtimes.mjs, which installs the package and sets:
//   PBN_REPO         the repository (for its protocol fixtures)
//   PBN_PYTHON       a Python with agentlane (the repository's .venv)
//   PBN_BACKEND_DIR  examples/backend
// PBN_RUNTIME_ONLY=<text> runs the tests whose name contains it.
import { runAll } from "./harness.mjs";
import "./codec.mjs";
import "./streams.mjs";
import "./containment.mjs";
import "./session.mjs";
import "./testing-kit.mjs";
import "./limits.mjs";

const failed = await runAll({ only: process.env.PBN_RUNTIME_ONLY });
process.exit(failed === 0 ? 0 : 1);
