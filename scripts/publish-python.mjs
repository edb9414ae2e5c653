#!/usr/bin/env node
// Publishes the Python module of the host channel (python/: the
// distribution `agentlane-host-channel`, docs/host-channel.md): builds its
// wheel and sdist with `uv build` (the pinned build backend of
// python/pyproject.toml) and uploads them with `uv publish`. The release
// job runs it (.github/workflows/release.yml: PyPI, trusted publishing),
// and so does the rehearsal (scripts/rehearse-publish-python.mjs, `npm
// test`) against a local package index: one script, so the rehearsal
// uploads what a release uploads.
//
//   node scripts/publish-python.mjs [--repository-url <url>] [--rehearsal] [--break py.typed] [--keep]
//
// Without --repository-url it uploads to PyPI with trusted publishing
// (GitHub's OIDC token; the job needs `id-token: write`). --rehearsal
// uploads with a throwaway username and password (a local index takes
// them); --break py.typed leaves the typed marker out of the build, to see
// the rehearsal fail. The module's version must be package.json's: one
// release, one version.
import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const source = join(root, "python");

/** The `uv` to run: $UV, the repository's .venv (scripts/setup-python.sh), or PATH's. */
export function uvCommand() {
  if (process.env.UV) return process.env.UV;
  const local = join(root, ".venv", "bin", "uv");
  return existsSync(local) ? local : "uv";
}

/** The module's version (`__version__`), checked against package.json's. */
export function moduleVersion() {
  const init = readFileSync(join(source, "src", "agentlane_host_channel", "__init__.py"), "utf8");
  const match = /^__version__ = "([^"]+)"$/m.exec(init);
  if (!match) throw new Error("publish-python: no __version__ in python/src/agentlane_host_channel/__init__.py");
  const npmVersion = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).version;
  if (match[1] !== npmVersion) {
    throw new Error(`publish-python: the module is ${match[1]}, package.json ${npmVersion}: bump both`);
  }
  return match[1];
}

/**
 * Builds and uploads. Returns the files uploaded. `breakAs`: "py.typed"
 * removes the typed marker from the staged sources (rehearsal only).
 */
export function publishPython({ repositoryUrl, rehearsal = false, breakAs, keep = false, log = console.log }) {
  const version = moduleVersion();
  if (breakAs && !rehearsal) throw new Error("publish-python: --break is for rehearsals");
  const staging = mkdtempSync(join(tmpdir(), "pbn-publish-python-"));
  try {
    // A staged copy: nothing the checkout holds besides the sources (no
    // __pycache__, no earlier build) goes into the distribution.
    const sources = join(staging, "python");
    cpSync(source, sources, { recursive: true, filter: (path) => !/(__pycache__|\/dist|\.egg-info)$/.test(path) });
    if (breakAs === "py.typed") rmSync(join(sources, "src", "agentlane_host_channel", "py.typed"));
    else if (breakAs) throw new Error(`publish-python: unknown --break ${breakAs}`);
    const dist = join(staging, "dist");
    const uv = uvCommand();
    // The build's Python: $UV_PYTHON, else the repository's .venv when set up
    // (uv looks for one beside its working folder, not in a staging copy),
    // else whichever Python 3.12 uv finds (release.yml sets one up).
    const venvPython = join(root, ".venv", "bin", "python");
    const env = { ...process.env, UV_PYTHON_DOWNLOADS: "never" };
    if (!env.UV_PYTHON && existsSync(venvPython)) env.UV_PYTHON = venvPython;
    const run = (args) => execFileSync(uv, args, { cwd: staging, stdio: ["ignore", "inherit", "inherit"], env });
    run(["build", "--quiet", "--out-dir", dist, sources]);
    const files = readdirSync(dist).map((file) => join(dist, file));
    const expected = [`agentlane_host_channel-${version}-py3-none-any.whl`, `agentlane_host_channel-${version}.tar.gz`];
    for (const file of expected) {
      if (!files.some((path) => path.endsWith(file))) throw new Error(`publish-python: the build made no ${file}`);
    }
    const target = repositoryUrl ? ["--publish-url", repositoryUrl] : ["--trusted-publishing", "always"];
    const credentials = rehearsal ? ["--username", "rehearsal", "--password", "rehearsal"] : [];
    run(["publish", ...target, ...credentials, ...files]);
    log(`publish-python: agentlane-host-channel ${version} (${expected.join(", ")}) to ${repositoryUrl ?? "PyPI"}`);
    return files;
  } finally {
    if (keep) log(`publish-python: staging kept in ${staging}`);
    else rmSync(staging, { recursive: true, force: true });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      "repository-url": { type: "string" },
      rehearsal: { type: "boolean" },
      break: { type: "string" },
      keep: { type: "boolean" },
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log("usage: node scripts/publish-python.mjs [--repository-url <url>] [--rehearsal] [--break py.typed] [--keep]");
    process.exit(0);
  }
  try {
    publishPython({ repositoryUrl: values["repository-url"], rehearsal: values.rehearsal, breakAs: values.break, keep: values.keep });
  } catch (error) {
    console.error(error instanceof Error ? error.message : String(error));
    process.exit(1);
  }
}
