/**
 * The PostgreSQL conversation store (`conversation-orchestrator/postgres`), on `pg`. One row per
 * conversation; every change one statement whose WHERE is the fence (owner, epoch, seq), so two
 * writers never fork a conversation and a refused commit changes nothing. See docs/stores.md.
 */
import type pg from 'pg';
import type * as spi from '../../core/spi/store.ts';
import { oversizeBytes } from '../shared/checkpoint-size.ts';
import { acquireFromDeadHolder } from '../shared/dead-holder.ts';
import { InFlight } from '../shared/in-flight.ts';
import { checkRetention, clientFormsError, withoutPassword } from '../shared/options.ts';
import { loadPeer } from '../shared/peer.ts';
import { purgeEvery, purgeInBatches } from '../shared/purge.ts';
import { checkpointColumns, checkpointOf } from '../shared/rows.ts';
import {
  isNewerSchemaError,
  isStoreError,
  STORE_CODES,
  StoreError,
} from '../shared/store-error.ts';
import { timedCall } from '../shared/timed-call.ts';
import { queuedWrite, type WriteLane, writeLane } from './groups.ts';
import {
  CLIENT_FORMS,
  checkInteger,
  checkTable,
  DEFAULTS,
  type PostgresPool,
  type PostgresResult,
  type PostgresStoreOptions,
} from './options.ts';
import { migrate } from './schema.ts';
import { type Statements, statements } from './sql.ts';
import {
  appendValues,
  asRow,
  commitOutcome,
  commitValues,
  describeFailure,
  describePool,
  errorCode,
  toStored,
} from './values.ts';

/**
 * A PostgreSQL {@link spi.IncrementalStore} (entries and snapshots), with `ready()` to connect and
 * migrate up front.
 */
export interface PostgresStore extends spi.IncrementalStore {
  readonly name: 'postgres';
  /**
   * Connects and brings the table to the current schema (the first call of any method does it
   * too). Rejects with the store's clear error when the server cannot be reached, refuses the
   * login, or holds a table of a newer schema version.
   */
  ready(): Promise<void>;
}

/** A `commit()`, as its lane sends it. */
interface CommitWrite {
  readonly checkpoint: spi.Checkpoint;
  readonly lease: spi.Lease;
  readonly leaseMs: number;
}

/** An `append()`, as its lane sends it. */
interface AppendWrite {
  readonly entry: spi.CheckpointEntry;
  readonly lease: spi.Lease;
  readonly leaseMs: number;
}

/** What a commit is, for its errors. */
function commitWhat(checkpoint: spi.Checkpoint): string {
  return `commit of conversation "${checkpoint.conversationId}"`;
}

/** What an append is, for its errors. */
function appendWhat(entry: spi.CheckpointEntry): string {
  return `append of conversation "${entry.conversationId}" (seq ${entry.seq})`;
}

/** Most commits in one group-commit statement. */
const MAX_GROUP = 500;
/** SQLSTATEs after which a group commit is sent again (it was rolled back as a whole). */
const RETRYABLE = new Set(['40P01', '40001']);

/**
 * Creates a PostgreSQL store. With `{ connectionString }` the store makes its own pool (bounded
 * connect and query timeouts) and closes it in `close()`; with `{ pool }` it uses yours and leaves
 * it open. The table is created and migrated on first use (or `ready()`).
 */
export function createPostgresStore(options: PostgresStoreOptions): PostgresStore {
  return new PostgresStoreImpl(options);
}

