/**
 * The conformance kit itself: a small correct store (a Map) passes every check, and each defect
 * planted in it fails the checks meant to catch it (the kit can fail). The report's shape and its
 * option errors are checked through the public API.
 */
import { describe, expect, it } from 'vitest';
import type {
  AcquireOutcome,
  Checkpoint,
  CommitOutcome,
  ConversationStore,
  Lease,
  ListQuery,
  StoredConversation,
  StoreStats,
} from '../../src/core/spi/store.ts';
import { createMemoryStore, type MemoryStore } from '../../src/index.ts';
import { conformanceCheckNames, verifyConversationStore } from '../../src/testing/index.ts';

type Defect =
  | 'none'
  | 'ignores-epoch'
  | 'ignores-seq'
  | 'no-size-limit'
  | 'usable-after-close'
  | 'acquire-ignores-lease'
  | 'purge-ignores-retention'
  | 'create-overwrites'
  | 'loses-unicode'
  | 'last-writer-wins'
  | 'refuses-every-commit';

interface Row {
  cp: Checkpoint;
  owner: string | null;
  epoch: number;
  expiresAt: number;
  updatedAt: number;
  endedAt?: number;
}

/** A one-process store on a Map, correct unless `defect` says otherwise. */
class MapStore implements ConversationStore {
  readonly name = 'map';
  readonly maxCheckpointBytes = 64 * 1024;
  #rows = new Map<string, Row>();
  #closed = false;
  constructor(
    readonly defect: Defect,
    readonly retentionMs = 60_000,
  ) {}

