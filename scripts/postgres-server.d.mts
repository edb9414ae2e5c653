// Types of postgres-server.mjs, for the TypeScript tests that use it.
export interface PostgresServer {
  /** What a `pg.Pool` needs (the Unix socket's folder, port, user, database). */
  readonly connection: { host: string; port: number; user: string; database: string };
  /** The same as `PG*` environment variables (what `new pg.Pool()` reads), for a child process. */
  readonly env: Record<string, string>;
  /** `postgres --version`. */
  readonly version: string;
  /** The server's pid while it runs. */
  readonly pid: number | undefined;
  /** Starts the server (again); resolves when it accepts connections. */
  start(): Promise<void>;
  /** Stops the server (a fast shutdown: open connections are ended), waiting for its exit. */
  stop(): Promise<void>;
  /** Stops it and removes its folder. */
  dispose(): Promise<void>;
}
export declare function postgresBin(): string;
export declare function startPostgres(): Promise<PostgresServer>;