class PostgresStoreImpl implements PostgresStore {
  readonly name = 'postgres' as const;
  readonly maxCheckpointBytes: number;
  readonly maxSnapshotBytes: number;
  readonly #pool: PostgresPool;
  readonly #ownPool: pg.Pool | undefined;
  readonly #label: string;
  readonly #table: string;
  readonly #sql: Statements;
  readonly #retentionMs: number;
  readonly #timeoutMs: number;
  readonly #callBoundMs: number;
  readonly #groupCommit: boolean;
  #ready: Promise<void> | undefined;
  #closed = false;
  readonly #commits = this.#lane<CommitWrite>({
    kind: 'commit',
    idOf: (p) => p.checkpoint.conversationId,
    what: (p) => commitWhat(p.checkpoint),
    check: (p) => this.#checkSize(p.checkpoint, 'commit'),
    values: (p) => commitValues(p.checkpoint, p.lease, p.leaseMs),
    status: (p) => p.checkpoint.status,
    text: () => [this.#sql.commitOne, this.#sql.commitMany],
    groupOf: 'conversations',
  });
  readonly #appends = this.#lane<AppendWrite>({
    kind: 'append',
    idOf: (p) => p.entry.conversationId,
    what: (p) => appendWhat(p.entry),
    check: (p) => this.#checkEntrySize(p.entry, appendWhat(p.entry)),
    values: (p) => appendValues(p.entry, p.lease, p.leaseMs),
    status: () => 'running',
    text: () => [this.#sql.appendOne, this.#sql.appendMany],
    groupOf: 'appends',
  });
  readonly #inFlight = new InFlight();
  readonly #purgeTimer: NodeJS.Timeout | undefined;

  constructor(options: PostgresStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw clientFormsError('createPostgresStore', CLIENT_FORMS, options);
    }
    this.#table = checkTable(options.table ?? DEFAULTS.table);
    const retention = checkRetention('createPostgresStore', options, DEFAULTS);
    this.#retentionMs = retention.retentionMs;
    this.maxCheckpointBytes = retention.maxCheckpointBytes;
    this.maxSnapshotBytes = Math.min(
      checkInteger('maxSnapshotBytes', options.maxSnapshotBytes ?? DEFAULTS.maxSnapshotBytes, 1),
      1_000_000_000,
    );
    this.#timeoutMs = checkInteger(
      'queryTimeoutMs',
      options.queryTimeoutMs ?? DEFAULTS.queryTimeoutMs,
      1,
    );
    this.#groupCommit = options.groupCommit ?? true;
    this.#sql = statements(this.#table);
    if ('pool' in options && options.pool !== undefined) {
      if (typeof options.pool?.query !== 'function' || typeof options.pool.connect !== 'function') {
        throw new TypeError(
          `Expected \`pool\` to be a pg Pool (with query() and connect()), got \`${String(options.pool)}\` (createPostgresStore)`,
        );
      }
      this.#pool = options.pool;
      this.#ownPool = undefined;
      this.#label = describePool(options.pool);
      this.#callBoundMs = 2 * this.#timeoutMs;
    } else if ('connectionString' in options && typeof options.connectionString === 'string') {
      const connectTimeoutMs = checkInteger(
        'connectTimeoutMs',
        options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
        1,
      );
      const { Pool } = loadPeer<typeof pg>({
        name: 'pg',
        range: '^8.11.0',
        neededBy: 'createPostgresStore({ connectionString })',
      });
      const pool = new Pool({
        connectionString: options.connectionString,
        max: checkInteger('poolSize', options.poolSize ?? DEFAULTS.poolSize, 1),
        connectionTimeoutMillis: connectTimeoutMs,
        query_timeout: this.#timeoutMs,
        keepAlive: true,
        application_name: 'conversation-orchestrator',
      });
      // Idle connections' errors (a restarted server) arrive here; the next query reconnects.
      pool.on('error', () => {});
      this.#pool = pool as unknown as PostgresPool;
      this.#ownPool = pool;
      this.#label = withoutPassword(options.connectionString, 'connection string');
      this.#callBoundMs = connectTimeoutMs + this.#timeoutMs;
    } else {
      throw clientFormsError('createPostgresStore', CLIENT_FORMS, options);
    }
    this.#purgeTimer = purgeEvery(retention.purgeIntervalMs, () => this.purgeExpired());
  }

  ready(): Promise<void> {
    if (this.#closed) return Promise.reject(this.#closedError('ready()'));
    this.#ready ??= this.#bounded('connecting and migrating the schema', async () => {
      const client = await this.#pool.connect();
      let failure: Error | undefined;
      try {
        await migrate(client, this.#table, this.#timeoutMs);
      } catch (error) {
        failure = error as Error;
        throw error;
      } finally {
        // A connection that failed mid-migration is thrown away, not reused.
        client.release(failure !== undefined && !isNewerSchemaError(failure));
      }
    }).catch((error: unknown) => {
      this.#ready = undefined; // the next call tries again (the server may be back)
      throw error;
    });
    return this.#ready;
  }

  async create(
    checkpoint: spi.Checkpoint,
    owner: string,
    leaseMs: number,
  ): Promise<spi.CreateOutcome> {
    this.#checkSize(checkpoint, 'create');
    const { rows } = await this.#query(`create of conversation "${checkpoint.conversationId}"`, {
      text: this.#sql.create,
      values: [
        checkpoint.conversationId,
        checkpoint.orchestrator,
        ...checkpointColumns(checkpoint),
        owner,
        Math.ceil(leaseMs),
      ],
    });
    const row = rows[0];
    if (row === undefined) return { created: false };
    return { created: true, lease: { owner, epoch: 1, expiresAt: Number(row.lease_expires_at) } };
  }

  async acquire(
    conversationId: string,
    owner: string,
    leaseMs: number,
  ): Promise<spi.AcquireOutcome> {
    const row = await acquireFromDeadHolder(
      async (deadOwner) => {
        const { rows } = await this.#query(`acquire of conversation "${conversationId}"`, {
          text: this.#sql.acquire,
          values: [conversationId, owner, Math.ceil(leaseMs), deadOwner ?? null],
        });
        return rows[0];
      },
      // Held (no new epoch), not ended: its holder, which may be a dead process of this host.
      (r) =>
        r !== undefined &&
        r.status !== 'ended' &&
        r.new_epoch === null &&
        typeof r.owner === 'string'
          ? r.owner
          : undefined,
    );
    if (row === undefined) return { status: 'not_found' };
    if (row.status === 'ended') return { status: 'ended', checkpoint: checkpointOf(asRow(row)) };
    if (row.new_epoch === null) {
      return {
        status: 'held',
        owner: String(row.owner),
        leaseExpiresAt: Number(row.lease_expires_at),
      };
    }
    const previous = row.owner as string | null;
    const entries = await this.#entriesAfterBase(conversationId, row);
    return {
      status: 'acquired',
      checkpoint: checkpointOf(asRow(row)),
      ...(entries === undefined ? {} : { entries }),
      lease: { owner, epoch: Number(row.new_epoch), expiresAt: Number(row.new_expires_at) },
      takenOver: previous !== null && previous !== owner,
    };
  }

  /**
   * The entries after the base of an acquired row (none when its base is whole). Read after the
   * acquire, in a statement of its own: the acquire's row lock may have waited for an append
   * whose entry its own snapshot of the entries table would not see; now the epoch is raised, no
   * other holder appends, and every append that committed before is seen.
   */
  async #entriesAfterBase(
    conversationId: string,
    row: Record<string, unknown>,
  ): Promise<string[] | undefined> {
    if (row.base_seq === null || row.base_seq === undefined) return undefined;
    const [base, seq] = [Number(row.base_seq), Number(row.seq)];
    const what = `acquire of conversation "${conversationId}" (its entries after seq ${base})`;
    const { rows } = await this.#query(what, {
      text: this.#sql.entries,
      values: [conversationId, base, seq],
    });
    if (rows.length !== seq - base) {
      // Deleted meanwhile (delete() cascades): never answer a log with a hole in it.
      throw this.#error(what, new Error(`found ${rows.length} of the ${seq - base} entries`));
    }
    return rows.map((r) => r.entry as string);
  }

  commit(checkpoint: spi.Checkpoint, lease: spi.Lease, leaseMs: number) {
    return this.#write(this.#commits, { checkpoint, lease, leaseMs });
  }

  /**
   * The lane of a kind of write: sent alone as `text()[0]` with its `values`, in a group as
   * `text()[1]` with each value's column (a group commit of so many `groupOf`), each write
   * answered from its conversation's row.
   */
  #lane<W extends { readonly lease: spi.Lease }>(
    spec: Pick<WriteLane<W>, 'kind' | 'idOf' | 'what' | 'check'> & {
      readonly values: (write: W) => unknown[];
      readonly status: (write: W) => spi.ConversationStatus;
      readonly text: () => readonly [one: string, many: string];
      readonly groupOf: string;
    },
  ): WriteLane<W> {
    const { idOf, values, status, text } = spec;
    return writeLane<W>(
      {
        ...spec,
        one: async (write) => {
          const { rows } = await this.#query(spec.what(write), {
            text: text()[0],
            values: values(write),
          });
          return commitOutcome(rows[0] ?? {}, write.lease, status(write));
        },
        many: async (group) => {
          const byWrite = group.map(values);
          const columns = (byWrite[0] ?? []).map((_, i) => byWrite.map((v) => v[i]));
          const rows = await this.#groupQuery(`group commit of ${group.length} ${spec.groupOf}`, {
            text: text()[1],
            values: columns,
          });
          const byId = new Map(rows.map((r) => [r.conversation_id as string, r]));
          for (const p of group) {
            p.resolve(commitOutcome(byId.get(idOf(p)) ?? {}, p.lease, status(p)));
          }
        },
        fail: (what, cause) => this.#error(what, cause),
      },
      MAX_GROUP,
    );
  }

  /** A commit or an append: checked, then sent alone or queued for this turn's group. */
  #write<W>(lane: WriteLane<W>, write: W): Promise<spi.CommitOutcome> {
    try {
      lane.check(write);
      if (this.#closed) throw this.#closedError(lane.what(write));
    } catch (error) {
      return Promise.reject(error);
    }
    if (!this.#groupCommit) return lane.one(write);
    return queuedWrite(lane, write);
  }

  /** A group's statement, sent again when it was rolled back as a whole (a deadlock). */
  async #groupQuery(
    what: string,
    query: { text: string; values: unknown[] },
  ): Promise<Record<string, unknown>[]> {
    for (let attempt = 1; ; attempt++) {
      try {
        return (await this.#query(what, query)).rows;
      } catch (error) {
        if (attempt >= 3 || !RETRYABLE.has(errorCode((error as Error).cause) ?? '')) throw error;
      }
    }
  }

  append(entry: spi.CheckpointEntry, lease: spi.Lease, leaseMs: number) {
    return this.#write(this.#appends, { entry, lease, leaseMs });
  }

  async snapshot(checkpoint: spi.Checkpoint, lease: spi.Lease): Promise<spi.SnapshotOutcome> {
    const what = `snapshot of conversation "${checkpoint.conversationId}" (seq ${checkpoint.seq})`;
    this.#checkSize(checkpoint, 'snapshot');
    const { rows } = await this.#query(what, {
      text: this.#sql.snapshot,
      values: [
        checkpoint.conversationId,
        checkpoint.seq,
        checkpoint.state,
        lease.owner,
        lease.epoch,
      ],
    });
    const row = rows[0] ?? {};
    if (Number(row.applied) === 1) return { ok: true, compacted: Number(row.compacted) };
    if (row.stored_seq === null || row.stored_seq === undefined) {
      return { ok: false, reason: 'not_found' };
    }
    const fenced = row.stored_owner !== lease.owner || Number(row.stored_epoch) !== lease.epoch;
    return { ok: false, reason: fenced ? 'fenced' : 'stale' };
  }

  async renew(
    conversationId: string,
    lease: spi.Lease,
    leaseMs: number,
  ): Promise<spi.Lease | undefined> {
    const { rows } = await this.#query(`renew of conversation "${conversationId}"`, {
      text: this.#sql.renew,
      values: [conversationId, lease.owner, lease.epoch, Math.ceil(leaseMs)],
    });
    const row = rows[0];
    if (row === undefined) return undefined;
    return { owner: lease.owner, epoch: lease.epoch, expiresAt: Number(row.lease_expires_at) };
  }

  async release(conversationId: string, lease: spi.Lease): Promise<void> {
    await this.#query(`release of conversation "${conversationId}"`, {
      text: this.#sql.release,
      values: [conversationId, lease.owner, lease.epoch],
    });
  }

  async get(conversationId: string): Promise<spi.StoredConversation | undefined> {
    const { rows } = await this.#query(`get of conversation "${conversationId}"`, {
      text: this.#sql.get,
      values: [conversationId],
    });
    return rows[0] === undefined ? undefined : toStored(rows[0]);
  }

  async delete(conversationId: string): Promise<boolean> {
    const { rows } = await this.#query(`delete of conversation "${conversationId}"`, {
      text: `${this.#sql.delete} RETURNING 1 AS deleted`,
      values: [conversationId],
    });
    return rows.length > 0;
  }

  async list(query: spi.ListQuery): Promise<readonly spi.StoredConversation[]> {
    const limit = Math.min(checkInteger('limit', query.limit, 0), 1_000);
    if (limit === 0) return [];
    const { rows } = await this.#query('list', {
      text: this.#sql.list,
      values: [
        query.orchestrator ?? null,
        query.status ?? null,
        query.unleased === true,
        query.after ?? null,
        limit,
      ],
    });
    return rows.map(toStored);
  }

  async stats(): Promise<readonly spi.StoreStats[]> {
    const { rows } = await this.#query('stats', { text: this.#sql.stats });
    return rows.map((r) => ({
      orchestrator: r.orchestrator as string,
      running: Number(r.running),
      suspended: Number(r.suspended),
      ...(r.oldest_suspended_at === null
        ? {}
        : { oldestSuspendedAt: Number(r.oldest_suspended_at) }),
    }));
  }

  async purgeExpired(): Promise<number> {
    return purgeInBatches(async () => {
      const { rows } = await this.#query('purgeExpired', {
        text: `${this.#sql.purge} RETURNING 1`,
        values: [this.#retentionMs],
      });
      return rows.length;
    });
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    if (this.#purgeTimer !== undefined) clearInterval(this.#purgeTimer);
    // Commits and appends already accepted are sent and answered before the pool closes.
    this.#commits.queue.flush();
    this.#appends.queue.flush();
    this.#closed = true;
    await this.#inFlight.drain();
    if (this.#ownPool !== undefined) await this.#ownPool.end();
  }

  /** A whole checkpoint (create, commit, snapshot) is bounded by maxSnapshotBytes. */
  #checkSize(checkpoint: spi.Checkpoint, operation: string): void {
    const bytes = oversizeBytes(checkpoint, this.maxSnapshotBytes);
    if (bytes === undefined) return;
    throw this.#error(
      `${operation} of conversation "${checkpoint.conversationId}"`,
      new Error(
        `its checkpoint is ${bytes.toLocaleString('en')} bytes (state + result, UTF-8), past maxSnapshotBytes ${this.maxSnapshotBytes.toLocaleString('en')}`,
      ),
      STORE_CODES.tooLarge,
    );
  }

  /** An entry is bounded by maxCheckpointBytes. */
  #checkEntrySize(entry: spi.CheckpointEntry, what: string): void {
    const max = this.maxCheckpointBytes;
    if (entry.entry.length * 3 <= max) return;
    const bytes = Buffer.byteLength(entry.entry, 'utf8');
    if (bytes <= max) return;
    throw this.#error(
      what,
      new Error(
        `its entry is ${bytes.toLocaleString('en')} bytes (UTF-8), past maxCheckpointBytes ${max.toLocaleString('en')}`,
      ),
      STORE_CODES.tooLarge,
    );
  }

  /** One statement, after the schema is ready, bounded in time, its failure made clear. */
  #query(what: string, query: { text: string; values?: unknown[] }): Promise<PostgresResult> {
    if (this.#closed) return Promise.reject(this.#closedError(what));
    // close() waits for these before it ends the pool.
    return this.#inFlight.track(
      this.ready().then(() =>
        this.#bounded(what, () => this.#pool.query({ ...query, query_timeout: this.#timeoutMs })),
      ),
    );
  }

  /** Runs `work`, rejecting with the store's error when it fails or outlasts the call bound. */
  #bounded<T>(what: string, work: () => Promise<T>): Promise<T> {
    return timedCall(work, this.#callBoundMs, (cause) => this.#error(what, cause));
  }

  #closedError(what: string): StoreError {
    return this.#error(what, new Error('the store is closed'), STORE_CODES.closed);
  }

  /** The store's error for `what`; one of its own errors (its code tells) passes as it is. */
  #error(what: string, cause: unknown, code: string = STORE_CODES.failed): StoreError {
    if (isStoreError(cause)) return cause;
    return new StoreError(
      `PostgreSQL store (${this.#label}): ${what} failed: ${describeFailure(cause, this.#timeoutMs)}`,
      code,
      cause,
    );
  }
}
