/**
 * What the SQLite store promises beyond the conformance kit: its file (WAL, one row per
 * conversation, the schema version), group commit, dead holders on this host, its own purge,
 * two stores on one file, close, and its errors.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { newLeaseOwner, setLeaseOwnerLive } from '../../src/core/durable/lease-owner.ts';
import type { Checkpoint, Lease } from '../../src/core/spi/store.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';

const dir = mkdtempSync(join(tmpdir(), 'store-sqlite-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
let files = 0;
const newPath = () => join(dir, `db-${files++}.sqlite`);

const cp = (id: string, seq: number, fields: Partial<Checkpoint> = {}): Checkpoint => ({
  conversationId: id,
  orchestrator: 'desks',
  status: 'running',
  seq,
  dispatchCount: seq - 1,
  state: JSON.stringify({ seq }),
  ...fields,
});
const OWNER = 'other-host.invalid/1/a';

async function createdLease(
  store: ReturnType<typeof createSqliteStore>,
  c: Checkpoint,
  owner = OWNER,
) {
  const outcome = await store.create(c, owner, 60_000);
  if (!outcome.created) throw new Error(`${c.conversationId} was not created`);
  return outcome.lease;
}

describe('the SQLite store file', () => {
  it('is in WAL mode at schema version 2, with one row per conversation whatever the commits', async () => {
    const path = newPath();
    const store = createSqliteStore({ path });
    let lease: Lease = await createdLease(store, cp('c1', 1));
    for (let seq = 2; seq <= 200; seq++) {
      const outcome = await store.commit(cp('c1', seq), lease, 60_000);
      if (!outcome.ok) throw new Error(`commit ${seq} refused: ${outcome.reason}`);
      lease = outcome.lease;
    }
    const raw = new Database(path, { readonly: true });
    try {
      expect(raw.pragma('journal_mode', { simple: true })).toBe('wal');
      expect(raw.pragma('user_version', { simple: true })).toBe(2);
      expect(raw.prepare('SELECT id, seq, state FROM conversations').all()).toEqual([
        { id: 'c1', seq: 200, state: '{"seq":200}' },
      ]);
      // Whole commits keep no entries.
      expect(raw.prepare('SELECT COUNT(*) AS n FROM conversation_entries').get()).toEqual({ n: 0 });
    } finally {
      raw.close();
      await store.close();
    }
  });

  it('refuses a database of a newer schema version, naming the store, the file and both versions', async () => {
    const path = newPath();
    await createSqliteStore({ path }).close();
    const raw = new Database(path);
    raw.pragma('user_version = 7');
    raw.close();
    expect(() => createSqliteStore({ path })).toThrow(
      `sqlite store: the database ${path} has schema version 7, newer than the version 2 this conversation-orchestrator writes; open it with a newer conversation-orchestrator (or use another file)`,
    );
  });

  it('opens a file another store has open and migrated, and both see one conversation', async () => {
    const path = newPath();
    const [a, b] = [createSqliteStore({ path }), createSqliteStore({ path })];
    const outcomes = await Promise.all([
      a.create(cp('shared', 1), 'h.invalid/1/a', 60_000),
      b.create(cp('shared', 1), 'h.invalid/1/b', 60_000),
    ]);
    expect(outcomes.map((o) => o.created).sort()).toEqual([false, true]);
    expect((await a.get('shared'))?.owner).toBe((await b.get('shared'))?.owner);
    await Promise.all([a.close(), b.close()]);
  });

  it('refuses bad options at construction, naming the option and the value', () => {
    expect(() => createSqliteStore({ path: '' })).toThrow(
      'createSqliteStore: expected `path` to be a file path or \':memory:\', got `""` (string)',
    );
    expect(() => createSqliteStore({ path: ':memory:', synchronous: 'OFF' as never })).toThrow(
      "createSqliteStore: expected `synchronous` to be 'FULL' or 'NORMAL', got `\"OFF\"` (string)",
    );
    expect(() => createSqliteStore({ path: ':memory:', retentionMs: -1 })).toThrow(
      'createSqliteStore: expected `retentionMs` to be a non-negative integer, got `-1` (number)',
    );
    expect(() => createSqliteStore({ path: ':memory:', maxCheckpointBytes: 0 })).toThrow(
      'createSqliteStore: expected `maxCheckpointBytes` to be a positive integer, got `0` (number)',
    );
  });

  it('has the documented defaults: 4 MiB entries, 256 MiB snapshots, the name sqlite', async () => {
    const store = createSqliteStore({ path: ':memory:' });
    expect([store.name, store.maxCheckpointBytes, store.maxSnapshotBytes]).toEqual([
      'sqlite',
      4_194_304,
      268_435_456,
    ]);
    await store.close();
    const small = createSqliteStore({
      path: ':memory:',
      maxCheckpointBytes: 2_048,
      maxSnapshotBytes: 4_096,
    });
    expect(small.maxCheckpointBytes).toBe(2_048);
    await expect(
      small.create(cp('big', 1, { state: 'x'.repeat(4_097) }), OWNER, 1),
    ).rejects.toThrow(
      'sqlite store: create() of conversation big (seq 1) refused: the checkpoint is 4097 bytes (state + result, UTF-8), past maxSnapshotBytes 4096',
    );
    const { lease } = (await small.create(cp('e', 1), OWNER, 60_000)) as { lease: Lease };
    await expect(
      small.append(
        { conversationId: 'e', seq: 2, dispatchCount: 1, entry: 'y'.repeat(2_049) },
        lease,
        1,
      ),
    ).rejects.toThrow(
      'sqlite store: append() of conversation e (seq 2) refused: the entry is 2049 bytes (UTF-8), past maxCheckpointBytes 2048',
    );
    await small.close();
  });

  it('migrates a version 1 database to version 2, keeping its conversations', async () => {
    const path = newPath();
    const raw = new Database(path);
    raw.pragma('journal_mode = WAL');
    raw.exec(`CREATE TABLE conversations (
      id TEXT PRIMARY KEY NOT NULL, orchestrator TEXT NOT NULL,
      status TEXT NOT NULL CHECK (status IN ('running', 'suspended', 'ended')),
      seq INTEGER NOT NULL, dispatch_count INTEGER NOT NULL, state TEXT NOT NULL, result TEXT,
      suspended_at INTEGER, updated_at INTEGER NOT NULL, ended_at INTEGER, owner TEXT,
      epoch INTEGER NOT NULL, lease_expires_at INTEGER);
      CREATE INDEX conversations_live ON conversations (orchestrator, status) WHERE status <> 'ended';
      CREATE INDEX conversations_ended ON conversations (ended_at) WHERE status = 'ended';
      INSERT INTO conversations VALUES ('old', 'o', 'running', 4, 3, '{"seq":4}', NULL, NULL, 1, NULL, NULL, 2, NULL);`);
    raw.pragma('user_version = 1');
    raw.close();
    const store = createSqliteStore({ path });
    const acquired = await store.acquire('old', OWNER, 60_000);
    expect(acquired).toMatchObject({
      status: 'acquired',
      checkpoint: { seq: 4, dispatchCount: 3, state: '{"seq":4}' },
      entries: [],
    });
    const lease = (acquired as { lease: Lease }).lease;
    expect(
      await store.append(
        { conversationId: 'old', seq: 5, dispatchCount: 4, entry: '{}' },
        lease,
        60_000,
      ),
    ).toMatchObject({ ok: true });
    await store.close();
    const reopened = new Database(path, { readonly: true });
    expect(reopened.pragma('user_version', { simple: true })).toBe(2);
    reopened.close();
  });
});

describe('without better-sqlite3', () => {
  it('imports, and createSqliteStore throws an error naming the missing optional peer', () => {
    // The sources copied where no node_modules can be found: better-sqlite3 cannot be resolved.
    const app = mkdtempSync(join(tmpdir(), 'store-sqlite-no-peer-'));
    try {
      cpSync(resolve(import.meta.dirname, '../../src'), join(app, 'src'), { recursive: true });
      writeFileSync(join(app, 'package.json'), '{"type":"module"}');
      writeFileSync(
        join(app, 'main.mts'),
        [
          "import { createSqliteStore } from './src/stores/sqlite/index.ts';",
          "console.log('imported');",
          "try { createSqliteStore({ path: ':memory:' }); } catch (e) { console.log(e.message); }",
        ].join('\n'),
      );
      const tsx = createRequire(import.meta.url).resolve('tsx');
      const run = spawnSync(process.execPath, ['--import', tsx, 'main.mts'], { cwd: app });
      expect(run.stdout.toString()).toBe(
        'imported\ncreateSqliteStore needs the optional peer dependency better-sqlite3 (^12): npm install better-sqlite3\n',
      );
    } finally {
      rmSync(app, { recursive: true, force: true });
    }
  });
});

describe('group commit', () => {
  /** WAL frames written since the last checkpoint (the WAL file's header is 32 bytes, a frame 24 + page). */
  const walFrames = (path: string) => {
    const raw = new Database(path, { readonly: true });
    const pageSize = raw.pragma('page_size', { simple: true }) as number;
    raw.close();
    return (statSync(`${path}-wal`).size - 32) / (24 + pageSize);
  };

  it('applies the commits of 100 conversations issued in one turn in one transaction: far fewer WAL frames than one at a time', async () => {
    const frames: number[] = [];
    for (const grouped of [true, false]) {
      const path = newPath();
      const store = createSqliteStore({ path });
      const ids = Array.from({ length: 100 }, (_, i) => `g${i}`);
      const leases = await Promise.all(ids.map((id) => createdLease(store, cp(id, 1))));
      const raw = new Database(path);
      raw.pragma('wal_checkpoint(TRUNCATE)');
      raw.close();
      const before = walFrames(path);
      if (grouped) {
        const outcomes = await Promise.all(
          ids.map((id, i) => store.commit(cp(id, 2), leases[i] as Lease, 60_000)),
        );
        expect(outcomes.every((o) => o.ok)).toBe(true);
      } else {
        for (const [i, id] of ids.entries()) {
          expect((await store.commit(cp(id, 2), leases[i] as Lease, 60_000)).ok).toBe(true);
        }
      }
      frames.push(walFrames(path) - before);
      await store.close();
    }
    const [grouped, alone] = frames as [number, number];
    // One transaction writes each page it touched once; 100 write at least 100 commit frames.
    expect(alone).toBeGreaterThanOrEqual(100);
    expect(grouped).toBeLessThan(10);
  });

  it('rejects every commit of a group whose transaction failed, and writes none of them', async () => {
    const path = newPath();
    const store = createSqliteStore({ path, busyTimeoutMs: 0 });
    const leases = await Promise.all(['x', 'y'].map((id) => createdLease(store, cp(id, 1))));
    const locker = new Database(path);
    locker.exec('BEGIN IMMEDIATE');
    try {
      const outcomes = await Promise.allSettled(
        ['x', 'y'].map((id, i) => store.commit(cp(id, 2), leases[i] as Lease, 60_000)),
      );
      expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected']);
      expect((outcomes[0] as PromiseRejectedResult).reason.message).toBe(
        `sqlite store: a group of 2 (conversations x, y) failed on ${path}: database is locked [SQLITE_BUSY: another process held the write lock longer than busyTimeoutMs]`,
      );
    } finally {
      locker.exec('ROLLBACK');
      locker.close();
    }
    expect([(await store.get('x'))?.seq, (await store.get('y'))?.seq]).toEqual([1, 1]);
    await store.close();
  });
});

