/**
 * The SQLite store's SQL: its prepared statements (`prepare`), the row they select and its
 * mapping to the core's types (`toStored`, `valuesOf`), and the lease check SQL calls
 * (`co_lease_live`).
 */
import type BetterSqlite3 from 'better-sqlite3';
import { isLeaseOwnerAlive } from '../../core/durable/lease-owner.ts';
import type * as spi from '../../core/spi/store.ts';
import { liveHolder, storedOf } from '../shared/rows.ts';
import { storeError } from './errors.ts';

/** A row as the store selects it (`id` as `conversation_id`, the column name of every store). */
export interface Row {
  conversation_id: string;
  orchestrator: string;
  status: spi.ConversationStatus;
  seq: number;
  dispatch_count: number;
  state: string;
  result: string | null;
  suspended_at: number | null;
  updated_at: number;
  owner: string | null;
  epoch: number;
  lease_expires_at: number | null;
}

/** The conversations table's columns, in the order `insert` writes them. */
export const COLUMNS =
  'id, orchestrator, status, seq, dispatch_count, state, result, suspended_at, updated_at, owner, epoch, lease_expires_at';
/** COLUMNS as `get` and `list` select them, `id` under the shared row's name. */
export const SELECTED = COLUMNS.replace(/^id,/, 'id AS conversation_id,');

/** Whether a recorded lease still holds: not released, not expired, its holder not known dead. */
export function leaseLive(owner: string | null, expiresAt: number | null, now: number): boolean {
  return liveHolder(owner, expiresAt, now, isLeaseOwnerAlive) !== undefined;
}

/** A selected row as the core reads it (its result parsed, its live holder only). */
export function toStored(row: Row, now: number, path: string): spi.StoredConversation {
  let result: unknown;
  if (row.result !== null) {
    try {
      result = JSON.parse(row.result);
    } catch (error) {
      throw storeError(`reading the result of conversation ${row.conversation_id}`, path, error);
    }
  }
  return storedOf(row, liveHolder(row.owner, row.lease_expires_at, now, isLeaseOwnerAlive), result);
}

/** A checkpoint's named parameters for the `insert` statement, at `now`. */
export function valuesOf(checkpoint: spi.Checkpoint, now: number) {
  return {
    id: checkpoint.conversationId,
    orchestrator: checkpoint.orchestrator,
    status: checkpoint.status,
    seq: checkpoint.seq,
    dispatchCount: checkpoint.dispatchCount,
    state: checkpoint.state,
    result: checkpoint.result ?? null,
    suspendedAt: checkpoint.suspendedAt ?? null,
    now,
    endedAt: checkpoint.status === 'ended' ? now : null,
  };
}

/** The prepared statements, by name. */
export type Statements = Readonly<
  Record<
    | 'get'
    | 'fence'
    | 'append'
    | 'insertEntry'
    | 'entries'
    | 'firstEntry'
    | 'setSnapshot'
    | 'snapshotOf'
    | 'clearState'
    | 'clearSnapshot'
    | 'compact'
    | 'clearEntries'
    | 'insert'
    | 'commit'
    | 'take'
    | 'renew'
    | 'release'
    | 'delete'
    | 'stats'
    | 'purge',
    BetterSqlite3.Statement
  >
>;

/**
 * The store's statements, prepared once when the store opens (`list` builds its own, its filter
 * varying).
 */
export function prepare(db: BetterSqlite3.Database): Statements {
  return {
    get: db.prepare(`SELECT ${SELECTED} FROM conversations WHERE id = ?`),
    fence: db.prepare('SELECT owner, epoch, seq, status FROM conversations WHERE id = ?'),
    // An entry's compare-and-set: the row's seq, count and lease move on; the state (the base)
    // stays. A suspended conversation resumed is running again.
    append: db.prepare(
      `UPDATE conversations SET status = 'running', seq = ?, dispatch_count = ?, suspended_at = NULL,
         updated_at = ?, lease_expires_at = ?
       WHERE id = ? AND owner = ? AND epoch = ? AND seq = ?`,
    ),
    insertEntry: db.prepare('INSERT INTO conversation_entries (id, seq, entry) VALUES (?, ?, ?)'),
    entries: db.prepare('SELECT entry FROM conversation_entries WHERE id = ? ORDER BY seq').pluck(),
    firstEntry: db.prepare('SELECT MIN(seq) FROM conversation_entries WHERE id = ?').pluck(),
    setSnapshot: db.prepare(
      'INSERT OR REPLACE INTO conversation_snapshots (id, seq, state) VALUES (?, ?, ?)',
    ),
    snapshotOf: db.prepare('SELECT state FROM conversation_snapshots WHERE id = ?').pluck(),
    clearState: db.prepare("UPDATE conversations SET state = '' WHERE id = ? AND state <> ''"),
    clearSnapshot: db.prepare('DELETE FROM conversation_snapshots WHERE id = ?'),
    compact: db.prepare('DELETE FROM conversation_entries WHERE id = ? AND seq <= ?'),
    clearEntries: db.prepare('DELETE FROM conversation_entries WHERE id = ?'),
    insert: db.prepare(
      `INSERT INTO conversations (${COLUMNS}, ended_at)
       VALUES (@id, @orchestrator, @status, @seq, @dispatchCount, @state, @result, @suspendedAt,
               @now, @owner, @epoch, @expiresAt, @endedAt)
       ON CONFLICT (id) DO NOTHING`,
    ),
    // The compare-and-set of a commit: owner, epoch and the previous seq in one statement.
    // Positional parameters (the hot path): binding by name costs more. The orchestrator of a
    // conversation never changes, so it is not set (nor its index entry rewritten).
    commit: db.prepare(
      `UPDATE conversations SET status = ?, seq = ?, dispatch_count = ?, state = ?, result = ?,
         suspended_at = ?, updated_at = ?, ended_at = ?, owner = ?, lease_expires_at = ?
       WHERE id = ? AND owner = ? AND epoch = ? AND seq = ?`,
    ),
    take: db.prepare(
      'UPDATE conversations SET owner = @owner, epoch = @epoch, lease_expires_at = @expiresAt WHERE id = @id',
    ),
    renew: db.prepare(
      `UPDATE conversations SET lease_expires_at = @expiresAt
       WHERE id = @id AND owner = @owner AND epoch = @epoch AND status <> 'ended'`,
    ),
    release: db.prepare(
      `UPDATE conversations SET owner = NULL, lease_expires_at = NULL
       WHERE id = @id AND owner = @owner AND epoch = @epoch`,
    ),
    delete: db.prepare('DELETE FROM conversations WHERE id = ?'),
    stats: db.prepare(
      `SELECT orchestrator,
         SUM(status = 'running') AS running,
         SUM(status = 'suspended') AS suspended,
         MIN(CASE WHEN status = 'suspended' THEN suspended_at END) AS oldest
       FROM conversations WHERE status <> 'ended' GROUP BY orchestrator ORDER BY orchestrator`,
    ),
    purge: db.prepare(
      `DELETE FROM conversations WHERE rowid IN (
         SELECT rowid FROM conversations WHERE status = 'ended' AND ended_at <= @before LIMIT @batch)`,
    ),
  };
}
