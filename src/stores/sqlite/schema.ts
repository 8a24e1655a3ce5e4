/**
 * The SQLite store's schema and its migrations. The version lives in `PRAGMA user_version`; each
 * migration runs in one `BEGIN IMMEDIATE` transaction with the version bump, so two processes
 * opening a new file at once migrate it once, and a crash mid-migration leaves the old version.
 */
import type BetterSqlite3 from 'better-sqlite3';
import { NEWER_SCHEMA_CODE, StoreError } from '../shared/store-error.ts';

/** The schema version this code writes. A database at a higher version is refused. */
export const SCHEMA_VERSION = 2;

/**
 * One row per conversation (its base state, latest seq and lease), and its entries.
 * - `owner`/`epoch`/`lease_expires_at`: the lease. `owner` is NULL once released; `epoch` only
 *   grows (fencing token), so a released or taken-over holder's commits are refused.
 * - `ended_at`: when it ended, for retention (`conversations_ended` is a partial index on it).
 */
const MIGRATIONS: readonly string[] = [
  `CREATE TABLE conversations (
    id TEXT PRIMARY KEY NOT NULL,
    orchestrator TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('running', 'suspended', 'ended')),
    seq INTEGER NOT NULL,
    dispatch_count INTEGER NOT NULL,
    state TEXT NOT NULL,
    result TEXT,
    suspended_at INTEGER,
    updated_at INTEGER NOT NULL,
    ended_at INTEGER,
    owner TEXT,
    epoch INTEGER NOT NULL,
    lease_expires_at INTEGER
  );
  CREATE INDEX conversations_live ON conversations (orchestrator, status) WHERE status <> 'ended';
  CREATE INDEX conversations_ended ON conversations (ended_at) WHERE status = 'ended';`,
  // Version 2, incremental checkpoints: the entries after a conversation's base (its `state`, a
  // whole checkpoint or snapshot), deleted by the snapshot that covers them and by a whole commit.
  // A snapshot lives in a row of its own, so that an entry's update of the conversation's row
  // does not rewrite it (SQLite rewrites a whole row, overflow pages and all, on any update); the
  // conversation's `state` is then '' and the snapshot is its base.
  `CREATE TABLE conversation_entries (
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    entry TEXT NOT NULL,
    PRIMARY KEY (id, seq)
  ) WITHOUT ROWID;
  CREATE TABLE conversation_snapshots (
    id TEXT PRIMARY KEY NOT NULL,
    seq INTEGER NOT NULL,
    state TEXT NOT NULL
  );`,
];

/** Brings the database to `SCHEMA_VERSION`, or throws when it is newer than this code. */
export function migrate(db: BetterSqlite3.Database, path: string): void {
  const refuseNewer = (version: number) => {
    if (version > SCHEMA_VERSION) {
      throw new StoreError(
        `sqlite store: the database ${path} has schema version ${version}, newer than the version ${SCHEMA_VERSION} this conversation-orchestrator writes; open it with a newer conversation-orchestrator (or use another file)`,
        NEWER_SCHEMA_CODE,
      );
    }
  };
  const current = () => db.pragma('user_version', { simple: true }) as number;
  refuseNewer(current());
  if (current() === SCHEMA_VERSION) return;
  db.transaction(() => {
    // Read again inside the write lock: another process may have migrated meanwhile.
    const version = current();
    refuseNewer(version);
    for (let v = version; v < SCHEMA_VERSION; v++) db.exec(MIGRATIONS[v] as string);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  }).immediate();
}
