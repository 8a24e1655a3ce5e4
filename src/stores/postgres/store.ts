/**
 * The PostgreSQL conversation store (`conversation-orchestrator/postgres`), on `pg`. One row per
 * conversation; every change one statement whose WHERE is the fence (owner, epoch, seq), so two
 * writers never fork a conversation and a refused commit changes nothing. See docs/stores.md.
 */
import type pg from 'pg';
import { isLeaseOwnerAlive } from '../../core/durable/lease-owner.ts';
import type * as spi from '../../core/spi/store.ts';
import { oversizeBytes, oversizeReason } from '../shared/checkpoint-size.ts';
import { type QueuedCommit, queued, TurnQueue } from '../shared/group-commit.ts';
import { InFlight } from '../shared/in-flight.ts';
import { checkRetention, clientFormsError, withoutPassword } from '../shared/options.ts';
import { loadPeer } from '../shared/peer.ts';
import { purgeEvery, purgeInBatches } from '../shared/purge.ts';
import {
  type ConversationRow,
  checkpointColumns,
  checkpointOf,
  endingOf,
  liveHolder,
  storedOf,
} from '../shared/rows.ts';
import {
  isNewerSchemaError,
  isStoreError,
  STORE_CODES,
  StoreError,
} from '../shared/store-error.ts';
import { timedCall } from '../shared/timed-call.ts';
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

/** A PostgreSQL {@link spi.ConversationStore}, with `ready()` to connect and migrate up front. */
export interface PostgresStore extends spi.ConversationStore {
  readonly name: 'postgres';
  /**
   * Connects and brings the table to the current schema (the first call of any method does it
   * too). Rejects with the store's clear error when the server cannot be reached, refuses the
   * login, or holds a table of a newer schema version.
   */
  ready(): Promise<void>;
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
  readonly #commits = new TurnQueue<QueuedCommit>((pending) => this.#flush(pending));
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
    const what = `acquire of conversation "${conversationId}"`;
    const attempt = (deadOwner: string | null) =>
      this.#query(what, {
        text: this.#sql.acquire,
        values: [conversationId, owner, Math.ceil(leaseMs), deadOwner],
      });
    let row = (await attempt(null)).rows[0];
    if (row === undefined) return { status: 'not_found' };
    if (row.status === 'ended') return { status: 'ended', checkpoint: checkpointOf(asRow(row)) };
    if (row.new_epoch === null && typeof row.owner === 'string' && !isLeaseOwnerAlive(row.owner)) {
      // Its holder's process is gone (this host): take it now rather than at expiry.
      row = (await attempt(row.owner)).rows[0];
      if (row === undefined) return { status: 'not_found' };
      if (row.status === 'ended') return { status: 'ended', checkpoint: checkpointOf(asRow(row)) };
    }
    if (row.new_epoch === null) {
      return {
        status: 'held',
        owner: String(row.owner),
        leaseExpiresAt: Number(row.lease_expires_at),
      };
    }
    const previous = row.owner as string | null;
    return {
      status: 'acquired',
      checkpoint: checkpointOf(asRow(row)),
      lease: { owner, epoch: Number(row.new_epoch), expiresAt: Number(row.new_expires_at) },
      takenOver: previous !== null && previous !== owner,
    };
  }

  commit(
    checkpoint: spi.Checkpoint,
    lease: spi.Lease,
    leaseMs: number,
  ): Promise<spi.CommitOutcome> {
    try {
      this.#checkSize(checkpoint, 'commit');
      if (this.#closed) {
        throw this.#closedError(`commit of conversation "${checkpoint.conversationId}"`);
      }
    } catch (error) {
      return Promise.reject(error);
    }
    if (!this.#groupCommit) return this.#commitOne(checkpoint, lease, leaseMs);
    return queued<spi.CommitOutcome, QueuedCommit>(this.#commits, { checkpoint, lease, leaseMs });
  }

  /** Sends what is pending: one statement per group, at most one commit per conversation each. */
  #flush(pending: QueuedCommit[]): void {
    while (pending.length > 0) {
      const group: QueuedCommit[] = [];
      const waiting: QueuedCommit[] = [];
      const rest: QueuedCommit[] = [];
      const ids = new Set<string>();
      for (const p of pending) {
        if (ids.has(p.checkpoint.conversationId)) waiting.push(p);
        else if (group.length < MAX_GROUP) {
          ids.add(p.checkpoint.conversationId);
          group.push(p);
        } else rest.push(p);
      }
      pending = rest;
      const sent = this.#send(group);
      // A conversation's later commit goes after its earlier one has been answered.
      if (waiting.length > 0) void sent.then(() => this.#commits.push(...waiting));
    }
  }

  /** One group: resolves (never rejects) once each of its commits has its answer or error. */
  #send(group: readonly QueuedCommit[]): Promise<void> {
    const only = group.length === 1 ? group[0] : undefined;
    const work =
      only === undefined
        ? this.#commitMany(group)
        : this.#commitOne(only.checkpoint, only.lease, only.leaseMs).then(only.resolve);
    return work.catch((error: Error) => {
      if (only !== undefined) return only.reject(error);
      // Each caller's error names its own conversation.
      for (const p of group) {
        const id = p.checkpoint.conversationId;
        p.reject(
          this.#error(
            `commit of conversation "${id}" (in a group commit of ${group.length})`,
            error.cause ?? error,
          ),
        );
      }
    });
  }

  async #commitOne(
    checkpoint: spi.Checkpoint,
    lease: spi.Lease,
    leaseMs: number,
  ): Promise<spi.CommitOutcome> {
    const { rows } = await this.#query(`commit of conversation "${checkpoint.conversationId}"`, {
      text: this.#sql.commitOne,
      values: commitValues(checkpoint, lease, leaseMs),
    });
    return commitOutcome(rows[0] ?? {}, lease, checkpoint);
  }

  async #commitMany(group: readonly QueuedCommit[]): Promise<void> {
    const columns: unknown[][] = Array.from({ length: 10 }, () => []);
    for (const p of group) {
      const values = commitValues(p.checkpoint, p.lease, p.leaseMs);
      for (let i = 0; i < 10; i++) columns[i]?.push(values[i]);
    }
    let rows: Record<string, unknown>[] = [];
    for (let attempt = 1; ; attempt++) {
      try {
        rows = (
          await this.#query(`group commit of ${group.length} conversations`, {
            text: this.#sql.commitMany,
            values: columns,
          })
        ).rows;
        break;
      } catch (error) {
        if (attempt >= 3 || !RETRYABLE.has(errorCode((error as Error).cause) ?? '')) throw error;
      }
    }
    const byId = new Map(rows.map((r) => [r.conversation_id as string, r]));
    for (const p of group) {
      p.resolve(commitOutcome(byId.get(p.checkpoint.conversationId) ?? {}, p.lease, p.checkpoint));
    }
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
    // Commits already accepted are sent and answered before the pool closes.
    this.#commits.flush();
    this.#closed = true;
    await this.#inFlight.drain();
    if (this.#ownPool !== undefined) await this.#ownPool.end();
  }

  #checkSize(checkpoint: spi.Checkpoint, operation: string): void {
    const bytes = oversizeBytes(checkpoint, this.maxCheckpointBytes);
    if (bytes === undefined) return;
    throw this.#error(
      `${operation} of conversation "${checkpoint.conversationId}"`,
      new Error(oversizeReason(bytes, this.maxCheckpointBytes)),
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

