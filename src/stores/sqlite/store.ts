/**
 * The SQLite conversation store: one row per conversation in a WAL database, every change one
 * transaction, commits and creates grouped (see `#flush`).
 *
 * Group commit: `commit()` and `create()` do not write at once; they queue, and everything queued
 * in one turn of the event loop (a `setImmediate`) is applied in ONE `BEGIN IMMEDIATE`
 * transaction, so one fsync serves every conversation that committed in that turn. Each item is
 * still its own compare-and-set with its own outcome; if the transaction fails (a full disk, a
 * lock held past `busyTimeoutMs`) it is rolled back whole and every item of it rejects with the
 * same error: nothing is half-written.
 *
 * Waiting for the write lock never blocks the event loop: SQLite's own `busy_timeout` sleeps in
 * the calling thread (timers, `/healthz` and every other conversation stalled behind it), so it
 * is 0 once the store is open, and a call that finds the lock held (`SQLITE_BUSY`) is tried again
 * on a timer, backing off from 1 ms to 50 ms, until `busyTimeoutMs` has passed (see `#retrying`).
 */
import { createRequire } from 'node:module';
import type BetterSqlite3 from 'better-sqlite3';
import { isLeaseOwnerAlive } from '../../core/durable/lease-owner.ts';
import type {
  AcquireOutcome,
  Checkpoint,
  CommitOutcome,
  ConversationStatus,
  ConversationStore,
  Lease,
  ListQuery,
  StoredConversation,
  StoreStats,
} from '../../core/spi/store.ts';
import {
  LIST_CAP,
  PURGE_BATCH,
  type ResolvedOptions,
  resolveOptions,
  type SqliteStoreOptions,
} from './options.ts';
import { migrate } from './schema.ts';

