/**
 * The memory store: a `ConversationStore` in this process's memory, for tests and for apps that
 * only want suspend/resume within one process (nothing survives the process). Fenced exactly as
 * store.ts says; every method answers on a later microtask, as a real store would.
 */

import { isLeaseOwnerAlive } from '../../core/durable/lease-owner.ts';
import { fail, positiveInteger, positiveNumber } from '../../core/shared/validate.ts';
import { describeValue } from '../../core/spi/errors.ts';
import type * as spi from '../../core/spi/store.ts';
import { checkpointBytes } from '../shared/checkpoint-size.ts';

/** What `createMemoryStore(options)` takes. */
export interface MemoryStoreOptions {
  /**
   * How long an ended conversation is kept (its result readable with `get()` and `resume()`)
   * before `purgeExpired()` deletes it. The store purges on its own at most once a minute, when a
   * conversation is created.
   * @default 604800000 (7 days)
   */
  readonly retentionMs?: number | undefined;
  /**
   * The largest checkpoint (`state` + `result`, UTF-8 bytes) it accepts.
   * @default 16777216 (16 MiB)
   */
  readonly maxCheckpointBytes?: number | undefined;
  /**
   * The largest snapshot or whole checkpoint it accepts (an entry is bounded by
   * `maxCheckpointBytes`).
   * @default 268435456 (256 MiB)
   */
  readonly maxSnapshotBytes?: number | undefined;
  /**
   * The store's clock (epoch milliseconds), for tests of lease expiry and retention.
   * @default Date.now
   */
  readonly now?: () => number;
}

interface Row {
  /** The base (whole checkpoint or snapshot), with the latest seq, status and dispatch count. */
  checkpoint: spi.Checkpoint;
  /** The entries after the base, in order (their texts), and their bytes. */
  entries: string[];
  entryBytes: number;
  updatedAt: number;
  /** The lease holder; undefined once released (or never held). */
  owner: string | undefined;
  epoch: number;
  expiresAt: number;
  /** Bytes of the base's state + result, for stats in tests. */
  bytes: number;
}

/** The memory store with its byte count, which the tests of bounded storage read. */
export interface MemoryStore extends spi.IncrementalStore {
  /** UTF-8 bytes of every stored checkpoint's `state` and `result`, and entry, together. */
  storedBytes(): number;
}

const PURGE_EVERY_MS = 60_000;

/**
 * A `ConversationStore` in memory (one process). Conversations, leases and fencing behave as in
 * the database stores, so tests of durable conversations run on it unchanged.
 * @example new ConversationOrchestrator({ ..., store: createMemoryStore() })
 */
