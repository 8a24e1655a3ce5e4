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
 *
 * Its SQL (the prepared statements, the row and its mapping) is in statements.ts, the wrapping
 * of SQLite's errors in errors.ts.
 */
import type BetterSqlite3 from 'better-sqlite3';
import type * as spi from '../../core/spi/store.ts';
import { oversizeBytes } from '../shared/checkpoint-size.ts';
import {
  type QueuedCommit,
  queued,
  type Settles,
  TurnQueue,
  type Unsettled,
} from '../shared/group-commit.ts';
import { InFlight } from '../shared/in-flight.ts';
import { loadPeer } from '../shared/peer.ts';
import { PURGE_BATCH, purgeEvery, purgeInBatches } from '../shared/purge.ts';
import { checkpointColumns, checkpointOf } from '../shared/rows.ts';
import { STORE_CODES, StoreError } from '../shared/store-error.ts';
import { isBusy, storeError } from './errors.ts';
import {
  LIST_CAP,
  type ResolvedOptions,
  resolveOptions,
  type SqliteStoreOptions,
} from './options.ts';
import { migrate } from './schema.ts';
import {
  leaseLive,
  prepare,
  type Row,
  SELECTED,
  type Statements,
  toStored,
  valuesOf,
} from './statements.ts';

/** A SQLite store ({@link createSqliteStore}). */
export interface SqliteStore extends spi.IncrementalStore {
  readonly name: 'sqlite';
}

/** A create or a commit waiting for the group's transaction. */
type Pending =
  | (Settles<spi.CreateOutcome> & {
      readonly kind: 'create';
      readonly checkpoint: spi.Checkpoint;
      readonly owner: string;
      readonly leaseMs: number;
    })
  | (QueuedCommit & { readonly kind: 'commit' })
  | (Settles<spi.CommitOutcome> & {
      readonly kind: 'append';
      readonly entry: spi.CheckpointEntry;
      readonly lease: spi.Lease;
      readonly leaseMs: number;
    });

/**
 * A conversation store in one SQLite file (WAL, `synchronous=FULL` by default), shared safely by
 * the processes of one host. Commits arriving in the same turn of the event loop share one
 * transaction (group commit). Throws at once when better-sqlite3 is not installed, the file
 * cannot be opened for writing, or it holds a schema newer than this version writes.
 *
 * @example
 * ```ts
 * import { createSqliteStore } from 'conversation-orchestrator/sqlite';
 * const store = createSqliteStore({ path: 'conversations.db' });
 * ```
 */
export function createSqliteStore(options: SqliteStoreOptions): SqliteStore {
  // The options are checked before anything is opened.
  return new SqliteStoreImpl(resolveOptions(options));
}

class SqliteStoreImpl implements SqliteStore {
  readonly name = 'sqlite' as const;
  readonly maxCheckpointBytes: number;
  readonly maxSnapshotBytes: number;
  readonly #options: ResolvedOptions;
  readonly #db: BetterSqlite3.Database;
  readonly #sql: Statements;
  /** The group commit's transaction, made once (better-sqlite3 wraps a function per call). */
  readonly #applyBatch: (batch: readonly Pending[]) => (spi.CreateOutcome | spi.CommitOutcome)[];
  /**
   * Running conversations whose log (entries, snapshot) is known empty, by the lease (owner and
   * epoch) that left it so: their creation or a whole commit by this store. A whole commit that
   * lands under that same lease skips clearing the log: the fenced update succeeding means no
   * other writer touched the conversation since, and this store's own appends and snapshots
   * drop the mark. Saves a short conversation's commit two DELETE statements. Marks are set
   * once their transaction has committed (`#logFreeStaged`), dropped at once.
   */
  readonly #logFree = new Map<string, string>();
  readonly #logFreeStaged: [string, string][] = [];
  /** One `BEGIN IMMEDIATE` transaction around any function, made once. */
  readonly #inTransaction: <T>(fn: () => T) => T;
  readonly #pending = new TurnQueue<Pending>((batch) => this.#flush(batch));
  /** Batches waiting for another process's write lock: close() lets them finish. */
  readonly #retryingBatches = new InFlight();
  #closed = false;
  #purgeTimer: NodeJS.Timeout | undefined;

