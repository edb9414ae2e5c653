#!/usr/bin/env node
// The Python publish rehearsal (`npm test`): the release's own script
// (scripts/publish-python.mjs --rehearsal) builds `agentlane-host-channel`
// and uploads it to a local package index (pypiserver, pinned), and every
// way a user installs it is tried in a fresh virtualenv:
//
//   pip (index), uv (index)            from the index, as from PyPI;
//   pip (npm files), uv (npm files)    from the npm package's python/
//                                      folder (`npm pack`'s own file list),
//                                      the README's one command;
//
// steps per installer: install, import (the version, nothing started at
// import), typed (the py.typed marker installed; `mypy --strict` accepts a
// user's factory, tests/rehearsal/host_channel_factory.py, once per source
// of the files: MYPY_ON), conversation
// (the Rust example host, crates/bridge-host-channel/examples/host_tools.rs,
// runs a real conversation in which the agent calls one host tool, on the
// virtualenv's Python with the installed module).
//
//   node scripts/rehearse-publish-python.mjs
//
// Dependencies (agentlane and its own, mypy, the build backend) come from a
// wheelhouse that `pip download` fills once (node_modules/.cache); nothing
// else is fetched. A failure prints `rehearsal-python FAILED: <installer>
// <step>: <detail>`; the last line is `rehearsal-python: N passed, N failed
// (S s)`. PBN_PY_REHEARSAL_BREAK=py.typed publishes the module without its
// typed marker, to see the rehearsal fail.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { cacheDir } from "./node-binaries.mjs";
import { moduleVersion, uvCommand } from "./publish-python.mjs";
import { exec, freePort, steps, tail } from "./rehearsal.mjs";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const DIST = "agentlane-host-channel";
/** What the rehearsal runs and installs besides the package, pinned. */
// setuptools and wheel: what pip builds agentlane's one source-only
// dependency (demjson3, a setup.py project) with.
const PINS = { pypiserver: "2.4.2", agentlane: "0.22.0", mypy: "2.4.1", flit_core: "4.2.0", setuptools: "84.2.1", wheel: "0.48.0" };
const repoPython = join(root, ".venv", "bin", "python");
const work = mkdtempSync(join(tmpdir(), "pbn-rehearsal-python-"));
const { record, finish } = steps("rehearsal-python");

async function must(result, what) {
  const done = await result;
  if (done.code !== 0) throw new Error(`${what} failed: ${tail(done)}`);
  return done;
}

// ---- the tools, the wheelhouse, the index ------------------------------------

/** pypiserver in a virtualenv of its own, and the wheelhouse; both cached. */
async function prepare() {
  if (!existsSync(repoPython)) throw new Error(`${repoPython} is missing: run scripts/setup-python.sh`);
  const tools = join(cacheDir, `python-tools-pypiserver-${PINS.pypiserver}`);
  if (!existsSync(join(tools, "bin", "pypi-server"))) {
    rmSync(tools, { recursive: true, force: true });
    await must(exec(repoPython, ["-m", "venv", tools]), "the pypiserver virtualenv");
    await must(exec(join(tools, "bin", "pip"), ["install", "--quiet", `pypiserver==${PINS.pypiserver}`]), "installing pypiserver");
  }
  const wheelhouse = join(cacheDir, `python-wheelhouse-${Object.values(PINS).slice(1).join("-")}`);
  const stamp = join(wheelhouse, ".complete");
  if (!existsSync(stamp)) {
    mkdirSync(wheelhouse, { recursive: true });
    const pins = Object.entries(PINS).slice(1).map(([name, version]) => `${name}==${version}`);
    await must(exec(join(root, ".venv", "bin", "pip"), ["download", "--quiet", "--dest", wheelhouse, ...pins], { timeoutMs: 900_000 }), "filling the wheelhouse");
    writeFileSync(stamp, `${pins.join("\n")}\n`);
  }
  return { pypiServer: join(tools, "bin", "pypi-server"), wheelhouse };
}