function commitValues(checkpoint: spi.Checkpoint, lease: spi.Lease, leaseMs: number): unknown[] {
  return [
    checkpoint.conversationId,
    ...checkpointColumns(checkpoint),
    lease.owner,
    lease.epoch,
    Math.ceil(leaseMs),
  ];
}

function commitOutcome(
  row: Record<string, unknown>,
  lease: spi.Lease,
  checkpoint: spi.Checkpoint,
): spi.CommitOutcome {
  if (row.committed_at !== null && row.committed_at !== undefined) {
    const running = checkpoint.status === 'running';
    return {
      ok: true,
      lease: {
        owner: lease.owner,
        epoch: lease.epoch,
        expiresAt: Number(running ? row.lease_expires_at : row.committed_at),
      },
    };
  }
  if (row.stored_seq === null || row.stored_seq === undefined)
    return { ok: false, reason: 'not_found' };
  const storedSeq = Number(row.stored_seq);
  const fenced = row.stored_owner !== lease.owner || Number(row.stored_epoch) !== lease.epoch;
  return { ok: false, reason: fenced ? 'fenced' : 'sequence', storedSeq };
}

/** A row as `pg` answers it (the statements select the shared columns). */
function asRow(row: Record<string, unknown>): ConversationRow {
  return row as unknown as ConversationRow;
}

function toStored(row: Record<string, unknown>): spi.StoredConversation {
  const holder = liveHolder(
    row.owner as string | null,
    row.lease_expires_at as string | null,
    Number(row.now_ms),
  );
  return storedOf(asRow(row), holder, endingOf(row.status as string, row.result as string | null));
}

/** A client error's `code`: PostgreSQL's SQLSTATE (`40P01`: a deadlock) or Node's (`ECONNREFUSED`). */
function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** What failed, in words: timeouts and refusals named, PostgreSQL's own code kept. */
function describeFailure(cause: unknown, timeoutMs: number): string {
  if (!(cause instanceof Error)) return String(cause);
  const e = cause as Error & { code?: string };
  // pg's own timeouts carry no code: only their messages tell them.
  if (e.message === 'Query read timeout')
    return `no answer within queryTimeoutMs (${timeoutMs} ms)`;
  if (/timeout exceeded when trying to connect|connection timeout/i.test(e.message)) {
    return `could not connect within connectTimeoutMs (${e.message})`;
  }
  if (isNewerSchemaError(e)) return e.message;
  const code = errorCode(e);
  return `${e.message}${code === undefined ? '' : ` (${code})`}`;
}

function describePool(pool: PostgresPool): string {
  const o = (pool as { options?: { host?: unknown; port?: unknown; database?: unknown } }).options;
  if (o !== undefined && typeof o.host === 'string') {
    return `pool to ${o.host}:${String(o.port ?? 5432)}/${String(o.database ?? '')}`;
  }
  return 'given pool';
}
