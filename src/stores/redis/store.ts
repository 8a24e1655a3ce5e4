/**
 * The Redis conversation store (`conversation-orchestrator/redis`), on `ioredis`. One hash per
 * conversation plus sorted sets for list, stats and retention; every change one Lua script
 * (scripts.ts) whose first lines are the fence. What it promises with and without AOF: see
 * docs/stores.md.
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type * as spi from '../../core/spi/store.ts';
import { oversizeBytes } from '../shared/checkpoint-size.ts';
import { acquireFromDeadHolder } from '../shared/dead-holder.ts';
import { InFlight } from '../shared/in-flight.ts';
import { checkRetention, clientFormsError, withoutPassword } from '../shared/options.ts';
import { loadPeer } from '../shared/peer.ts';
import { PURGE_BATCH, purgeEvery, purgeInBatches } from '../shared/purge.ts';
import { STORE_CODES, StoreError } from '../shared/store-error.ts';
import { timedCall } from '../shared/timed-call.ts';
import {
  CLIENT_FORMS,
  checkInteger,
  checkPrefix,
  DEFAULTS,
  KEY_SEPARATOR,
  type RedisStoreOptions,
} from './options.ts';
import {
  byteLength,
  checkpointArgs,
  commitOutcome,
  entriesOf,
  type Reply,
  replyCode,
  toCheckpoint,
  toStored,
} from './replies.ts';
import {
  ACQUIRE,
  APPEND,
  COMMIT,
  CREATE,
  DELETE,
  GET,
  PURGE,
  RELEASE,
  RENEW,
  SNAPSHOT,
} from './scripts.ts';

/** A Redis {@link spi.IncrementalStore} (entries and snapshots). */
export interface RedisStore extends spi.IncrementalStore {
  readonly name: 'redis';
  /** The key prefix in use. */
  readonly prefix: string;
}

interface Script {
  readonly source: string;
  readonly sha: string;
}