async function startIndex(pypiServer) {
  const packages = join(work, "index");
  mkdirSync(packages);
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // -a . -P .: no authentication (the rehearsal's index is this process's
  // alone, on loopback); --disable-fallback: a name it lacks is not
  // redirected to PyPI (everything else comes from the wheelhouse).
  const child = spawn(pypiServer, ["run", "-p", String(port), "-i", "127.0.0.1", "-a", ".", "-P", ".", "--disable-fallback", packages], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  const stop = () => {
    if (child.exitCode === null) child.kill("SIGTERM");
  };
  for (let waited = 0; ; waited += 100) {
    if (child.exitCode !== null || waited > 30_000) {
      stop();
      throw new Error(`pypiserver did not start on ${url}: ${output.slice(-2000)}`);
    }
    try {
      if ((await fetch(`${url}/simple/`)).ok) break;
    } catch {
      // Not listening yet.
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return { url, stop };
}

/** The npm package's python/ folder, as `npm pack` lists and packs it. */
async function npmPackedPythonFolder() {
  const dir = join(work, "npm-pack");
  mkdirSync(dir);
  await must(exec("npm", ["pack", "--ignore-scripts", "--loglevel=error", "--pack-destination", dir], { cwd: root }), "npm pack");
  const tarball = readdirSync(dir).find((file) => file.endsWith(".tgz"));
  await must(exec("tar", ["-xzf", join(dir, tarball), "-C", dir]), "unpacking the npm package");
  return join(dir, "package", "python");
}

// ---- the installers ----------------------------------------------------------------

/** Each way to install: how to make the virtualenv and what to install into it. */
function installers(index, wheelhouse, npmFolder, version) {
  const fromIndex = ["--index-url", `${index.url}/simple/`, "--find-links", wheelhouse, `${DIST}==${version}`];
  const fromFolder = ["--no-index", "--find-links", wheelhouse, npmFolder];
  const uv = uvCommand();
  const pip = (args) => ({
    venv: (dir) => [repoPython, ["-m", "venv", dir]],
    install: (dir) => [join(dir, "bin", "pip"), ["install", "--quiet", "--disable-pip-version-check", ...args]],
    extra: (dir, pins) => [join(dir, "bin", "pip"), ["install", "--quiet", "--disable-pip-version-check", "--no-index", "--find-links", wheelhouse, ...pins]],
  });
  const uvPip = (args) => ({
    venv: (dir) => [uv, ["venv", "--quiet", "--python", repoPython, dir]],
    install: (dir) => [uv, ["pip", "install", "--quiet", "--python", join(dir, "bin", "python"), ...args]],
    extra: (dir, pins) => [uv, ["pip", "install", "--quiet", "--python", join(dir, "bin", "python"), "--no-index", "--find-links", wheelhouse, ...pins]],
  });
  return {
    "pip (index)": pip(fromIndex),
    "uv (index)": uvPip(fromIndex),
    "pip (npm files)": pip(fromFolder),
    "uv (npm files)": uvPip(fromFolder),
  };
}

/** The installers whose typed step also runs `mypy --strict`: one per source of the files. */
const MYPY_ON = new Set(["uv (index)", "pip (npm files)"]);

const IMPORT_PROBE = `
import json, threading
import agentlane_host_channel as m
print(json.dumps({"version": m.__version__, "threads": threading.active_count(), "file": m.__file__}))
`;

async function rehearse(name, installer, { version, hostExample }) {
  const dir = join(work, name.replace(/\W+/g, "-"));
  // The installers' caches in the project: nothing from an earlier run.
  const env = { ...process.env, UV_CACHE_DIR: `${dir}.cache-uv`, PIP_CACHE_DIR: `${dir}.cache-pip`, UV_PYTHON_DOWNLOADS: "never", PYTHONPATH: "" };
  const python = join(dir, "bin", "python");
  const venv = await exec(...installer.venv(dir), { env });
  const install = venv.code === 0 ? await exec(...installer.install(dir), { env }) : venv;
  if (!record(name, "install", install.code === 0, install.code === 0 ? "" : tail(install))) return;

  const probe = await exec(python, ["-c", IMPORT_PROBE], { env, cwd: dir });
  let imported = null;
  try {
    imported = JSON.parse(probe.stdout.trim());
  } catch {
    // Reported below.
  }
  const importOk = probe.code === 0 && imported?.version === version && imported.threads === 1 && imported.file.startsWith(dir);
  record(name, "import", importOk, importOk ? "" : `${tail(probe)}`);

  const typedInstalled = await exec(python, ["-c", "import importlib.resources as r, sys; sys.exit(0 if r.files('agentlane_host_channel').joinpath('py.typed').is_file() else 1)"], { env, cwd: dir });
  // mypy reads the files installed, which come from the source (the wheel
  // on the index, or the npm folder) whichever installer put them there:
  // it runs once per source (MYPY_ON, about 15 s each); the marker is
  // checked everywhere.
  let mypy = { code: 0 };
  if (MYPY_ON.has(name)) {
    const mypyInstall = await exec(...installer.extra(dir, [`mypy==${PINS.mypy}`]), { env });
    mypy = mypyInstall.code === 0
      ? await exec(join(dir, "bin", "mypy"), ["--strict", "--no-incremental", join(root, "tests", "rehearsal", "host_channel_factory.py")], { env, cwd: dir })
      : mypyInstall;
  }
  const typed = typedInstalled.code === 0 && mypy.code === 0;
  record(name, "typed", typed, typed ? "" : `${typedInstalled.code === 0 ? "" : "no py.typed installed; "}${tail(mypy)}`);

  const conversation = await exec(hostExample, ["--python", python], { env, cwd: root });
  const conversed = conversation.code === 0 && conversation.stdout.includes("final answer: Results: Ada Lovelace (gold)");
  record(name, "conversation", conversed, conversed ? "" : tail(conversation));
}

// ---- the run -------------------------------------------------------------------------

async function main() {
  const version = moduleVersion();
  const { pypiServer, wheelhouse } = await prepare();
  // The Rust host of the conversation step.
  await must(exec("cargo", ["build", "--quiet", "--profile", "quick", "-p", "bridge-host-channel", "--example", "host_tools"], { cwd: root, timeoutMs: 900_000 }), "building the example host");
  const hostExample = join(root, "target", "quick", "examples", "host_tools");
  const index = await startIndex(pypiServer);
  try {
    const args = [join(root, "scripts", "publish-python.mjs"), "--rehearsal", "--repository-url", `${index.url}/`];
    const breakAs = process.env.PBN_PY_REHEARSAL_BREAK;
    if (breakAs) {
      console.log(`rehearsal-python: PBN_PY_REHEARSAL_BREAK=${breakAs}: the release is published broken`);
      args.push("--break", breakAs);
    }
    // The release's publish step, as release.yml runs it (but to the local index).
    const published = await exec(process.execPath, args, { cwd: root });
    process.stdout.write(published.stdout.replace(/^/gm, "  "));
    if (!record("publish", "release", published.code === 0, published.code === 0 ? "" : tail(published))) return;
    const npmFolder = await npmPackedPythonFolder();
    // Two at a time: the machine has two cores.
    const all = Object.entries(installers(index, wheelhouse, npmFolder, version));
    for (let at = 0; at < all.length; at += 2) {
      await Promise.all(all.slice(at, at + 2).map(([name, installer]) => rehearse(name, installer, { version, hostExample })));
    }
  } finally {
    index.stop();
  }
}

let crashed = false;
try {
  await main();
} catch (error) {
  crashed = true;
  record("rehearsal-python", "set-up", false, error instanceof Error ? error.message : String(error));
}
finish(work, crashed);