interface Row {
  id: string;
  orchestrator: string;
  status: ConversationStatus;
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

type Created = { readonly created: true; readonly lease: Lease } | { readonly created: false };

type Pending =
  | {
      readonly kind: 'create';
      readonly checkpoint: Checkpoint;
      readonly owner: string;
      readonly leaseMs: number;
      readonly resolve: (outcome: Created) => void;
      readonly reject: (error: Error) => void;
    }
  | {
      readonly kind: 'commit';
      readonly checkpoint: Checkpoint;
      readonly lease: Lease;
      readonly leaseMs: number;
      readonly resolve: (outcome: CommitOutcome) => void;
      readonly reject: (error: Error) => void;
    };

/** What a SQLite error code means for the person reading the message. */
const HINTS: Record<string, string> = {
  SQLITE_FULL: 'the disk is full',
  SQLITE_READONLY: 'the file or its directory is read-only',
  SQLITE_READONLY_DBMOVED: 'the file was moved or deleted while open',
  SQLITE_BUSY: 'another process held the write lock longer than busyTimeoutMs',
  SQLITE_IOERR: 'an I/O error',
  SQLITE_CORRUPT: 'the file is corrupt',
  SQLITE_NOTADB: 'the file is not a SQLite database',
  SQLITE_CANTOPEN:
    'the file or its WAL cannot be opened for writing (a missing directory, or a read-only file or file system?)',
};

function hint(code: string | undefined): string {
  if (code === undefined) return '';
  const known = HINTS[code] ?? HINTS[code.replace(/_[A-Z]+$/, '')];
  return known === undefined ? ` [${code}]` : ` [${code}: ${known}]`;
}

/** An error naming the store, the file and what failed, with SQLite's error as its `cause`. */
function storeError(what: string, path: string, error: unknown): Error {
  if (error instanceof Error && error.message.startsWith('sqlite store:')) return error;
  const code = (error as { code?: unknown }).code;
  const message = error instanceof Error ? error.message : String(error);
  return new Error(
    `sqlite store: ${what} failed on ${path}: ${message}${hint(typeof code === 'string' ? code : undefined)}`,
    { cause: error },
  );
}

function loadBetterSqlite3(): typeof BetterSqlite3 {
  try {
    return createRequire(import.meta.url)('better-sqlite3') as typeof BetterSqlite3;
  } catch (error) {
    throw new Error(
      'createSqliteStore needs the optional peer dependency better-sqlite3 (^12): npm install better-sqlite3',
      { cause: error },
    );
  }
}

const COLUMNS =
  'id, orchestrator, status, seq, dispatch_count, state, result, suspended_at, updated_at, owner, epoch, lease_expires_at';

function checkpointOf(row: Row): Checkpoint {
  return {
    conversationId: row.id,
    orchestrator: row.orchestrator,
    status: row.status,
    seq: row.seq,
    dispatchCount: row.dispatch_count,
    state: row.state,
    ...(row.result === null ? {} : { result: row.result }),
    ...(row.suspended_at === null ? {} : { suspendedAt: row.suspended_at }),
  };
}

/** Whether a recorded lease still holds: not released, not expired, its holder not known dead. */
function leaseLive(owner: string | null, expiresAt: number | null, now: number): boolean {
  return owner !== null && expiresAt !== null && expiresAt > now && isLeaseOwnerAlive(owner);
}

function storedOf(row: Row, now: number, path: string): StoredConversation {
  let result: unknown;
  if (row.result !== null) {
    try {
      result = JSON.parse(row.result);
    } catch (error) {
      throw storeError(`reading the result of conversation ${row.id}`, path, error);
    }
  }
  const live = leaseLive(row.owner, row.lease_expires_at, now);
  return {
    conversationId: row.id,
    orchestrator: row.orchestrator,
    status: row.status,
    dispatchCount: row.dispatch_count,
    seq: row.seq,
    updatedAt: row.updated_at,
    ...(row.suspended_at === null ? {} : { suspendedAt: row.suspended_at }),
    ...(live ? { owner: row.owner as string, leaseExpiresAt: row.lease_expires_at as number } : {}),
    ...(row.result === null ? {} : { result }),
  };
}

function byteLength(checkpoint: Checkpoint): number {
  return (
    Buffer.byteLength(checkpoint.state, 'utf8') +
    (checkpoint.result === undefined ? 0 : Buffer.byteLength(checkpoint.result, 'utf8'))
  );
}

export class SqliteConversationStore implements ConversationStore {
  readonly name = 'sqlite';
  readonly maxCheckpointBytes: number;
  readonly #options: ResolvedOptions;
  readonly #db: BetterSqlite3.Database;
  readonly #sql: ReturnType<typeof prepare>;
  /** The group commit's transaction, made once (better-sqlite3 wraps a function per call). */
  readonly #applyBatch: (batch: readonly Pending[]) => (Created | CommitOutcome)[];
  /** One `BEGIN IMMEDIATE` transaction around any function, made once. */
  readonly #inTransaction: <T>(fn: () => T) => T;
  #pending: Pending[] = [];
  #flushScheduled = false;
  /** Batches waiting for another process's write lock: close() lets them finish. */
  readonly #retryingBatches = new Set<Promise<void>>();
  #closed = false;
  #purgeTimer: NodeJS.Timeout | undefined;

  constructor(options: SqliteStoreOptions) {
    this.#options = resolveOptions(options);
    this.maxCheckpointBytes = this.#options.maxCheckpointBytes;
    const { path } = this.#options;
    const Database = loadBetterSqlite3();
    let db: BetterSqlite3.Database | undefined;
    try {
      // Opening is synchronous (createSqliteStore is): there SQLite may wait for the lock itself.
      db = new Database(path, { timeout: this.#options.busyTimeoutMs });
      db.pragma('journal_mode = WAL');
      db.pragma(`synchronous = ${this.#options.synchronous}`);
      migrate(db, path);
      // Take the write lock once, so a read-only file or file system fails here, not at a commit.
      db.transaction(() => undefined).immediate();
      db.function('co_lease_live', { deterministic: false }, (owner, expiresAt, now) =>
        leaseLive(owner as string | null, expiresAt as number | null, now as number) ? 1 : 0,
      );
      this.#sql = prepare(db);
      // From here on a held lock is waited for off the thread: see #retrying.
      db.pragma('busy_timeout = 0');
    } catch (error) {
      db?.close();
      throw storeError('opening the database', path, error);
    }
    this.#db = db;
    const batch = db.transaction((items: readonly Pending[]) => {
      const now = Date.now();
      return items.map((item) =>
        item.kind === 'create'
          ? this.#applyCreate(item.checkpoint, item.owner, item.leaseMs, now)
          : this.#applyCommit(item.checkpoint, item.lease, item.leaseMs, now),
      );
    });
    this.#applyBatch = (items) => batch.immediate(items);
    const any = db.transaction((fn: () => unknown) => fn());
    this.#inTransaction = <T>(fn: () => T) => any.immediate(fn) as T;
    if (this.#options.purgeIntervalMs > 0) {
      this.#purgeTimer = setInterval(() => {
        try {
          this.#purgeBatch(Date.now());
        } catch {
          // The next tick tries again; `purgeExpired()` reports failures to its caller.
        }
      }, this.#options.purgeIntervalMs);
      this.#purgeTimer.unref();
    }
  }

  #ensureOpen(method: string): void {
    if (this.#closed) {
      throw new Error(`sqlite store: ${method}() called after close() on ${this.#options.path}`);
    }
  }

