/**
 * Another process holding the SQLite file's write lock must not stall this one: waiting for the
 * lock happens on timers (busy_timeout is 0 once the store is open), so timers, other
 * conversations and an HTTP health check go on while a commit waits; the commit lands once the
 * lock is free, or fails with SQLITE_BUSY named after busyTimeoutMs. The holder is a real second
 * process in `BEGIN IMMEDIATE`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { SQLITE_FILE } from '../../service/desks/durable.ts';
import type { Checkpoint } from '../../src/index.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';
import { sampleValue, scrape, startService, stopService, sumSamples } from '../helpers/service.ts';

const dir = mkdtempSync(join(tmpdir(), 'sqlite-busy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const holders: ChildProcess[] = [];
afterEach(() => {
  for (const h of holders.splice(0)) h.kill('SIGKILL');
});

/** A second process that takes the write lock, says `locked`, and lets go after `holdMs`. */
async function holdLock(path: string, holdMs: number): Promise<ChildProcess> {
  const child = spawn(
    process.execPath,
    [
      '-e',
      `const db = new (require('better-sqlite3'))(${JSON.stringify(path)});
       db.exec('BEGIN IMMEDIATE');
       console.log('locked');
       setTimeout(() => { db.exec('COMMIT'); db.close(); }, ${holdMs});`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  holders.push(child);
  await new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (c: Buffer) => {
      if (String(c).includes('locked')) resolve();
    });
    child.on('exit', (code) => reject(new Error(`the lock holder exited (${code})`)));
  });
  return child;
}

/** The largest gap between the ticks of a 10 ms interval while `work` runs. */
async function largestTimerGap<T>(
  work: () => Promise<T>,
): Promise<{ gap: number; value: T | Error }> {
  let last = performance.now();
  let gap = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    gap = Math.max(gap, now - last);
    last = now;
  }, 10);
  const value = await work().catch((error: Error) => error);
  clearInterval(tick);
  return { gap: Math.max(gap, performance.now() - last), value };
}

const checkpoint = (id: string, seq: number): Checkpoint => ({
  conversationId: id,
  orchestrator: 'busy',
  status: 'running',
  seq,
  dispatchCount: seq - 1,
  state: '{}',
});

/**
 * A store on `name`.db that waits up to `busyTimeoutMs` for the lock, holding conversation `id` at
 * seq 1; its commit of seq 2 is timed while another process holds the write lock for `holdMs`.
 */
async function commitWhileLocked(name: string, id: string, busyTimeoutMs: number, holdMs: number) {
  const path = join(dir, `${name}.db`);
  const store = createSqliteStore({ path, busyTimeoutMs });
  const created = await store.create(checkpoint(id, 1), 'host/1/token', 60_000);
  if (!created.created) throw new Error('not created');
  await holdLock(path, holdMs);
  const started = performance.now();
  const { gap, value } = await largestTimerGap(() =>
    store.commit(checkpoint(id, 2), created.lease, 60_000),
  );
  return { store, gap, value, waited: performance.now() - started };
}

describe('the SQLite store while another process holds the write lock', () => {
  it('waits for the lock on timers (the event loop runs on), and commits once it is free', async () => {
    const { store, gap, value, waited } = await commitWhileLocked('wait', 'c', 5_000, 1_500);
    expect(value).toMatchObject({ ok: true });
    // It did wait for the other process (about 1.5 s), and no tick of the timer waited with it.
    expect(waited).toBeGreaterThan(1_000);
    expect(gap).toBeLessThan(100);
    expect((await store.get('c'))?.seq).toBe(2);
    await store.close();
  });

  it('reads, acquires and releases also wait off the loop', async () => {
    const path = join(dir, 'acquire.db');
    const store = createSqliteStore({ path, busyTimeoutMs: 5_000 });
    await store.create({ ...checkpoint('a', 1), status: 'suspended' }, 'host/1/token', 60_000);
    await holdLock(path, 1_000);
    const { gap, value } = await largestTimerGap(() => store.acquire('a', 'host/2/other', 60_000));
    expect(value).toMatchObject({ status: 'acquired' });
    expect(gap).toBeLessThan(100);
    await store.close();
  });

  it('fails with SQLITE_BUSY named once busyTimeoutMs has passed, still without stalling the loop', async () => {
    const { store, gap, value, waited } = await commitWhileLocked('timeout', 't', 400, 3_000);
    expect(value).toBeInstanceOf(Error);
    expect((value as Error).message).toMatch(
      /^sqlite store: commit \(conversations t\) failed on .*timeout\.db: .* \[SQLITE_BUSY: another process held the write lock longer than busyTimeoutMs\]$/,
    );
    expect(waited).toBeGreaterThanOrEqual(390);
    expect(waited).toBeLessThan(2_000);
    expect(gap).toBeLessThan(100);
    await store.close();
  });
});

describe('the demo service on SQLite while another process holds the write lock for 2.5 s', () => {
  it('answers /healthz within 100 ms throughout, and its conversations go on after', async () => {
    const data = mkdtempSync(join(dir, 'demo-'));
    const service = await startService(['--data', data]);
    try {
      await vi.waitFor(
        async () =>
          expect(
            sampleValue(
              await scrape(service),
              'orchestrator_dispatches_total{orchestrator="fx_desks",responder="london"}',
            ) ?? 0,
          ).toBeGreaterThan(0),
        { timeout: 20_000 },
      );
      const holder = await holdLock(join(data, SQLITE_FILE), 2_500);
      const released = new Promise<void>((resolve) => holder.on('exit', () => resolve()));
      const slowest: number[] = [];
      const until = performance.now() + 2_400;
      while (performance.now() < until) {
        const started = performance.now();
        const response = await fetch(`${service.url}/healthz`, {
          signal: AbortSignal.timeout(2_000),
        });
        expect(response.status).toBe(200);
        slowest.push(performance.now() - started);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(slowest.length).toBeGreaterThan(10);
      expect(Math.max(...slowest)).toBeLessThan(100);
      await released;
      const before = sumSamples(await scrape(service), 'orchestrator_dispatches_total');
      await vi.waitFor(
        async () =>
          expect(
            sumSamples(await scrape(service), 'orchestrator_dispatches_total'),
          ).toBeGreaterThan(before),
        { timeout: 10_000 },
      );
    } finally {
      await stopService(service);
    }
  }, 60_000);
});