describe('leases on one host', () => {
  it("takes a live lease at once when its holder's process is gone, as a takeover", async () => {
    const store = createSqliteStore({ path: ':memory:' });
    const exited = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))']);
    const deadOwner = `${newLeaseOwner().split('/')[0]}/${exited.stdout.toString()}/t`;
    const lease = await createdLease(store, cp('dead', 1), deadOwner);
    expect(lease.expiresAt).toBeGreaterThan(Date.now() + 30_000);
    expect((await store.get('dead'))?.owner).toBeUndefined();
    expect((await store.list({ unleased: true, limit: 10 })).map((c) => c.conversationId)).toEqual([
      'dead',
    ]);
    const taken = await store.acquire('dead', OWNER, 60_000);
    expect([taken.status, (taken as { takenOver: boolean }).takenOver]).toEqual(['acquired', true]);
    await store.close();
  });

  it('waits for a holder of this process that is still running, and takes one that no run holds any more', async () => {
    const store = createSqliteStore({ path: ':memory:' });
    const owner = newLeaseOwner();
    setLeaseOwnerLive(owner, true);
    await createdLease(store, cp('mine', 1), owner);
    expect((await store.acquire('mine', OWNER, 60_000)).status).toBe('held');
    setLeaseOwnerLive(owner, false);
    expect((await store.acquire('mine', OWNER, 60_000)).status).toBe('acquired');
    await store.close();
  });
});

