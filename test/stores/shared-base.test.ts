/**
 * The pieces the durable stores share (src/stores/shared): their errors recognized by code, the
 * checkpoint size, the timed call, the group-commit queue and the row mapping.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { OrchestratorError } from '../../src/core/spi/errors.ts';
import type { Checkpoint } from '../../src/core/spi/store.ts';
import { checkpointBytes, oversizeBytes } from '../../src/stores/shared/checkpoint-size.ts';
import { queued, type Settles, TurnQueue } from '../../src/stores/shared/group-commit.ts';
import { withoutPassword } from '../../src/stores/shared/options.ts';
import { purgeEvery } from '../../src/stores/shared/purge.ts';
import { checkpointOf, liveHolder, storedOf } from '../../src/stores/shared/rows.ts';
import { isStoreError, STORE_CODES, StoreError } from '../../src/stores/shared/store-error.ts';
import { timedCall } from '../../src/stores/shared/timed-call.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';

const checkpoint = (state: string, result?: string): Checkpoint => ({
  conversationId: 'c',
  orchestrator: 'o',
  status: 'running',
  seq: 1,
  dispatchCount: 0,
  state,
  ...(result === undefined ? {} : { result }),
});

describe('store errors', () => {
  it('are OrchestratorErrors named StoreError whose code says what failed', async () => {
    const store = createSqliteStore({
      path: ':memory:',
      maxCheckpointBytes: 10,
      maxSnapshotBytes: 10,
    });
    const tooLarge = await store.create(checkpoint('x'.repeat(11)), 'me', 1_000).catch((e) => e);
    expect([tooLarge instanceof OrchestratorError, tooLarge.name, tooLarge.code]).toEqual([
      true,
      'StoreError',
      'ERR_STORE_CHECKPOINT_TOO_LARGE',
    ]);
    await store.close();
    const closed = await store.get('c').catch((e) => e);
    expect([closed instanceof OrchestratorError, closed.code]).toEqual([true, 'ERR_STORE_CLOSED']);
  });

  it('are recognized by their code, not by a message that looks like one', () => {
    expect(isStoreError(new StoreError('anything'))).toBe(true);
    expect(isStoreError(new StoreError('anything', STORE_CODES.peerMissing))).toBe(true);
    expect(isStoreError(new Error('PostgreSQL store (x): get failed: y'))).toBe(false);
    expect(isStoreError(new Error('sqlite store: get failed'))).toBe(false);
    expect(isStoreError(Object.assign(new Error('x'), { code: 'ERR_STORE' }))).toBe(false);
  });

  it('keep the code of a database written by a newer version when the store opens it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'store-shared-'));
    try {
      const path = join(dir, 'newer.db');
      await createSqliteStore({ path, purgeIntervalMs: 0 }).close();
      // A later version's file: user_version past this one's.
      const Database = createRequire(import.meta.url)('better-sqlite3');
      const db = new Database(path);
      db.pragma('user_version = 9');
      db.close();
      let error: unknown;
      try {
        createSqliteStore({ path });
      } catch (e) {
        error = e;
      }
      expect([error instanceof OrchestratorError, (error as { code?: string }).code]).toEqual([
        true,
        'ERR_NEWER_SCHEMA',
      ]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('checkpoint size', () => {
  it('counts UTF-8 bytes of state and result, and tells only a checkpoint past the limit', () => {
    const cp = checkpoint('é'.repeat(3), '€'); // 6 + 3 bytes
    expect(checkpointBytes(cp)).toBe(9);
    expect(oversizeBytes(cp, 9)).toBeUndefined();
    expect(oversizeBytes(cp, 8)).toBe(9);
    expect(oversizeBytes(checkpoint('abc'), 1)).toBe(3);
  });
});

describe('timed call', () => {
  it("answers the work's result, or its failure and a timeout as the store's error", async () => {
    const fail = (cause: unknown) => new StoreError(`s: ${(cause as Error).message}`);
    expect(await timedCall(async () => 7, 50, fail)).toBe(7);
    await expect(
      timedCall(
        async () => {
          throw new Error('refused');
        },
        50,
        fail,
      ),
    ).rejects.toThrow(/^s: refused$/);
    await expect(timedCall(() => new Promise(() => {}), 20, fail)).rejects.toThrow(
      /^s: no answer within 20 ms$/,
    );
    await expect(
      timedCall(() => new Promise((resolve) => setTimeout(resolve, 30, 'late')), undefined, fail),
    ).resolves.toBe('late');
  });
});

describe('group-commit queue', () => {
  it('hands the items of one event-loop turn over together, once, each answered on its own', async () => {
    const flushed: number[][] = [];
    type Item = Settles<string> & { readonly n: number };
    const queue = new TurnQueue<Item>((items) => {
      flushed.push(items.map((i) => i.n));
      for (const i of items) i.resolve(`done ${i.n}`);
    });
    const answers = Promise.all([1, 2, 3].map((n) => queued<string, Item>(queue, { n })));
    expect([queue.size, flushed]).toEqual([3, []]);
    expect(await answers).toEqual(['done 1', 'done 2', 'done 3']);
    await queued<string, Item>(queue, { n: 4 });
    expect(flushed).toEqual([[1, 2, 3], [4]]);
  });

  it('hands over at once on flush(), and nothing when nothing waits', async () => {
    let calls = 0;
    const queue = new TurnQueue<Settles<void>>((items) => {
      calls++;
      for (const i of items) i.resolve();
    });
    queue.flush();
    const answered = queued<void, Settles<void>>(queue, {});
    queue.flush();
    expect(calls).toBe(1);
    await answered;
    await new Promise((resolve) => setImmediate(resolve));
    expect(calls).toBe(1);
  });
});

describe('rows', () => {
  it("maps a row whose numbers are strings (pg's bigint) to a checkpoint and a stored conversation", () => {
    const row = {
      conversation_id: 'c',
      orchestrator: 'o',
      status: 'ended',
      seq: '3',
      dispatch_count: '2',
      state: '{}',
      result: null,
      suspended_at: '17',
      updated_at: '20',
    };
    expect(checkpointOf(row)).toEqual({
      conversationId: 'c',
      orchestrator: 'o',
      status: 'ended',
      seq: 3,
      dispatchCount: 2,
      state: '{}',
      suspendedAt: 17,
    });
    expect(storedOf(row, { owner: 'h', leaseExpiresAt: 30 }, { ok: true })).toEqual({
      conversationId: 'c',
      orchestrator: 'o',
      status: 'ended',
      dispatchCount: 2,
      seq: 3,
      updatedAt: 20,
      suspendedAt: 17,
      owner: 'h',
      leaseExpiresAt: 30,
      result: { ok: true },
    });
  });

  it('shows a lease holder only while the lease is live', () => {
    expect(liveHolder('h', '100', 99)).toEqual({ owner: 'h', leaseExpiresAt: 100 });
    expect(liveHolder('h', 100, 100)).toBeUndefined();
    expect(liveHolder(null, 100, 0)).toBeUndefined();
    expect(liveHolder('h', null, 0)).toBeUndefined();
    expect(liveHolder('h', 100, 0, () => false)).toBeUndefined();
  });
});

describe('options', () => {
  it('shows a connection URL without its password, and a fallback for what is no URL', () => {
    expect(withoutPassword('postgres://u:secret@db:5432/app', 'x')).toBe(
      'postgres://u@db:5432/app',
    );
    expect(withoutPassword('not a url', 'connection string')).toBe('connection string');
  });

  it('sets no purge timer when the interval is 0', () => {
    expect(purgeEvery(0, () => {})).toBeUndefined();
    const timer = purgeEvery(60_000, () => {});
    expect(timer?.hasRef()).toBe(false);
    clearInterval(timer);
  });
});
