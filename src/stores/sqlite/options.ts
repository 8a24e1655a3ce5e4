/** The options of `createSqliteStore`, their defaults and their validation. */
import { describeValue } from '../../core/spi/errors.ts';

/** Options of `createSqliteStore(options)`. */
export interface SqliteStoreOptions {
  /**
   * The database file, created if missing (its directory must exist), or `':memory:'` for a store
   * that lives and dies with the process (tests; no other process can share it).
   */
  readonly path: string;
  /**
   * SQLite's `synchronous` pragma (the journal is always WAL). `FULL`: each commit is fsynced, so a
   * committed dispatch survives a power cut. `NORMAL`: fsynced at WAL checkpoints only; a commit
   * survives the process being killed but the last ones may be lost in a power cut or an OS crash.
   * @default 'FULL'
   */
  readonly synchronous?: 'FULL' | 'NORMAL' | undefined;
  /**
   * How long a call waits for another process that holds the file's write lock before it fails
   * (SQLite's `busy_timeout`), in milliseconds.
   * @default 5000
   */
  readonly busyTimeoutMs?: number | undefined;
  /**
   * How long an ended conversation is kept (counted from when it ended) before `purgeExpired()`
   * deletes it, in milliseconds.
   * @default 604800000 (7 days)
   */
  readonly retentionMs?: number | undefined;
  /**
   * How often the store purges expired conversations by itself, at most 1,000 rows a time, on a
   * timer that does not keep the process alive, in milliseconds; `0` turns it off (call
   * `purgeExpired()` yourself).
   * @default 60000
   */
  readonly purgeIntervalMs?: number | undefined;
  /**
   * The largest checkpoint (`state` + `result`, UTF-8 bytes) the store accepts, and with
   * incremental checkpoints the largest entry (what one commit adds); a larger one is rejected
   * with an error naming the conversation and both sizes.
   * @default 4194304 (4 MiB)
   */
  readonly maxCheckpointBytes?: number | undefined;
  /**
   * The largest snapshot or whole checkpoint (`state` + `result`, UTF-8 bytes) the store accepts:
   * what bounds a long conversation's whole state (SQLite's own limit is 1,000,000,000 bytes).
   * @default 268435456 (256 MiB)
   */
  readonly maxSnapshotBytes?: number | undefined;
}

export const DEFAULTS = {
  synchronous: 'FULL',
  busyTimeoutMs: 5_000,
  retentionMs: 7 * 24 * 60 * 60 * 1000,
  purgeIntervalMs: 60_000,
  maxCheckpointBytes: 4 * 1024 * 1024,
  maxSnapshotBytes: 256 * 1024 * 1024,
} as const;

/** Rows `list()` returns at most per call, whatever `limit` asks. */
export const LIST_CAP = 10_000;

export interface ResolvedOptions {
  readonly path: string;
  readonly synchronous: 'FULL' | 'NORMAL';
  readonly busyTimeoutMs: number;
  readonly retentionMs: number;
  readonly purgeIntervalMs: number;
  readonly maxCheckpointBytes: number;
  readonly maxSnapshotBytes: number;
}

function expected(option: string, what: string, value: unknown): never {
  throw new TypeError(
    `createSqliteStore: expected \`${option}\` to be ${what}, got ${describeValue(value)}`,
  );
}

function integer(option: string, value: unknown, fallback: number, min: number): number {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    expected(option, min === 0 ? 'a non-negative integer' : 'a positive integer', value);
  }
  return value;
}

export function resolveOptions(options: SqliteStoreOptions): ResolvedOptions {
  if (typeof options !== 'object' || options === null) expected('options', 'an object', options);
  const { path, synchronous } = options;
  if (typeof path !== 'string' || path === '') {
    expected('path', "a file path or ':memory:'", path);
  }
  if (synchronous !== undefined && synchronous !== 'FULL' && synchronous !== 'NORMAL') {
    expected('synchronous', "'FULL' or 'NORMAL'", synchronous);
  }
  return {
    path,
    synchronous: synchronous ?? DEFAULTS.synchronous,
    busyTimeoutMs: integer('busyTimeoutMs', options.busyTimeoutMs, DEFAULTS.busyTimeoutMs, 0),
    retentionMs: integer('retentionMs', options.retentionMs, DEFAULTS.retentionMs, 0),
    purgeIntervalMs: integer(
      'purgeIntervalMs',
      options.purgeIntervalMs,
      DEFAULTS.purgeIntervalMs,
      0,
    ),
    maxCheckpointBytes: integer(
      'maxCheckpointBytes',
      options.maxCheckpointBytes,
      DEFAULTS.maxCheckpointBytes,
      1,
    ),
    maxSnapshotBytes: Math.min(
      integer('maxSnapshotBytes', options.maxSnapshotBytes, DEFAULTS.maxSnapshotBytes, 1),
      1_000_000_000,
    ),
  };
}