describe('retention and close', () => {
  it('purges ended conversations past retention by itself, on its timer, leaving running ones', async () => {
    const store = createSqliteStore({ path: ':memory:', retentionMs: 0, purgeIntervalMs: 20 });
    const lease = await createdLease(store, cp('ends', 1));
    await createdLease(store, cp('runs', 1));
    await store.commit(cp('ends', 2, { status: 'ended', result: '{}' }), lease, 1);
    for (let i = 0; i < 250 && (await store.get('ends')) !== undefined; i++) {
      await new Promise((r) => setTimeout(r, 20));
    }
    expect([(await store.get('ends'))?.status, (await store.get('runs'))?.status]).toEqual([
      undefined,
      'running',
    ]);
    await store.close();
  });

  it('applies the commits queued when close() is called before it closes the file', async () => {
    const path = newPath();
    const store = createSqliteStore({ path });
    const lease = await createdLease(store, cp('last', 1));
    const committing = store.commit(cp('last', 2), lease, 60_000);
    await store.close();
    expect((await committing).ok).toBe(true);
    const reopened = createSqliteStore({ path });
    expect((await reopened.get('last'))?.seq).toBe(2);
    await reopened.close();
  });

  it('rejects a call after close() with an error naming the method and the file', async () => {
    const path = newPath();
    const store = createSqliteStore({ path });
    await store.close();
    await store.close();
    await expect(store.get('x')).rejects.toThrow(
      `sqlite store: get() called after close() on ${path}`,
    );
  });
});

