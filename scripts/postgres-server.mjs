// A real PostgreSQL server for the PostgreSQL store's tests and benchmark
// (__test__/stores/postgres.test.ts, bench/stores.mjs): Debian's programs
// (scripts/setup-postgres.sh installs them), a cluster made by `initdb` in
// a temporary folder, listening on a Unix socket in that folder only (no
// TCP port), stopped and removed by `dispose()`.
//
// `initdb` and `postgres` refuse to run as root: as root, both run as the
// `postgres` user (Debian's package makes it) through `setpriv`, which
// execs, so the server's pid is the child's. The server gets SIGINT (a
// fast shutdown) if the process that started it dies (`--pdeathsig`): a
// crashed test run leaves no server behind.
import { execFileSync, spawn } from "node:child_process";
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

/** The folder of `initdb` and `postgres`: $PBN_PG_BIN, the newest Debian version, or `pg_config --bindir`. */
export function postgresBin() {
  const candidates = [];
  if (process.env.PBN_PG_BIN) candidates.push(process.env.PBN_PG_BIN);
  if (existsSync("/usr/lib/postgresql")) {
    const versions = readdirSync("/usr/lib/postgresql").sort((a, b) => Number(b) - Number(a));
    candidates.push(...versions.map((version) => join("/usr/lib/postgresql", version, "bin")));
  }
  try {
    candidates.push(execFileSync("pg_config", ["--bindir"], { encoding: "utf8" }).trim());
  } catch {
    // No pg_config: the other candidates decide.
  }
  const bin = candidates.find((folder) => existsSync(join(folder, "initdb")) && existsSync(join(folder, "postgres")));
  if (bin === undefined) {
    throw new Error("No PostgreSQL server programs (initdb, postgres): run `bash scripts/setup-postgres.sh` (Debian: apt-get install postgresql), or set PBN_PG_BIN.");
  }
  return bin;
}

/** As root: the `postgres` user's ids (initdb and the server refuse root). */
function serverUser() {
  if (process.getuid?.() !== 0) return undefined;
  try {
    const [uid, gid] = ["-u", "-g"].map((flag) => Number(execFileSync("id", [flag, "postgres"], { encoding: "utf8" }).trim()));
    return { uid, gid };
  } catch {
    throw new Error("Running as root, and there is no `postgres` user to run the server as (Debian's postgresql package makes it).");
  }
}

/** The command line that runs `program` as the server's user, SIGINTed if this process dies. */
function asServer(user, program, args) {
  const identity = user === undefined ? [] : [`--reuid=${user.uid}`, `--regid=${user.gid}`, "--init-groups"];
  return ["setpriv", [...identity, "--pdeathsig", "INT", "--", program, ...args]];
}

/** Makes a cluster in a temporary folder and starts its server. */
export async function startPostgres() {
  const bin = postgresBin();
  const user = serverUser();
  const root = mkdtempSync(join(tmpdir(), "pbn-postgres-"));
  chmodSync(root, 0o755);
  const data = join(root, "data");
  const socket = join(root, "socket");
  for (const folder of [data, socket]) {
    mkdirSync(folder, { mode: 0o700 });
    if (user !== undefined) chownSync(folder, user.uid, user.gid);
  }
  const port = 5432;
  const [initdb, initArgs] = asServer(user, join(bin, "initdb"), ["-D", data, "-U", "agentlane", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"]);
  execFileSync(initdb, initArgs, { stdio: ["ignore", "ignore", "pipe"] });

  let server;
  let exited = Promise.resolve();
  const start = () => {
    const [command, args] = asServer(user, join(bin, "postgres"), ["-D", data, "-k", socket, "-p", String(port), "-c", "listen_addresses="]);
    const child = spawn(command, args, { stdio: ["ignore", "ignore", "pipe"] });
    server = child;
    exited = new Promise((resolve) => child.once("exit", () => resolve()));
    const log = [];
    return new Promise((resolve, reject) => {
      createInterface({ input: child.stderr }).on("line", (line) => {
        log.push(line);
        if (line.includes("database system is ready to accept connections")) resolve();
      });
      child.once("exit", (code, signal) => reject(new Error(`postgres exited before it was ready (${code ?? signal}):\n${log.join("\n")}`)));
    });
  };
  const stop = async () => {
    if (server !== undefined && server.exitCode === null && server.signalCode === null) server.kill("SIGINT");
    await exited;
  };
  await start();
  return {
    connection: { host: socket, port, user: "agentlane", database: "postgres" },
    env: { PGHOST: socket, PGPORT: String(port), PGUSER: "agentlane", PGDATABASE: "postgres" },
    version: execFileSync(join(bin, "postgres"), ["--version"], { encoding: "utf8" }).trim(),
    get pid() {
      return server?.pid;
    },
    start,
    stop,
    async dispose() {
      await stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