export function createMemoryStore(options: MemoryStoreOptions = {}): MemoryStore {
  if (typeof options !== 'object' || options === null)
    fail('createMemoryStore(options)', 'an object', options);
  const retentionMs = positiveNumber(
    'createMemoryStore({ retentionMs })',
    options.retentionMs ?? 604_800_000,
  );
  const maxCheckpointBytes = positiveInteger(
    'createMemoryStore({ maxCheckpointBytes })',
    options.maxCheckpointBytes ?? 16 * 1024 * 1024,
  );
  const maxSnapshotBytes = positiveInteger(
    'createMemoryStore({ maxSnapshotBytes })',
    options.maxSnapshotBytes ?? 256 * 1024 * 1024,
  );
  const now = options.now ?? Date.now;
  if (typeof now !== 'function') fail('createMemoryStore({ now })', 'a function', now);
  const rows = new Map<string, Row>();
  let closed = false;
  let lastPurge = now();

  const open = (): void => {
    if (closed) throw new Error('The memory store is closed');
  };
  const checkSize = (checkpoint: spi.Checkpoint): number => {
    const bytes = checkpointBytes(checkpoint);
    if (bytes > maxSnapshotBytes) {
      throw new RangeError(
        `Expected a checkpoint of at most ${maxSnapshotBytes} bytes (the memory store's maxSnapshotBytes), got ${bytes} bytes for conversation ${checkpoint.conversationId}`,
      );
    }
    return bytes;
  };
  const checkEntrySize = (entry: spi.CheckpointEntry): number => {
    const bytes = Buffer.byteLength(entry.entry);
    if (bytes > maxCheckpointBytes) {
      throw new RangeError(
        `Expected an entry of at most ${maxCheckpointBytes} bytes (the memory store's maxCheckpointBytes), got ${bytes} bytes for conversation ${entry.conversationId}`,
      );
    }
    return bytes;
  };
  const leaseOf = (row: Row): spi.Lease => ({
    owner: row.owner as string,
    epoch: row.epoch,
    expiresAt: row.expiresAt,
  });
  /**
   * The row a commit or an append at `seq` under `lease` writes, or why it is refused (the same
   * compare-and-set for both); throws when the store is closed.
   */
  const writable = (
    conversationId: string,
    lease: spi.Lease,
    seq: number,
  ): Row | Extract<spi.CommitOutcome, { ok: false }> => {
    open();
    const row = rows.get(conversationId);
    if (row === undefined) return { ok: false, reason: 'not_found' };
    if (row.owner !== lease.owner || row.epoch !== lease.epoch) {
      return { ok: false, reason: 'fenced', storedSeq: row.checkpoint.seq };
    }
    if (seq !== row.checkpoint.seq + 1) {
      return { ok: false, reason: 'sequence', storedSeq: row.checkpoint.seq };
    }
    return row;
  };
  /** A live lease: held, not expired, and its holder not known to be gone. */
  const live = (row: Row, at: number): boolean =>
    row.owner !== undefined && row.expiresAt > at && isLeaseOwnerAlive(row.owner);
  const describe = (id: string, row: Row, at: number): spi.StoredConversation => {
    const c = row.checkpoint;
    const held = row.owner !== undefined && row.expiresAt > at;
    return {
      conversationId: id,
      orchestrator: c.orchestrator,
      status: c.status,
      dispatchCount: c.dispatchCount,
      seq: c.seq,
      updatedAt: row.updatedAt,
      ...(c.suspendedAt === undefined ? {} : { suspendedAt: c.suspendedAt }),
      ...(held ? { owner: row.owner, leaseExpiresAt: row.expiresAt } : {}),
      ...(c.result === undefined ? {} : { result: JSON.parse(c.result) as unknown }),
    };
  };
  const purge = (at: number): number => {
    let purged = 0;
    for (const [id, row] of rows) {
      if (row.checkpoint.status === 'ended' && row.updatedAt + retentionMs <= at) {
        rows.delete(id);
        purged++;
      }
    }
    lastPurge = at;
    return purged;
  };

  const store: MemoryStore = {
    name: 'memory',
    maxCheckpointBytes,
    maxSnapshotBytes,
    async create(checkpoint, owner, leaseMs) {
      open();
      const at = now();
      if (at - lastPurge >= PURGE_EVERY_MS) purge(at);
      const bytes = checkSize(checkpoint);
      if (rows.has(checkpoint.conversationId)) return { created: false };
      const row: Row = {
        checkpoint,
        entries: [],
        entryBytes: 0,
        updatedAt: at,
        owner: checkpoint.status === 'running' ? owner : undefined,
        epoch: 1,
        expiresAt: at + leaseMs,
        bytes,
      };
      rows.set(checkpoint.conversationId, row);
      return { created: true, lease: { owner, epoch: 1, expiresAt: row.expiresAt } };
    },
    async acquire(conversationId, owner, leaseMs): Promise<spi.AcquireOutcome> {
      open();
      const row = rows.get(conversationId);
      if (row === undefined) return { status: 'not_found' };
      if (row.checkpoint.status === 'ended') return { status: 'ended', checkpoint: row.checkpoint };
      const at = now();
      if (row.owner !== undefined && row.owner !== owner && live(row, at)) {
        return { status: 'held', owner: row.owner, leaseExpiresAt: row.expiresAt };
      }
      const takenOver = row.owner !== undefined && row.owner !== owner;
      row.owner = owner;
      row.epoch++;
      row.expiresAt = at + leaseMs;
      return {
        status: 'acquired',
        checkpoint: row.checkpoint,
        entries: [...row.entries],
        lease: leaseOf(row),
        takenOver,
      };
    },
    async commit(checkpoint, lease, leaseMs): Promise<spi.CommitOutcome> {
      const row = writable(checkpoint.conversationId, lease, checkpoint.seq);
      if (!('checkpoint' in row)) return row;
      const bytes = checkSize(checkpoint);
      const at = now();
      row.checkpoint = checkpoint;
      if (row.entries.length > 0) {
        row.entries = [];
        row.entryBytes = 0;
      }
      row.updatedAt = at;
      row.bytes = bytes;
      if (checkpoint.status === 'running') {
        row.expiresAt = at + leaseMs;
        return { ok: true, lease: leaseOf(row) };
      }
      const released: spi.Lease = { owner: lease.owner, epoch: row.epoch, expiresAt: at };
      row.owner = undefined;
      row.expiresAt = 0;
      return { ok: true, lease: released };
    },
    async append(entry, lease, leaseMs): Promise<spi.CommitOutcome> {
      const row = writable(entry.conversationId, lease, entry.seq);
      if (!('checkpoint' in row)) return row;
      const bytes = checkEntrySize(entry);
      const at = now();
      const { result: _result, suspendedAt: _suspendedAt, ...base } = row.checkpoint;
      row.checkpoint = {
        ...base,
        status: 'running',
        seq: entry.seq,
        dispatchCount: entry.dispatchCount,
      };
      row.entries.push(entry.entry);
      row.entryBytes += bytes;
      row.updatedAt = at;
      row.expiresAt = at + leaseMs;
      return { ok: true, lease: leaseOf(row) };
    },
    async snapshot(checkpoint, lease): Promise<spi.SnapshotOutcome> {
      open();
      const row = rows.get(checkpoint.conversationId);
      if (row === undefined) return { ok: false, reason: 'not_found' };
      if (row.owner !== lease.owner || row.epoch !== lease.epoch) {
        return { ok: false, reason: 'fenced' };
      }
      const seq = row.checkpoint.seq;
      const baseSeq = seq - row.entries.length;
      if (
        checkpoint.seq <= baseSeq ||
        checkpoint.seq > seq ||
        row.checkpoint.status !== 'running'
      ) {
        return { ok: false, reason: 'stale' };
      }
      const bytes = checkSize(checkpoint);
      const compacted = checkpoint.seq - baseSeq;
      const dropped = row.entries.splice(0, compacted);
      for (const text of dropped) row.entryBytes -= Buffer.byteLength(text);
      row.checkpoint = { ...row.checkpoint, state: checkpoint.state };
      row.bytes = bytes;
      return { ok: true, compacted };
    },
    async renew(conversationId, lease, leaseMs) {
      open();
      const row = rows.get(conversationId);
      if (row === undefined || row.owner !== lease.owner || row.epoch !== lease.epoch) {
        return undefined;
      }
      row.expiresAt = now() + leaseMs;
      return leaseOf(row);
    },
    async release(conversationId, lease) {
      open();
      const row = rows.get(conversationId);
      if (row === undefined || row.owner !== lease.owner || row.epoch !== lease.epoch) return;
      row.owner = undefined;
      row.expiresAt = 0;
    },
    async get(conversationId) {
      open();
      const row = rows.get(conversationId);
      return row === undefined ? undefined : describe(conversationId, row, now());
    },
    async delete(conversationId) {
      open();
      return rows.delete(conversationId);
    },
    async list(query: spi.ListQuery) {
      open();
      const at = now();
      const requested: unknown = query.limit;
      if (typeof requested !== 'number' || !Number.isSafeInteger(requested) || requested < 0) {
        throw new TypeError(
          `memory store: list() expected \`limit\` to be a non-negative integer, got ${describeValue(requested)}`,
        );
      }
      const limit = Math.min(requested, 1_000);
      const ids = [...rows.keys()].sort();
      const page: spi.StoredConversation[] = [];
      for (const id of ids) {
        if (page.length >= limit) break;
        if (query.after !== undefined && id <= query.after) continue;
        const row = rows.get(id) as Row;
        const c = row.checkpoint;
        if (query.orchestrator !== undefined && c.orchestrator !== query.orchestrator) continue;
        if (query.status !== undefined && c.status !== query.status) continue;
        if (query.unleased === true && live(row, at)) continue;
        page.push(describe(id, row, at));
      }
      return page;
    },
    async stats(): Promise<readonly spi.StoreStats[]> {
      open();
      const by = new Map<string, { running: number; suspended: number; oldest?: number }>();
      for (const row of rows.values()) {
        const c = row.checkpoint;
        if (c.status === 'ended') continue;
        let s = by.get(c.orchestrator);
        if (s === undefined) {
          s = { running: 0, suspended: 0 };
          by.set(c.orchestrator, s);
        }
        if (c.status === 'running') s.running++;
        else {
          s.suspended++;
          const at = c.suspendedAt ?? row.updatedAt;
          if (s.oldest === undefined || at < s.oldest) s.oldest = at;
        }
      }
      return [...by].map(([orchestrator, s]) => ({
        orchestrator,
        running: s.running,
        suspended: s.suspended,
        ...(s.oldest === undefined ? {} : { oldestSuspendedAt: s.oldest }),
      }));
    },
    async purgeExpired() {
      open();
      return purge(now());
    },
    async close() {
      closed = true;
      rows.clear();
    },
    storedBytes() {
      let bytes = 0;
      for (const row of rows.values()) bytes += row.bytes + row.entryBytes;
      return bytes;
    },
  };
  return store;
}
