/**
 * The options of `createPostgresStore`, their defaults and their checks (p-queue's style: the
 * option named, the bad value shown).
 */
import {
  checkInteger as checkStoreInteger,
  checkString,
  NETWORK_DEFAULTS,
} from '../shared/options.ts';

/** A query as the store sends it. */
export interface PostgresQuery {
  /** The SQL. */
  readonly text: string;
  /** Its parameters (`$1`, `$2` …). */
  readonly values?: unknown[];
  /** Client-side bound on the answer, in milliseconds (`pg`'s per-query `query_timeout`). */
  readonly query_timeout?: number;
}

/** What the store reads of a query's answer. */
export interface PostgresResult {
  /** The rows, as `pg` answers them (bigint columns as strings). */
  readonly rows: Record<string, unknown>[];
}

/** A connection checked out of the pool (only the migration uses one, for its transaction). */
export interface PostgresPoolClient {
  /** Sends one query on this connection. */
  query(query: PostgresQuery): Promise<PostgresResult>;
  /** Gives the connection back (destroys it when given an error or `true`). */
  release(error?: Error | boolean): void;
}

/**
 * The part of a `pg` `Pool` the store uses: a `new pg.Pool(...)` of `pg` 8 fits. Attach your own
 * `pool.on('error', …)`: `pg` emits idle connections' errors there (a restarted server), and an
 * unhandled one ends the process.
 */
export interface PostgresPool {
  /** Sends one query on any free connection. */
  query(query: PostgresQuery): Promise<PostgresResult>;
  /** Checks a connection out (the migration's transaction needs one). */
  connect(): Promise<PostgresPoolClient>;
}

/** Options shared by both forms of {@link PostgresStoreOptions}. */
export interface PostgresStoreCommonOptions {
  /**
   * The table that holds the conversations (created and migrated by the store, one row per
   * conversation). The store also keeps its schema version in `co_schema_versions`. Letters,
   * digits and `_`, starting with a letter or `_`, at most 63 characters; unqualified (set the
   * `search_path` to put it in another schema).
   * @default 'co_conversations'
   */
  readonly table?: string | undefined;
  /**
   * How long an ended conversation is kept (from when it ended) before `purgeExpired()` deletes it.
   * @default 604_800_000 (7 days)
   */
  readonly retentionMs?: number | undefined;
  /**
   * How often the store runs `purgeExpired()` itself (an unref'd timer; its errors are ignored and
   * the next run retries). `0`: never, call `purgeExpired()` yourself.
   * @default 600_000 (10 minutes)
   */
  readonly purgeIntervalMs?: number | undefined;
  /**
   * The largest entry (an incremental commit, `append`: UTF-8 bytes) the store accepts; a larger
   * one is rejected with an error naming the conversation and both sizes.
   * @default 16_777_216 (16 MiB)
   */
  readonly maxCheckpointBytes?: number | undefined;
  /**
   * The largest snapshot or whole checkpoint (`state` + `result`, UTF-8 bytes) the store accepts:
   * what bounds a long conversation's whole state, while `maxCheckpointBytes` bounds one entry
   * (`append`). At most 1,000,000,000 (PostgreSQL's limit of a text value is 1 GB).
   * @default 268_435_456 (256 MiB)
   */
  readonly maxSnapshotBytes?: number | undefined;
  /**
   * How long one call may wait for the server, in milliseconds: each query's answer
   * (`query_timeout`), and the whole call including a wait for a connection. Past it the call
   * rejects with an error naming the store and what failed (a commit that timed out may or may
   * not have been applied: its seq tells, on the next `acquire`).
   * @default 10_000
   */
  readonly queryTimeoutMs?: number | undefined;
  /**
   * Group commit: the commits that arrive in the same turn of the event loop go to the server as
   * one statement (one round trip, one WAL flush), each still fenced on its own row. `false`
   * sends each commit alone.
   * @default true
   */
  readonly groupCommit?: boolean | undefined;
}

/** The store makes and owns its pool from a connection string (closed by `close()`). */
export interface PostgresConnectionOptions extends PostgresStoreCommonOptions {
  /** `postgres://user:password@host:port/database` (any form `pg` accepts). */
  readonly connectionString: string;
  /**
   * How long to wait for a connection to be established (TCP and authentication), in ms.
   * @default 5_000
   */
  readonly connectTimeoutMs?: number | undefined;
  /**
   * The most connections the store's pool opens.
   * @default 10
   */
  readonly poolSize?: number | undefined;
}

/** The store uses a pool you made and own (it never closes it). */
export interface PostgresPoolOptions extends PostgresStoreCommonOptions {
  /** A `pg` `Pool` (or anything with its `query` and `connect`). */
  readonly pool: PostgresPool;
}

/** Options of {@link createPostgresStore}: a `pool` of yours or a `connectionString`. */
export type PostgresStoreOptions = PostgresConnectionOptions | PostgresPoolOptions;

/** The two ways to give createPostgresStore its client, named in the error of options in neither form. */
export const CLIENT_FORMS = [
  ['pool', 'a pg Pool'],
  ['connectionString', 'a string'],
] as const;

export const DEFAULTS = {
  ...NETWORK_DEFAULTS,
  table: 'co_conversations',
  queryTimeoutMs: 10_000,
  poolSize: 10,
} as const;

export function checkInteger(name: string, value: unknown, min: number): number {
  return checkStoreInteger('createPostgresStore', name, value, min);
}

export function checkTable(value: unknown): string {
  return checkString(
    'createPostgresStore',
    'table',
    value,
    (table) => /^[A-Za-z_][A-Za-z0-9_]{0,62}$/.test(table),
    '1-63 letters, digits or _ (not starting with a digit)',
  );
}