describe('the log behind a whole commit', () => {
  // A whole commit skips clearing the log when this store knows it is empty (its creation or a
  // whole commit under the same lease, nothing appended since): never when it is not.
  it('clears the entries of an append before a whole commit, and leaves none when it knows there are none', async () => {
    const path = newPath();
    const store = createSqliteStore({ path });
    const lease = await createdLease(store, cp('log', 1));
    // Whole commits only: the log stays empty.
    expect((await store.commit(cp('log', 2), lease, 60_000)).ok).toBe(true);
    const entry = (seq: number) => ({
      conversationId: 'log',
      seq,
      dispatchCount: seq - 1,
      entry: JSON.stringify({ v: 1, seq }),
    });
    expect((await store.append(entry(3), lease, 60_000)).ok).toBe(true);
    expect((await store.append(entry(4), lease, 60_000)).ok).toBe(true);
    // A whole commit after entries: they are done with.
    expect((await store.commit(cp('log', 5), lease, 60_000)).ok).toBe(true);
    expect((await store.commit(cp('log', 6), lease, 60_000)).ok).toBe(true);
    await store.release('log', lease);
    const taken = await store.acquire('log', 'next-host.invalid/2/b', 60_000);
    expect(taken).toMatchObject({ status: 'acquired', checkpoint: { seq: 6 } });
    expect(taken.status === 'acquired' ? (taken.entries ?? []) : ['?']).toEqual([]);
    // The new holder's entries, then its whole commit: cleared again, under its lease.
    if (taken.status !== 'acquired') throw new Error('not acquired');
    expect((await store.append(entry(7), taken.lease, 60_000)).ok).toBe(true);
    expect((await store.commit(cp('log', 8), taken.lease, 60_000)).ok).toBe(true);
    await store.release('log', taken.lease);
    const again = await store.acquire('log', 'third-host.invalid/3/c', 60_000);
    expect(again.status === 'acquired' ? (again.entries ?? []) : ['?']).toEqual([]);
    const raw = new Database(path, { readonly: true });
    expect(raw.prepare('SELECT COUNT(*) AS n FROM conversation_entries').get()).toEqual({ n: 0 });
    raw.close();
    await store.close();
  });

  it('clears what another store on the same file appended under a lease taken over', async () => {
    const path = newPath();
    const a = createSqliteStore({ path });
    const b = createSqliteStore({ path });
    const lease = await createdLease(a, cp('two', 1));
    expect((await a.commit(cp('two', 2), lease, 60_000)).ok).toBe(true);
    await a.release('two', lease);
    const taken = await b.acquire('two', 'next-host.invalid/2/b', 60_000);
    if (taken.status !== 'acquired') throw new Error('not acquired');
    expect(
      (
        await b.append(
          { conversationId: 'two', seq: 3, dispatchCount: 2, entry: '{"v":1}' },
          taken.lease,
          60_000,
        )
      ).ok,
    ).toBe(true);
    await b.release('two', taken.lease);
    // A takes it back (a new epoch): its whole commit clears B's entry.
    const back = await a.acquire('two', 'first-host.invalid/1/a', 60_000);
    if (back.status !== 'acquired') throw new Error('not acquired');
    expect(back.entries).toHaveLength(1);
    expect((await a.commit(cp('two', 4), back.lease, 60_000)).ok).toBe(true);
    await a.release('two', back.lease);
    const last = await b.acquire('two', 'next-host.invalid/2/c', 60_000);
    expect(last.status === 'acquired' ? (last.entries ?? []) : ['?']).toEqual([]);
    await a.close();
    await b.close();
  });
});