  #open(): void {
    if (this.#closed && this.defect !== 'usable-after-close') throw new Error('map store: closed');
  }
  #size(cp: Checkpoint): void {
    const bytes = Buffer.byteLength(cp.state) + Buffer.byteLength(cp.result ?? '');
    if (bytes > this.maxCheckpointBytes && this.defect !== 'no-size-limit') {
      throw new Error(
        `map store: ${cp.conversationId} is ${bytes} bytes, past ${this.maxCheckpointBytes}`,
      );
    }
  }
  #keep(cp: Checkpoint): Checkpoint {
    return this.defect === 'loses-unicode'
      ? { ...cp, state: cp.state.replace(/[\u0080-\uffff]/g, '?') }
      : cp;
  }
  #live(row: Row, now: number): boolean {
    return row.owner !== null && row.expiresAt > now && this.defect !== 'acquire-ignores-lease';
  }

  async create(cp: Checkpoint, owner: string, leaseMs: number) {
    this.#open();
    this.#size(cp);
    if (this.#rows.has(cp.conversationId) && this.defect !== 'create-overwrites') {
      return { created: false as const };
    }
    const now = Date.now();
    const running = cp.status === 'running';
    this.#rows.set(cp.conversationId, {
      cp: this.#keep(cp),
      owner: running ? owner : null,
      epoch: 1,
      expiresAt: now + leaseMs,
      updatedAt: now,
      ...(cp.status === 'ended' ? { endedAt: now } : {}),
    });
    return { created: true as const, lease: { owner, epoch: 1, expiresAt: now + leaseMs } };
  }
  async acquire(id: string, owner: string, leaseMs: number): Promise<AcquireOutcome> {
    this.#open();
    const row = this.#rows.get(id);
    const now = Date.now();
    if (row === undefined) return { status: 'not_found' };
    if (row.cp.status === 'ended') return { status: 'ended', checkpoint: row.cp };
    if (row.owner !== owner && this.#live(row, now)) {
      return { status: 'held', owner: row.owner as string, leaseExpiresAt: row.expiresAt };
    }
    const takenOver = row.owner !== null && row.owner !== owner;
    row.owner = owner;
    row.epoch += 1;
    row.expiresAt = now + leaseMs;
    return {
      status: 'acquired',
      checkpoint: row.cp,
      lease: { owner, epoch: row.epoch, expiresAt: row.expiresAt },
      takenOver,
    };
  }
  async commit(cp: Checkpoint, lease: Lease, leaseMs: number): Promise<CommitOutcome> {
    this.#open();
    this.#size(cp);
    const row = this.#rows.get(cp.conversationId);
    if (row === undefined) return { ok: false, reason: 'not_found' };
    if (this.defect === 'refuses-every-commit') {
      return { ok: false, reason: 'fenced', storedSeq: row.cp.seq };
    }
    const lww = this.defect === 'last-writer-wins';
    const holder = row.owner === lease.owner && row.epoch === lease.epoch;
    if (!holder && this.defect !== 'ignores-epoch' && !lww)
      return { ok: false, reason: 'fenced', storedSeq: row.cp.seq };
    if (cp.seq !== row.cp.seq + 1 && this.defect !== 'ignores-seq' && !lww) {
      return { ok: false, reason: 'sequence', storedSeq: row.cp.seq };
    }
    const now = Date.now();
    row.cp = this.#keep(cp);
    row.updatedAt = now;
    row.owner = cp.status === 'running' ? lease.owner : null;
    row.expiresAt = now + leaseMs;
    if (cp.status === 'ended') row.endedAt = now;
    return {
      ok: true,
      lease: { owner: lease.owner, epoch: lease.epoch, expiresAt: row.expiresAt },
    };
  }
  async renew(id: string, lease: Lease, leaseMs: number) {
    this.#open();
    const row = this.#rows.get(id);
    if (row?.owner !== lease.owner || row.epoch !== lease.epoch || row.cp.status === 'ended')
      return undefined;
    row.expiresAt = Date.now() + leaseMs;
    return { ...lease, expiresAt: row.expiresAt };
  }
  async release(id: string, lease: Lease) {
    this.#open();
    const row = this.#rows.get(id);
    if (row?.owner === lease.owner && row.epoch === lease.epoch) row.owner = null;
  }
  #stored(row: Row, now: number): StoredConversation {
    const live = this.#live(row, now);
    return {
      conversationId: row.cp.conversationId,
      orchestrator: row.cp.orchestrator,
      status: row.cp.status,
      dispatchCount: row.cp.dispatchCount,
      seq: row.cp.seq,
      updatedAt: row.updatedAt,
      suspendedAt: row.cp.suspendedAt,
      owner: live ? (row.owner as string) : undefined,
      leaseExpiresAt: live ? row.expiresAt : undefined,
      result: row.cp.result === undefined ? undefined : JSON.parse(row.cp.result),
    };
  }
  async get(id: string) {
    this.#open();
    const row = this.#rows.get(id);
    return row && this.#stored(row, Date.now());
  }
  async delete(id: string) {
    this.#open();
    return this.#rows.delete(id);
  }
  async list(q: ListQuery) {
    this.#open();
    const now = Date.now();
    return [...this.#rows.values()]
      .filter(
        (r) =>
          (q.orchestrator === undefined || r.cp.orchestrator === q.orchestrator) &&
          (q.status === undefined || r.cp.status === q.status) &&
          (q.after === undefined || r.cp.conversationId > q.after) &&
          (q.unleased !== true || !this.#live(r, now)),
      )
      .sort((a, b) => (a.cp.conversationId < b.cp.conversationId ? -1 : 1))
      .slice(0, q.limit)
      .map((r) => this.#stored(r, now));
  }
  async stats() {
    this.#open();
    const by = new Map<string, StoreStats>();
    for (const { cp } of this.#rows.values()) {
      if (cp.status === 'ended') continue;
      const s = by.get(cp.orchestrator) ?? {
        orchestrator: cp.orchestrator,
        running: 0,
        suspended: 0,
      };
      const oldest =
        cp.status === 'suspended'
          ? Math.min(s.oldestSuspendedAt ?? Infinity, cp.suspendedAt ?? Infinity)
          : s.oldestSuspendedAt;
      by.set(cp.orchestrator, {
        orchestrator: cp.orchestrator,
        running: s.running + (cp.status === 'running' ? 1 : 0),
        suspended: s.suspended + (cp.status === 'suspended' ? 1 : 0),
        ...(oldest === undefined ? {} : { oldestSuspendedAt: oldest }),
      });
    }
    return [...by.values()];
  }
  async purgeExpired() {
    this.#open();
    const before = Date.now() - (this.defect === 'purge-ignores-retention' ? 0 : this.retentionMs);
    let n = 0;
    for (const [id, row] of this.#rows) {
      if (row.endedAt !== undefined && row.endedAt <= before && this.#rows.delete(id)) n++;
    }
    return n;
  }
  async close() {
    this.#closed = true;
  }
}

const name = (start: string) => {
  const found = conformanceCheckNames.find((n) => n.startsWith(start));
  if (found === undefined) throw new Error(`no check starts with ${start}`);
  return found;
};

describe('the conformance kit', () => {
  it('passes a correct store on every check, and reports each by name in order', async () => {
    const report = await verifyConversationStore((o) => new MapStore('none', o.retentionMs));
    expect(report.checks.filter((c) => !c.ok)).toEqual([]);
    expect(report.passed).toBe(true);
    expect(report.checks.map((c) => c.name)).toEqual(conformanceCheckNames);
    expect(conformanceCheckNames.length).toBe(37);
  }, 60_000);

  const DEFECTS: [Defect, string[]][] = [
    ['ignores-epoch', ['two writers: once', 'fencing:', 'release:', 'ended:', 'lease owner:']],
    ['ignores-seq', ['sequence:', 'commits of many conversations']],
    ['no-size-limit', ['size:']],
    ['usable-after-close', ['close:']],
    ['acquire-ignores-lease', ['acquire race:', 'lease expiry:']],
    ['purge-ignores-retention', ['retention:']],
    ['create-overwrites', ['create race:', 'create: an id already taken']],
    ['loses-unicode', ['round trip:', 'size:']],
    ['last-writer-wins', ['two writers racing']],
    ['refuses-every-commit', ['two writers racing']],
  ];
  for (const [defect, starts] of DEFECTS) {
    it(`fails a store that ${defect.replace(/-/g, ' ')} on ${starts.join(' ')}`, async () => {
      const only = conformanceCheckNames.filter((n) => starts.some((s) => n.startsWith(s)));
      expect(only.length).toBe(starts.length);
      const report = await verifyConversationStore((o) => new MapStore(defect, o.retentionMs), {
        only,
      });
      expect(report.passed).toBe(false);
      expect(report.checks.map((c) => [c.name, c.ok])).toEqual(only.map((n) => [n, false]));
      for (const c of report.checks) expect(c.error).toMatch(/\S/);
    }, 60_000);
  }

  it('skips the incremental checks of a store without append and snapshot, saying why', async () => {
    const only = conformanceCheckNames.filter((n) => n.startsWith('snapshot'));
    expect(only.length).toBe(3);
    const report = await verifyConversationStore(() => new MapStore('none'), { only });
    expect(report.checks.map((c) => [c.ok, c.skipped, c.reason])).toEqual(
      only.map(() => [
        true,
        true,
        'the store has no append() and snapshot(): it keeps whole checkpoints only, which the other checks cover',
      ]),
    );
  });

  const planted: [string, (store: MemoryStore) => void, string[]][] = [
    [
      'appends whatever the seq',
      (store) => {
        const append = store.append.bind(store);
        store.append = async (entry, lease, leaseMs) => {
          const seq = ((await store.get(entry.conversationId))?.seq ?? 0) + 1;
          return append({ ...entry, seq }, lease, leaseMs);
        };
      },
      ['append: fenced', 'appends of many conversations'],
    ],
    [
      'snapshots without compacting',
      (store) => {
        store.snapshot = async (cp) => ({ ok: true, compacted: cp.seq });
      },
      [
        'snapshot: at a seq',
        'snapshot and append',
        'snapshot refused:',
        'entry and snapshot size:',
      ],
    ],
    [
      'has append() without snapshot()',
      (store) => {
        (store as { snapshot?: unknown }).snapshot = undefined;
      },
      ['incremental:'],
    ],
  ];
  for (const [defect, plant, starts] of planted) {
    it(`fails a memory store that ${defect} on ${starts.join(' ')}`, async () => {
      const only = conformanceCheckNames.filter((n) => starts.some((s) => n.startsWith(s)));
      expect(only.length).toBe(starts.length);
      const report = await verifyConversationStore(
        (o) => {
          const store = createMemoryStore(o);
          plant(store);
          return store;
        },
        { only },
      );
      expect(report.checks.map((c) => [c.name, c.ok])).toEqual(only.map((n) => [n, false]));
    }, 60_000);
  }

  it('reports a check that hangs as failed after timeoutMs, and a skipped one as skipped', async () => {
    const hanging = new MapStore('none');
    hanging.get = () => new Promise(() => {});
    const [getCheck, createCheck] = [name('get and delete:'), name('create: an id already taken')];
    const report = await verifyConversationStore(() => hanging, {
      only: [getCheck, createCheck],
      skip: [createCheck],
      timeoutMs: 200,
    });
    expect(report.checks.map((c) => [c.name, c.ok, c.skipped, c.error])).toEqual([
      [createCheck, true, true, undefined],
      [getCheck, false, undefined, 'the check did not finish within 200 ms'],
    ]);
  });

  it('reports a factory that never settles and a close() that never settles as failed checks naming them', async () => {
    const stats = name('stats:');
    const neverMade = await verifyConversationStore(() => new Promise<never>(() => {}), {
      only: [stats],
      timeoutMs: 200,
    });
    expect(neverMade.checks.map((c) => [c.name, c.ok, c.error])).toEqual([
      [stats, false, 'the store factory did not settle within 200 ms'],
    ]);
    const neverClosed = await verifyConversationStore(
      () => {
        const store = new MapStore('none');
        store.close = () => new Promise(() => {});
        return store;
      },
      { only: [stats], timeoutMs: 200 },
    );
    expect(neverClosed.passed).toBe(false);
    expect(neverClosed.checks.map((c) => [c.name, c.ok, c.error])).toEqual([
      [stats, false, 'store.close() did not settle within 200 ms'],
    ]);
  });

  it('says the factory did not apply retentionMs when its store keeps the default retention', async () => {
    const retention = name('retention:');
    // A factory that ignores what it is given, as the kit's doc allows: the store keeps 7 days.
    const report = await verifyConversationStore(() => createMemoryStore(), { only: [retention] });
    expect(report.checks.map((c) => [c.name, c.ok, c.error])).toEqual([
      [
        retention,
        false,
        'the store factory did not apply retentionMs (1000 ms): an ended conversation past it was not purged (purgeExpired said 0). A factory that cannot honour it may skip this check: verifyConversationStore(factory, { skip: [name of this check] })',
      ],
    ]);
  }, 30_000);

  it('reports a factory that throws as a failed check', async () => {
    const report = await verifyConversationStore(
      () => {
        throw new Error('no database');
      },
      { only: [name('stats:')] },
    );
    expect(report.checks.map((c) => [c.ok, c.error])).toEqual([[false, 'no database']]);
  });

  it('rejects an unknown check name and a factory that is not a function, saying what came', async () => {
    await expect(
      verifyConversationStore(() => new MapStore('none'), { only: ['no such check'] }),
    ).rejects.toThrow(
      'verifyConversationStore: `only` names no check: "no such check" (see conformanceCheckNames)',
    );
    await expect(verifyConversationStore('store' as never)).rejects.toThrow(
      'verifyConversationStore: expected `factory` to be a function that makes a store, got string',
    );
  });
});