  #checkSize(checkpoint: Checkpoint, method: string): void {
    // A UTF-16 code unit is at most 3 UTF-8 bytes: most checkpoints need no exact count.
    const units = checkpoint.state.length + (checkpoint.result?.length ?? 0);
    if (units * 3 <= this.maxCheckpointBytes) return;
    const bytes = byteLength(checkpoint);
    if (bytes > this.maxCheckpointBytes) {
      throw new Error(
        `sqlite store: ${method}() of conversation ${checkpoint.conversationId} (seq ${checkpoint.seq}) refused: the checkpoint is ${bytes} bytes (state + result, UTF-8), past maxCheckpointBytes ${this.maxCheckpointBytes}`,
      );
    }
  }

  async create(checkpoint: Checkpoint, owner: string, leaseMs: number): Promise<Created> {
    this.#ensureOpen('create');
    this.#checkSize(checkpoint, 'create');
    return new Promise((resolve, reject) =>
      this.#enqueue({ kind: 'create', checkpoint, owner, leaseMs, resolve, reject }),
    );
  }

  async commit(checkpoint: Checkpoint, lease: Lease, leaseMs: number): Promise<CommitOutcome> {
    this.#ensureOpen('commit');
    this.#checkSize(checkpoint, 'commit');
    return new Promise((resolve, reject) =>
      this.#enqueue({ kind: 'commit', checkpoint, lease, leaseMs, resolve, reject }),
    );
  }

  #enqueue(item: Pending): void {
    this.#pending.push(item);
    if (!this.#flushScheduled) {
      this.#flushScheduled = true;
      setImmediate(() => this.#flush());
    }
  }