  constructor(options: ResolvedOptions) {
    this.#options = options;
    this.maxCheckpointBytes = this.#options.maxCheckpointBytes;
    this.maxSnapshotBytes = this.#options.maxSnapshotBytes;
    const { path } = this.#options;
    const Database = loadPeer<typeof BetterSqlite3>({
      name: 'better-sqlite3',
      range: '^12',
      neededBy: 'createSqliteStore',
    });
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
          : item.kind === 'commit'
            ? this.#applyCommit(item.checkpoint, item.lease, item.leaseMs, now)
            : this.#applyAppend(item.entry, item.lease, item.leaseMs, now),
      );
    });
    this.#applyBatch = (items) => {
      try {
        const outcomes = batch.immediate(items);
        for (const [id, key] of this.#logFreeStaged) this.#logFree.set(id, key);
        return outcomes;
      } finally {
        this.#logFreeStaged.length = 0;
      }
    };
    const any = db.transaction((fn: () => unknown) => fn());
    this.#inTransaction = <T>(fn: () => T) => any.immediate(fn) as T;
    this.#purgeTimer = purgeEvery(this.#options.purgeIntervalMs, () =>
      this.#purgeBatch(Date.now()),
    );
  }

  #ensureOpen(method: string): void {
    if (this.#closed) {
      throw new StoreError(
        `sqlite store: ${method}() called after close() on ${this.#options.path}`,
        STORE_CODES.closed,
      );
    }
  }

  /** A whole checkpoint (create, commit, snapshot) is bounded by maxSnapshotBytes. */
  #checkSize(checkpoint: spi.Checkpoint, method: string): void {
    const bytes = oversizeBytes(checkpoint, this.maxSnapshotBytes);
    if (bytes === undefined) return;
    throw new StoreError(
      `sqlite store: ${method}() of conversation ${checkpoint.conversationId} (seq ${checkpoint.seq}) refused: the checkpoint is ${bytes} bytes (state + result, UTF-8), past maxSnapshotBytes ${this.maxSnapshotBytes}`,
      STORE_CODES.tooLarge,
    );
  }

  /** An entry is bounded by maxCheckpointBytes. */
  #checkEntrySize(entry: spi.CheckpointEntry): void {
    const text = entry.entry;
    if (text.length * 3 <= this.maxCheckpointBytes) return;
    const bytes = Buffer.byteLength(text);
    if (bytes <= this.maxCheckpointBytes) return;
    throw new StoreError(
      `sqlite store: append() of conversation ${entry.conversationId} (seq ${entry.seq}) refused: the entry is ${bytes} bytes (UTF-8), past maxCheckpointBytes ${this.maxCheckpointBytes}`,
      STORE_CODES.tooLarge,
    );
  }

  async create(checkpoint: spi.Checkpoint, owner: string, leaseMs: number) {
    return this.#enqueue<spi.CreateOutcome>({ kind: 'create', checkpoint, owner, leaseMs });
  }

  async commit(checkpoint: spi.Checkpoint, lease: spi.Lease, leaseMs: number) {
    return this.#enqueue<spi.CommitOutcome>({ kind: 'commit', checkpoint, lease, leaseMs });
  }

  async append(entry: spi.CheckpointEntry, lease: spi.Lease, leaseMs: number) {
    return this.#enqueue<spi.CommitOutcome>({ kind: 'append', entry, lease, leaseMs });
  }

  /** Queues a create, a commit or an append for this turn's transaction (see `#flush`). */
  #enqueue<T>(item: Unsettled<Pending>): Promise<T> {
    this.#ensureOpen(item.kind);
    if (item.kind === 'append') this.#checkEntrySize(item.entry);
    else this.#checkSize(item.checkpoint, item.kind);
    return queued<T, Pending>(this.#pending, item);
  }

  /** Applies everything queued in one transaction; each item settles with its own outcome. */
  #flush(batch: readonly Pending[]): void {
    const settle = (outcomes: (spi.CreateOutcome | spi.CommitOutcome)[]): void => {
      for (const [i, item] of batch.entries()) {
        (item.resolve as (outcome: spi.CreateOutcome | spi.CommitOutcome) => void)(
          outcomes[i] as spi.CreateOutcome,
        );
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
    void this.#retryingBatches.track(
      this.#retrying(() => this.#applyBatch(batch), 1).then(settle, failed),
    );
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

  #applyCreate(
    checkpoint: spi.Checkpoint,
    owner: string,
    leaseMs: number,
    now: number,
  ): spi.CreateOutcome {
    const running = checkpoint.status === 'running';
    const expiresAt = running ? now + leaseMs : now;
    const changes = this.#sql.insert.run({
      ...valuesOf(checkpoint, now),
      owner: running ? owner : null,
      epoch: 1,
      expiresAt: running ? expiresAt : null,
    }).changes;
    if (changes === 1 && running)
      this.#logFreeStaged.push([checkpoint.conversationId, `${owner}\u0000${1}`]);
    return changes === 1
      ? { created: true, lease: { owner, epoch: 1, expiresAt } }
      : { created: false };
  }

  #applyCommit(
    checkpoint: spi.Checkpoint,
    lease: spi.Lease,
    leaseMs: number,
    now: number,
  ): spi.CommitOutcome {
    const running = checkpoint.status === 'running';
    const expiresAt = running ? now + leaseMs : now;
    const changes = this.#sql.commit.run(
      ...checkpointColumns(checkpoint),
      now,
      checkpoint.status === 'ended' ? now : null,
      running ? lease.owner : null,
      running ? expiresAt : null,
      checkpoint.conversationId,
      lease.owner,
      lease.epoch,
      checkpoint.seq - 1,
    ).changes;
    const id = checkpoint.conversationId;
    if (changes === 1) {
      // A whole checkpoint is the new base: the entries and snapshot before it are done with.
      const key = `${lease.owner}\u0000${lease.epoch}`;
      if (this.#logFree.get(id) !== key) {
        this.#sql.clearEntries.run(id);
        this.#sql.clearSnapshot.run(id);
      }
      if (running) this.#logFreeStaged.push([id, key]);
      else this.#logFree.delete(id);
      return { ok: true, lease: { owner: lease.owner, epoch: lease.epoch, expiresAt } };
    }
    this.#logFree.delete(id);
    return this.#refused(id, lease);
  }

  /** Why a fenced write changed nothing. */
  #refused(conversationId: string, lease: spi.Lease): spi.CommitOutcome {
    const row = this.#sql.fence.get(conversationId) as
      | Pick<Row, 'owner' | 'epoch' | 'seq'>
      | undefined;
    if (row === undefined) return { ok: false, reason: 'not_found' };
    const holder = row.owner === lease.owner && row.epoch === lease.epoch;
    return { ok: false, reason: holder ? 'sequence' : 'fenced', storedSeq: row.seq };
  }

  /** An entry: the row's seq, count and lease moved on, compare-and-set, and the entry inserted. */
  #applyAppend(
    entry: spi.CheckpointEntry,
    lease: spi.Lease,
    leaseMs: number,
    now: number,
  ): spi.CommitOutcome {
    const expiresAt = now + leaseMs;
    this.#logFree.delete(entry.conversationId);
    const changes = this.#sql.append.run(
      entry.seq,
      entry.dispatchCount,
      now,
      expiresAt,
      entry.conversationId,
      lease.owner,
      lease.epoch,
      entry.seq - 1,
    ).changes;
    if (changes !== 1) return this.#refused(entry.conversationId, lease);
    this.#sql.insertEntry.run(entry.conversationId, entry.seq, entry.entry);
    return { ok: true, lease: { owner: lease.owner, epoch: lease.epoch, expiresAt } };
  }

  async snapshot(checkpoint: spi.Checkpoint, lease: spi.Lease): Promise<spi.SnapshotOutcome> {
    this.#ensureOpen('snapshot');
    this.#checkSize(checkpoint, 'snapshot');
    const id = checkpoint.conversationId;
    this.#logFree.delete(id);
    return this.#write(`snapshot of conversation ${id}`, (): spi.SnapshotOutcome => {
      const row = this.#sql.fence.get(id) as
        | Pick<Row, 'owner' | 'epoch' | 'seq' | 'status'>
        | undefined;
      if (row === undefined) return { ok: false, reason: 'not_found' };
      if (row.owner !== lease.owner || row.epoch !== lease.epoch) {
        return { ok: false, reason: 'fenced' };
      }
      const first = this.#sql.firstEntry.get(id) as number | null | undefined;
      // Stale unless an entry at or before its seq is still stored (the base is older).
      if (
        row.status !== 'running' ||
        first === null ||
        first === undefined ||
        checkpoint.seq < first ||
        checkpoint.seq > row.seq
      ) {
        return { ok: false, reason: 'stale' };
      }
      this.#sql.setSnapshot.run(id, checkpoint.seq, checkpoint.state);
      this.#sql.clearState.run(id);
      const compacted = this.#sql.compact.run(id, checkpoint.seq).changes;
      return { ok: true, compacted };
    });
  }

  async acquire(
    conversationId: string,
    owner: string,
    leaseMs: number,
  ): Promise<spi.AcquireOutcome> {
    this.#ensureOpen('acquire');
    this.#logFree.delete(conversationId);
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
      // The base: the snapshot when there is one (the row's state is then '').
      const snapshot = this.#sql.snapshotOf.get(conversationId) as string | undefined;
      const checkpoint = checkpointOf(row);
      return {
        status: 'acquired',
        checkpoint: snapshot === undefined ? checkpoint : { ...checkpoint, state: snapshot },
        entries: this.#sql.entries.all(conversationId) as string[],
        lease,
        takenOver: row.owner !== null && row.owner !== owner,
      };
    });
  }

  async renew(
    conversationId: string,
    lease: spi.Lease,
    leaseMs: number,
  ): Promise<spi.Lease | undefined> {
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

  async release(conversationId: string, lease: spi.Lease): Promise<void> {
    this.#ensureOpen('release');
    this.#logFree.delete(conversationId);
    await this.#write(`release of conversation ${conversationId}`, () => {
      this.#sql.release.run({ id: conversationId, owner: lease.owner, epoch: lease.epoch });
    });
  }

  async get(conversationId: string): Promise<spi.StoredConversation | undefined> {
    this.#ensureOpen('get');
    const row = (await this.#read(`get of conversation ${conversationId}`, () =>
      this.#sql.get.get(conversationId),
    )) as Row | undefined;
    return row === undefined ? undefined : toStored(row, Date.now(), this.#options.path);
  }

  async delete(conversationId: string): Promise<boolean> {
    this.#ensureOpen('delete');
    this.#logFree.delete(conversationId);
    return this.#write(`delete of conversation ${conversationId}`, () => {
      this.#sql.clearEntries.run(conversationId);
      this.#sql.clearSnapshot.run(conversationId);
      return this.#sql.delete.run(conversationId).changes === 1;
    });
  }

  async list(query: spi.ListQuery): Promise<readonly spi.StoredConversation[]> {
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
    const sql = `SELECT ${SELECTED} FROM conversations ${where.length > 0 ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY id LIMIT @limit`;
    const rows = (await this.#read('list', () => this.#db.prepare(sql).all(params))) as Row[];
    return rows.map((row) => toStored(row, now, this.#options.path));
  }

  async stats(): Promise<readonly spi.StoreStats[]> {
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
    return purgeInBatches(() => this.#write('purgeExpired', () => this.#purgeBatch(now)));
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
    this.#pending.flush();
    await this.#retryingBatches.drain();
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

function idsOf(batch: readonly Pending[]): string {
  const ids = batch
    .slice(0, 3)
    .map((item) => (item.kind === 'append' ? item.entry : item.checkpoint).conversationId);
  return batch.length > 3 ? `${ids.join(', ')} and ${batch.length - 3} more` : ids.join(', ');
}