function script(source: string): Script {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

const SCRIPTS = {
  create: script(CREATE),
  acquire: script(ACQUIRE),
  commit: script(COMMIT),
  append: script(APPEND),
  snapshot: script(SNAPSHOT),
  renew: script(RENEW),
  release: script(RELEASE),
  get: script(GET),
  delete: script(DELETE),
  purge: script(PURGE),
};

/** Ids read per round trip while `list()` filters a page. */
const LIST_CHUNK = 200;

/**
 * Creates a Redis store. With `{ url }` the store makes its own `ioredis` client (lazy connect,
 * bounded connect and command timeouts, one retry per call) and closes it in `close()`; with
 * `{ client }` it uses yours and leaves it open.
 */
export function createRedisStore(options: RedisStoreOptions): RedisStore {
  return new RedisStoreImpl(options);
}

class RedisStoreImpl implements RedisStore {
  readonly name = 'redis' as const;
  readonly prefix: string;
  /**
   * What every key starts with: the prefix and `|`, which no prefix contains, so two stores whose
   * prefixes nest (`co:` and `co:c:`) can never write the same key.
   */
  readonly #base: string;
  readonly maxCheckpointBytes: number;
  readonly maxSnapshotBytes: number;
  readonly #client: Redis;
  readonly #own: boolean;
  readonly #label: string;
  readonly #retentionMs: number;
  readonly #timeoutMs: number;
  readonly #purgeTimer: NodeJS.Timeout | undefined;
  #closed = false;
  #lastConnectionError: Error | undefined;
  readonly #inFlight = new InFlight();
  /** Whether the client was ready once: not ready since, its connection is lost. */
  #seenReady = false;
  /**
   * When a `stats()` read went unanswered on a connection still up (a hung Redis): Redis owes its
   * reply, and ioredis keeps the command queued until it comes, so `stats()` sends no more behind
   * it until Redis answers (a call sent after it answered, or the client owes nothing).
   */
  #unansweredSince: number | undefined;

  constructor(options: RedisStoreOptions) {
    if (typeof options !== 'object' || options === null) {
      throw clientFormsError('createRedisStore', CLIENT_FORMS, options);
    }
    this.prefix = checkPrefix(options.prefix ?? DEFAULTS.prefix);
    this.#base = `${this.prefix}${KEY_SEPARATOR}`;
    const retention = checkRetention('createRedisStore', options, DEFAULTS);
    this.#retentionMs = retention.retentionMs;
    this.maxCheckpointBytes = retention.maxCheckpointBytes;
    // Redis refuses a bulk string past proto-max-bulk-len (512 MB by default).
    this.maxSnapshotBytes = Math.min(
      checkInteger('maxSnapshotBytes', options.maxSnapshotBytes ?? DEFAULTS.maxSnapshotBytes, 1),
      512 * 1024 * 1024,
    );
    this.#timeoutMs = checkInteger(
      'commandTimeoutMs',
      options.commandTimeoutMs ?? DEFAULTS.commandTimeoutMs,
      1,
    );
    if ('client' in options && options.client !== undefined) {
      if (typeof options.client?.evalsha !== 'function') {
        throw new TypeError(
          `Expected \`client\` to be an ioredis client, got \`${String(options.client)}\` (createRedisStore)`,
        );
      }
      this.#client = options.client;
      this.#own = false;
      const o = options.client.options;
      this.#label = `redis://${o.host ?? '127.0.0.1'}:${o.port ?? 6379}/${o.db ?? 0}`;
    } else if ('url' in options && typeof options.url === 'string') {
      const connectTimeout = checkInteger(
        'connectTimeoutMs',
        options.connectTimeoutMs ?? DEFAULTS.connectTimeoutMs,
        1,
      );
      this.#label = withoutPassword(options.url, 'url').replace(/\/$/, '');
      const { Redis: Client } = loadPeer<typeof import('ioredis')>({
        name: 'ioredis',
        range: '^5.3.0',
        neededBy: 'createRedisStore({ url })',
      });
      this.#client = new Client(options.url, {
        lazyConnect: true,
        connectTimeout,
        commandTimeout: this.#timeoutMs,
        // A call fails after one reconnection attempt instead of waiting for Redis to come back.
        maxRetriesPerRequest: 1,
        retryStrategy: (times) => Math.min(times * 100, 1_000),
        connectionName: 'conversation-orchestrator',
      });
      this.#own = true;
      // Without a listener ioredis prints each connection error; the calls report them instead.
      this.#client.on('error', (error: Error) => {
        this.#lastConnectionError = error;
      });
      this.#client.on('ready', () => {
        this.#lastConnectionError = undefined;
        this.#seenReady = true;
      });
    } else {
      throw clientFormsError('createRedisStore', CLIENT_FORMS, options);
    }
    this.#purgeTimer = purgeEvery(retention.purgeIntervalMs, () => this.purgeExpired());
  }

  #key(conversationId: string): string {
    return `${this.#base}c:${conversationId}`;
  }

  async create(
    checkpoint: spi.Checkpoint,
    owner: string,
    leaseMs: number,
  ): Promise<spi.CreateOutcome> {
    const what = `create of conversation "${checkpoint.conversationId}"`;
    this.#checkSize(checkpoint, what);
    const reply = await this.#run(what, SCRIPTS.create, checkpoint.conversationId, [
      checkpoint.orchestrator,
      ...checkpointArgs(checkpoint),
      owner,
      String(Math.ceil(leaseMs)),
    ]);
    if (reply === null) return { created: false };
    return { created: true, lease: { owner, epoch: 1, expiresAt: Number(reply) } };
  }

  async acquire(
    conversationId: string,
    owner: string,
    leaseMs: number,
  ): Promise<spi.AcquireOutcome> {
    const what = `acquire of conversation "${conversationId}"`;
    const reply = await acquireFromDeadHolder(
      async (deadOwner) =>
        (await this.#run(
          what,
          SCRIPTS.acquire,
          conversationId,
          [owner, String(Math.ceil(leaseMs)), deadOwner ?? ''],
          true,
        )) as Reply[],
      (r) => (r[0] === 'held' ? (r[1] as string) : undefined),
    );
    switch (reply[0]) {
      case 'not_found':
        return { status: 'not_found' };
      case 'ended':
        return { status: 'ended', checkpoint: toCheckpoint(conversationId, reply.slice(1)) };
      case 'held':
        return { status: 'held', owner: reply[1] as string, leaseExpiresAt: Number(reply[2]) };
      default: {
        const previous = reply[1] as string | null;
        const checkpoint = toCheckpoint(conversationId, reply.slice(4));
        const entries = entriesOf(what, checkpoint.seq, reply[11] ?? null, reply[12] ?? null);
        if (typeof entries === 'string') throw this.#error(what, new Error(entries));
        return {
          status: 'acquired',
          checkpoint,
          ...(entries === undefined ? {} : { entries }),
          lease: { owner, epoch: Number(reply[2]), expiresAt: Number(reply[3]) },
          takenOver: previous !== null && previous !== owner,
        };
      }
    }
  }

  async commit(
    checkpoint: spi.Checkpoint,
    lease: spi.Lease,
    leaseMs: number,
  ): Promise<spi.CommitOutcome> {
    const what = `commit of conversation "${checkpoint.conversationId}"`;
    this.#checkSize(checkpoint, what);
    const reply = (await this.#run(
      what,
      SCRIPTS.commit,
      checkpoint.conversationId,
      [...checkpointArgs(checkpoint), lease.owner, String(lease.epoch), String(Math.ceil(leaseMs))],
      true,
    )) as Reply[];
    return commitOutcome(reply, lease);
  }

  async append(
    entry: spi.CheckpointEntry,
    lease: spi.Lease,
    leaseMs: number,
  ): Promise<spi.CommitOutcome> {
    const what = `append of conversation "${entry.conversationId}" (seq ${entry.seq})`;
    const bytes = entry.entry.length * 3 <= this.maxCheckpointBytes ? 0 : byteLength(entry.entry);
    if (bytes > this.maxCheckpointBytes) {
      throw this.#error(
        what,
        new Error(
          `its entry is ${bytes.toLocaleString('en')} bytes (UTF-8), past maxCheckpointBytes ${this.maxCheckpointBytes.toLocaleString('en')}`,
        ),
        STORE_CODES.tooLarge,
      );
    }
    const reply = (await this.#run(
      what,
      SCRIPTS.append,
      entry.conversationId,
      [
        String(entry.seq),
        String(entry.dispatchCount),
        entry.entry,
        lease.owner,
        String(lease.epoch),
        String(Math.ceil(leaseMs)),
      ],
      true,
    )) as Reply[];
    return commitOutcome(reply, lease);
  }

  async snapshot(checkpoint: spi.Checkpoint, lease: spi.Lease): Promise<spi.SnapshotOutcome> {
    const what = `snapshot of conversation "${checkpoint.conversationId}" (seq ${checkpoint.seq})`;
    this.#checkSize(checkpoint, what);
    const reply = (await this.#run(
      what,
      SCRIPTS.snapshot,
      checkpoint.conversationId,
      [String(checkpoint.seq), checkpoint.state, lease.owner, String(lease.epoch)],
      true,
    )) as Reply[];
    if (reply[0] === 'ok') return { ok: true, compacted: Number(reply[1]) };
    return { ok: false, reason: reply[0] as 'fenced' | 'stale' | 'not_found' };
  }

  async renew(
    conversationId: string,
    lease: spi.Lease,
    leaseMs: number,
  ): Promise<spi.Lease | undefined> {
    const reply = await this.#run(
      `renew of conversation "${conversationId}"`,
      SCRIPTS.renew,
      conversationId,
      [lease.owner, String(lease.epoch), String(Math.ceil(leaseMs))],
    );
    if (reply === null) return undefined;
    return { owner: lease.owner, epoch: lease.epoch, expiresAt: Number(reply) };
  }

  async release(conversationId: string, lease: spi.Lease): Promise<void> {
    await this.#run(
      `release of conversation "${conversationId}"`,
      SCRIPTS.release,
      conversationId,
      [lease.owner, String(lease.epoch)],
    );
  }

  async get(conversationId: string): Promise<spi.StoredConversation | undefined> {
    const reply = (await this.#run(
      `get of conversation "${conversationId}"`,
      SCRIPTS.get,
      conversationId,
      [],
    )) as Reply[];
    return toStored(conversationId, Number(reply[0]), reply.slice(1));
  }

  async delete(conversationId: string): Promise<boolean> {
    const reply = await this.#run(
      `delete of conversation "${conversationId}"`,
      SCRIPTS.delete,
      conversationId,
      [],
    );
    return reply === 1;
  }

  async list(query: spi.ListQuery): Promise<readonly spi.StoredConversation[]> {
    const limit = Math.min(checkInteger('limit', query.limit, 0), 1_000);
    if (limit === 0) return [];
    const p = this.#base;
    const index =
      query.orchestrator !== undefined && query.status !== undefined
        ? `${p}os:${query.orchestrator}:${query.status}`
        : query.orchestrator !== undefined
          ? `${p}o:${query.orchestrator}`
          : query.status !== undefined
            ? `${p}s:${query.status}`
            : `${p}ids`;
    return this.#bounded('list', async () => {
      const found: spi.StoredConversation[] = [];
      let after = query.after;
      for (;;) {
        const ids = await this.#client.zrangebylex(
          index,
          after === undefined ? '-' : `(${after}`,
          '+',
          'LIMIT',
          0,
          query.unleased === true ? LIST_CHUNK : limit - found.length,
        );
        if (ids.length === 0) return found;
        const pipeline = this.#client.pipeline();
        pipeline.time();
        for (const id of ids) {
          pipeline.hmget(
            this.#key(id),
            'orchestrator',
            'status',
            'seq',
            'dispatchCount',
            'result',
            'suspendedAt',
            'owner',
            'leaseExpiresAt',
            'updatedAt',
          );
        }
        const replies = (await pipeline.exec()) ?? [];
        const [timeError, time] = replies[0] ?? [];
        if (timeError) throw timeError;
        const now =
          Number((time as string[])[0]) * 1000 + Math.floor(Number((time as string[])[1]) / 1000);
        for (let i = 0; i < ids.length; i++) {
          const [error, fields] = replies[i + 1] ?? [];
          if (error) throw error;
          const stored = toStored(ids[i] as string, now, fields as Reply[]);
          if (stored === undefined) continue; // deleted since the index was read
          if (query.unleased === true && stored.owner !== undefined) continue;
          found.push(stored);
          if (found.length === limit) return found;
        }
        after = ids.at(-1);
      }
    });
  }

  /**
   * Read at scrape time (`createStoreMetrics`), so it never queues: while the connection is lost
   * (ioredis would hold the read in its offline queue until Redis is back) or an earlier `stats()`
   * is still unanswered, it rejects at once, saying which.
   */
  async stats(): Promise<readonly spi.StoreStats[]> {
    const held = this.#closed ? undefined : this.#heldBack();
    if (held !== undefined) throw this.#error('stats', new Error(held));
    try {
      return await this.#stats();
    } catch (error) {
      const cause = error instanceof Error ? error.cause : undefined;
      if (
        cause instanceof Error &&
        /^(Command timed out|no answer within)/.test(cause.message) &&
        this.#client.status === 'ready'
      ) {
        this.#unansweredSince ??= performance.now();
      }
      throw error;
    }
  }

  /** Why `stats()` sends nothing now (the connection lost, a read unanswered), or undefined. */
  #heldBack(): string | undefined {
    const status = this.#client.status;
    if (status === 'ready') {
      this.#seenReady = true;
    } else if (this.#seenReady) {
      const last = this.#lastConnectionError;
      return `Redis is unreachable (${last !== undefined ? `${last.message}; ` : ''}connection ${status}): the read is not queued until it is back`;
    }
    if (this.#unansweredSince === undefined) return undefined;
    // The commands sent and not answered yet; none: Redis answered all (or they were dropped with
    // their connection).
    const owed = (this.#client as { commandQueue?: { length: number } }).commandQueue?.length ?? 0;
    if (owed === 0) {
      this.#unansweredSince = undefined;
      return undefined;
    }
    const ms = Math.round(performance.now() - this.#unansweredSince);
    return `Redis has not answered a read for ${ms} ms (past commandTimeoutMs, ${this.#timeoutMs} ms; ${owed} commands unanswered): no read is sent behind it`;
  }

  #stats(): Promise<readonly spi.StoreStats[]> {
    const p = this.#base;
    return this.#bounded('stats', async () => {
      const names = (await this.#client.smembers(`${p}orchestrators`)).sort();
      const pipeline = this.#client.pipeline();
      for (const name of names) {
        pipeline.zcard(`${p}os:${name}:running`);
        pipeline.zcard(`${p}os:${name}:suspended`);
        pipeline.zrange(`${p}suspendedAt:${name}`, 0, 0, 'WITHSCORES');
      }
      const replies = (await pipeline.exec()) ?? [];
      const stats: spi.StoreStats[] = [];
      names.forEach((orchestrator, i) => {
        const [running, suspended, oldest] = replies
          .slice(3 * i, 3 * i + 3)
          .map(([error, value]) => {
            if (error) throw error;
            return value;
          });
        if (running === 0 && suspended === 0) return;
        const score = (oldest as string[])[1];
        stats.push({
          orchestrator,
          running: Number(running),
          suspended: Number(suspended),
          ...(score === undefined ? {} : { oldestSuspendedAt: Number(score) }),
        });
      });
      return stats;
    });
  }

  async purgeExpired(): Promise<number> {
    return purgeInBatches(async () =>
      Number(
        await this.#run('purgeExpired', SCRIPTS.purge, undefined, [
          String(this.#retentionMs),
          String(PURGE_BATCH),
        ]),
      ),
    );
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#purgeTimer !== undefined) clearInterval(this.#purgeTimer);
    await this.#inFlight.drain();
    if (this.#own) {
      try {
        await this.#client.quit();
      } catch {
        this.#client.disconnect();
      }
    }
  }

  /** A whole checkpoint (create, commit, snapshot) is bounded by maxSnapshotBytes. */
  #checkSize(checkpoint: spi.Checkpoint, what: string): void {
    const bytes = oversizeBytes(checkpoint, this.maxSnapshotBytes);
    if (bytes === undefined) return;
    throw this.#error(
      what,
      new Error(
        `its checkpoint is ${bytes.toLocaleString('en')} bytes (state + result, UTF-8), past maxSnapshotBytes ${this.maxSnapshotBytes.toLocaleString('en')}`,
      ),
      STORE_CODES.tooLarge,
    );
  }

  /** Runs a script (EVALSHA, EVAL once when Redis has not seen it: a restart empties its cache). */
  #run(
    what: string,
    s: Script,
    conversationId: string | undefined,
    args: readonly string[],
    withEntries = false,
  ): Promise<Reply> {
    // The entries' key shares the prefix (and its hash tag, on Redis Cluster) with the hash.
    const keys =
      conversationId === undefined
        ? []
        : withEntries
          ? [this.#key(conversationId), `${this.#base}e:${conversationId}`]
          : [this.#key(conversationId)];
    const argv = [this.#base, ...(conversationId === undefined ? [] : [conversationId]), ...args];
    return this.#bounded(what, async () => {
      try {
        return (await this.#client.evalsha(s.sha, keys.length, ...keys, ...argv)) as Reply;
      } catch (error) {
        if (replyCode(error) !== 'NOSCRIPT') throw error;
        return (await this.#client.eval(s.source, keys.length, ...keys, ...argv)) as Reply;
      }
    });
  }

  /**
   * Runs `work`, rejecting with the store's error when it fails or outlasts commandTimeoutMs (the
   * own client's commandTimeout; a timer here for a client given without one).
   */
  #bounded<T>(what: string, work: () => Promise<T>): Promise<T> {
    if (this.#closed) {
      return Promise.reject(
        this.#error(what, new Error('the store is closed'), STORE_CODES.closed),
      );
    }
    // close() waits for the work itself, also past a timeout. The store's own client bounds
    // every command itself (commandTimeout): no timer per call.
    const started = performance.now();
    const call = this.#inFlight.track(
      work().then((value) => {
        // Answered, so connected; and Redis answers in order: what was sent before was answered.
        this.#seenReady = true;
        const since = this.#unansweredSince;
        if (since !== undefined && started > since) this.#unansweredSince = undefined;
        return value;
      }),
    );
    return timedCall(
      () => call,
      this.#own ? undefined : this.#timeoutMs,
      (cause) => this.#error(what, cause),
    );
  }

  #error(what: string, cause: unknown, code: string = STORE_CODES.failed): StoreError {
    let reason = cause instanceof Error ? cause.message : String(cause);
    if (/max retries per request|Connection is closed|Command timed out/i.test(reason)) {
      const last = this.#lastConnectionError;
      reason =
        reason === 'Command timed out'
          ? `no answer within commandTimeoutMs (${this.#timeoutMs} ms)`
          : `Redis is unreachable (${last !== undefined ? `${last.message}; ` : ''}${reason})`;
    }
    return new StoreError(`Redis store (${this.#label}): ${what} failed: ${reason}`, code, cause);
  }
}