  /** Applies everything queued in one transaction; each item settles with its own outcome. */
  #flush(): void {
    this.#flushScheduled = false;
    const batch = this.#pending;
    if (batch.length === 0) return;
    this.#pending = [];
    const settle = (outcomes: (Created | CommitOutcome)[]): void => {
      for (const [i, item] of batch.entries()) {
        (item.resolve as (outcome: Created | CommitOutcome) => void)(outcomes[i] as Created);
      }
    };
    const failed = (error: unknown): void => {
      const what = batch.length === 1 ? (batch[0] as Pending).kind : `a group of ${batch.length}`;
      const failure = storeError(
        `${what} (conversations ${idsOf(batch)})`,
        this.#options.path,
        error,
      );
      for (const item of batch) item.reject(failure);
    };
    // The common case stays synchronous: one attempt, no promise, no timer.
    try {
      settle(this.#applyBatch(batch));
      return;
    } catch (error) {
      if (!isBusy(error) || this.#options.busyTimeoutMs === 0) {
        failed(error);
        return;
      }
    }
    const retried = this.#retrying(() => this.#applyBatch(batch), 1).then(settle, failed);
    this.#retryingBatches.add(retried);
    void retried.finally(() => this.#retryingBatches.delete(retried));
  }

  /**
   * Runs `fn` (a transaction or a read) until it does not find the write lock held, trying again
   * on a timer (1 ms doubling to 50 ms) until `busyTimeoutMs` has passed since the first try;
   * then rejects with the last `SQLITE_BUSY`. `tried`: attempts already made (and failed busy).
   */
  async #retrying<T>(fn: () => T, tried = 0): Promise<T> {
    const until = performance.now() + this.#options.busyTimeoutMs;
    let delay = 1;
    for (let attempt = tried; ; attempt++) {
      if (attempt > 0) {
        await new Promise((resolve) => setTimeout(resolve, delay));
        delay = Math.min(delay * 2, 50);
      }
      try {
        return fn();
      } catch (error) {
        if (!isBusy(error) || performance.now() >= until || this.#db.open === false) throw error;
      }
    }
  }

  #applyCreate(checkpoint: Checkpoint, owner: string, leaseMs: number, now: number): Created {
    const running = checkpoint.status === 'running';
    const expiresAt = running ? now + leaseMs : now;
    const changes = this.#sql.insert.run({
      ...this.#values(checkpoint, now),
      owner: running ? owner : null,
      epoch: 1,
      expiresAt: running ? expiresAt : null,
    }).changes;
    return changes === 1
      ? { created: true, lease: { owner, epoch: 1, expiresAt } }
      : { created: false };
  }

  #applyCommit(checkpoint: Checkpoint, lease: Lease, leaseMs: number, now: number): CommitOutcome {
    const running = checkpoint.status === 'running';
    const expiresAt = running ? now + leaseMs : now;
    const changes = this.#sql.commit.run(
      checkpoint.status,
      checkpoint.seq,
      checkpoint.dispatchCount,
      checkpoint.state,
      checkpoint.result ?? null,
      checkpoint.suspendedAt ?? null,
      now,
      checkpoint.status === 'ended' ? now : null,
      running ? lease.owner : null,
      running ? expiresAt : null,
      checkpoint.conversationId,
      lease.owner,
      lease.epoch,
      checkpoint.seq - 1,
    ).changes;
    if (changes === 1)
      return { ok: true, lease: { owner: lease.owner, epoch: lease.epoch, expiresAt } };
    const row = this.#sql.fence.get(checkpoint.conversationId) as
      | Pick<Row, 'owner' | 'epoch' | 'seq'>
      | undefined;
    if (row === undefined) return { ok: false, reason: 'not_found' };
    const holder = row.owner === lease.owner && row.epoch === lease.epoch;
    return { ok: false, reason: holder ? 'sequence' : 'fenced', storedSeq: row.seq };
  }

  #values(checkpoint: Checkpoint, now: number) {
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

  async acquire(conversationId: string, owner: string, leaseMs: number): Promise<AcquireOutcome> {
    this.#ensureOpen('acquire');
    return this.#write(`acquire of conversation ${conversationId}`, () => {
      const now = Date.now();
      const row = this.#sql.get.get(conversationId) as Row | undefined;
      if (row === undefined) return { status: 'not_found' };
      if (row.status === 'ended') return { status: 'ended', checkpoint: checkpointOf(row) };
      if (row.owner !== owner && leaseLive(row.owner, row.lease_expires_at, now)) {
        return {
          status: 'held',
          owner: row.owner as string,
          leaseExpiresAt: row.lease_expires_at as number,
        };
      }
      const lease = { owner, epoch: row.epoch + 1, expiresAt: now + leaseMs };
      this.#sql.take.run({ id: conversationId, ...lease });
      return {
        status: 'acquired',
        checkpoint: checkpointOf(row),
        lease,
        takenOver: row.owner !== null && row.owner !== owner,
      };
    });
  }

  async renew(conversationId: string, lease: Lease, leaseMs: number): Promise<Lease | undefined> {
    this.#ensureOpen('renew');
    return this.#write(`renew of conversation ${conversationId}`, () => {
      const expiresAt = Date.now() + leaseMs;
      const { changes } = this.#sql.renew.run({
        id: conversationId,
        owner: lease.owner,
        epoch: lease.epoch,
        expiresAt,
      });
      return changes === 1 ? { owner: lease.owner, epoch: lease.epoch, expiresAt } : undefined;
    });
  }

  async release(conversationId: string, lease: Lease): Promise<void> {
    this.#ensureOpen('release');
    await this.#write(`release of conversation ${conversationId}`, () => {
      this.#sql.release.run({ id: conversationId, owner: lease.owner, epoch: lease.epoch });
    });
  }

  async get(conversationId: string): Promise<StoredConversation | undefined> {
    this.#ensureOpen('get');
    const row = (await this.#read(`get of conversation ${conversationId}`, () =>
      this.#sql.get.get(conversationId),
    )) as Row | undefined;
    return row === undefined ? undefined : storedOf(row, Date.now(), this.#options.path);
  }

  async delete(conversationId: string): Promise<boolean> {
    this.#ensureOpen('delete');
    return this.#write(
      `delete of conversation ${conversationId}`,
      () => this.#sql.delete.run(conversationId).changes === 1,
    );
  }

  async list(query: ListQuery): Promise<readonly StoredConversation[]> {
    this.#ensureOpen('list');
    const { limit } = query;
    if (typeof limit !== 'number' || !Number.isSafeInteger(limit) || limit < 0) {
      throw new TypeError(
        `sqlite store: list() expected \`limit\` to be a non-negative integer, got ${String(limit)}`,
      );
    }
    if (limit === 0) return [];
    const now = Date.now();
    const where: string[] = [];
    const params: Record<string, unknown> = { limit: Math.min(limit, LIST_CAP), now };
    if (query.orchestrator !== undefined) {
      where.push('orchestrator = @orchestrator');
      params.orchestrator = query.orchestrator;
    }
    if (query.status !== undefined) {
      where.push('status = @status');
      params.status = query.status;
    }
    if (query.after !== undefined) {
      where.push('id > @after');
      params.after = query.after;
    }
    if (query.unleased === true) where.push('co_lease_live(owner, lease_expires_at, @now) = 0');
    const sql = `SELECT ${COLUMNS} FROM conversations ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT @limit`;
    const rows = (await this.#read('list', () => this.#db.prepare(sql).all(params))) as Row[];
    return rows.map((row) => storedOf(row, now, this.#options.path));
  }

  async stats(): Promise<readonly StoreStats[]> {
    this.#ensureOpen('stats');
    const rows = (await this.#read('stats', () => this.#sql.stats.all())) as {
      orchestrator: string;
      running: number;
      suspended: number;
      oldest: number | null;
    }[];
    return rows.map((r) => ({
      orchestrator: r.orchestrator,
      running: r.running,
      suspended: r.suspended,
      ...(r.oldest === null ? {} : { oldestSuspendedAt: r.oldest }),
    }));
  }

  async purgeExpired(): Promise<number> {
    this.#ensureOpen('purgeExpired');
    const now = Date.now();
    let total = 0;
    for (;;) {
      const deleted = await this.#write('purgeExpired', () => this.#purgeBatch(now));
      total += deleted;
      if (deleted < PURGE_BATCH) return total;
    }
  }

  #purgeBatch(now: number): number {
    return this.#sql.purge.run({ before: now - this.#options.retentionMs, batch: PURGE_BATCH })
      .changes;
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    clearInterval(this.#purgeTimer);
    // Commits already queued are applied (or rejected) before the file closes, those waiting for
    // another process's lock included (within busyTimeoutMs).
    this.#flush();
    await Promise.allSettled([...this.#retryingBatches]);
    this.#db.close();
  }

  #write<T>(what: string, fn: () => T): Promise<T> {
    return this.#retrying(() => this.#inTransaction(fn)).catch((error: unknown) => {
      throw storeError(what, this.#options.path, error);
    });
  }

  #read<T>(what: string, fn: () => T): Promise<T> {
    return this.#retrying(fn).catch((error: unknown) => {
      throw storeError(what, this.#options.path, error);
    });
  }
}

/** Whether SQLite said another connection holds the lock (`SQLITE_BUSY` and its variants). */
function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

function idsOf(batch: readonly Pending[]): string {
  const ids = batch.slice(0, 3).map((item) => item.checkpoint.conversationId);
  return batch.length > 3 ? `${ids.join(', ')} and ${batch.length - 3} more` : ids.join(', ');
}

function prepare(db: BetterSqlite3.Database) {
  return {
    get: db.prepare(`SELECT ${COLUMNS} FROM conversations WHERE id = ?`),
    fence: db.prepare('SELECT owner, epoch, seq FROM conversations WHERE id = ?'),
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
