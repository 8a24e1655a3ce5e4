/**
 * Scrapes while the store is down (issue 43, finding 8): a real redis-server killed (connection
 * refused, ioredis reconnecting with its offline queue) or stopped (`SIGSTOP`: the connection up,
 * nothing answers). Every scrape answers within `timeoutMs`, exposes no series of an earlier read,
 * says `orchestrator_store_up 0` and why (`reason`), sends no read behind an unanswered one (the
 * client's queues stay bounded), and reads fresh values once Redis is back.
 */
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { ConversationStore } from '../../src/index.ts';
import { createStoreMetrics, type StoreMetrics } from '../../src/observability/index.ts';
import { createRedisStore } from '../../src/stores/redis/index.ts';
import { hasRedisServer, type RunningRedis, startRedis } from '../helpers/redis.ts';

const TIMEOUT_MS = 200;
/** What a scrape may take past `timeoutMs` (timers, the registry's own work on a loaded host). */
const MARGIN_MS = 150;

interface Queues {
  readonly offlineQueue: { readonly length: number };
  readonly commandQueue: { readonly length: number };
}

/** Indexes suspended conversations of orchestrator `desk` as the store does (what stats() reads). */
async function seed(url: string, ids: readonly string[]): Promise<void> {
  const admin = new Redis(url);
  await admin.sadd('co:|orchestrators', 'desk');
  for (const id of ids) {
    await admin.zadd('co:|os:desk:suspended', 0, id);
    await admin.zadd('co:|suspendedAt:desk', Date.now() - 5_000, id);
  }
  admin.disconnect();
}

function value(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe.skipIf(!hasRedisServer())('store metrics while Redis is down', () => {
  let redis: RunningRedis;
  let client: Redis;
  let store: ConversationStore;
  let registry: Registry;
  let metrics: StoreMetrics;

  /** The store's client as the store makes its own: one retry per call, a command timeout. */
  const open = (options: { maxRetriesPerRequest: number | null }) => {
    client = new Redis(redis.url, {
      commandTimeout: 1_000,
      retryStrategy: (times) => Math.min(times * 50, 200),
      ...options,
    });
    client.on('error', () => {});
    store = createRedisStore({ client, commandTimeoutMs: 1_000 });
    registry = new Registry();
    metrics = createStoreMetrics({ store, registry, timeoutMs: TIMEOUT_MS, minIntervalMs: 1 });
  };

  /** One scrape: its text and how long it took. */
  const scrape = async () => {
    const started = performance.now();
    const text = await registry.metrics();
    return { text, ms: performance.now() - started };
  };

  const queued = () => {
    const q = client as unknown as Queues;
    return q.offlineQueue.length + q.commandQueue.length;
  };

  beforeEach(async () => {
    redis = await startRedis({ aof: true });
    await seed(redis.url, ['s1', 's2']);
  });

  afterEach(async () => {
    redis.resume();
    await store?.close();
    client?.disconnect();
    await redis.stop();
  });

  /** Scrapes `times` times `gapMs` apart while Redis is down; each answers in time, stale-free. */
  const scrapeWhileDown = async (times: number, gapMs: number) => {
    const queues: number[] = [];
    for (let i = 0; i < times; i++) {
      const { text, ms } = await scrape();
      expect(ms).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
      expect(text).not.toMatch(/^orchestrator_conversations_suspended\{/m);
      expect(text).not.toMatch(/^orchestrator_oldest_suspended_seconds\{/m);
      expect(value(text, 'orchestrator_store_up{store="redis"}')).toBe(0);
      queues.push(queued());
      await new Promise((r) => setTimeout(r, gapMs));
    }
    return queues;
  };

  const expectUp = async (suspended: number) => {
    const { text, ms } = await scrape();
    expect(ms).toBeLessThan(TIMEOUT_MS + MARGIN_MS);
    expect(value(text, 'orchestrator_store_up{store="redis"}')).toBe(1);
    expect(value(text, 'orchestrator_conversations_suspended{orchestrator="desk"}')).toBe(
      suspended,
    );
  };

  /**
   * Opens the store (its client's `maxRetriesPerRequest` as given), reads it up with the 2 seeded,
   * takes Redis `down`, then scrapes while down; answers the most reads queued at once.
   */
  const queuedWhileDown = async (
    maxRetriesPerRequest: number | null,
    down: () => unknown,
    times: number,
    gapMs: number,
  ) => {
    open({ maxRetriesPerRequest });
    await expectUp(2);
    await down();
    return Math.max(...(await scrapeWhileDown(times, gapMs)));
  };

  /** A scrape counts failed reads of `reason`. */
  const expectFailedReads = async (reason: 'error' | 'timeout') => {
    const { text } = await scrape();
    expect(
      value(text, `orchestrator_store_read_failures_total{store="redis",reason="${reason}"}`),
    ).toBeGreaterThan(0);
  };

  it('killed: scrapes answer in time with no stale series, up 0 (reason error), nothing queued; fresh after a restart', async () => {
    const mostQueued = await queuedWhileDown(1, () => redis.kill('SIGKILL'), 12, 100);
    // The read of the first scrape may still wait in the offline queue; none after it.
    expect(mostQueued).toBeLessThanOrEqual(1);
    await expectFailedReads('error');
    expect(String(metrics.lastFailure?.error)).toMatch(/Redis is unreachable/);
    await redis.restart();
    await seed(redis.url, ['s3']);
    await waitReady(client);
    await expectUp(3);
  });

  it('killed, with a client that waits for Redis forever (maxRetriesPerRequest null): its offline queue stays bounded', async () => {
    // Past the store's commandTimeoutMs (1 s): a read that timed out is not sent again and again.
    const mostQueued = await queuedWhileDown(null, () => redis.kill('SIGKILL'), 12, 250);
    expect(mostQueued).toBeLessThanOrEqual(1);
    await redis.restart();
    await waitReady(client);
    await expectUp(2);
  });

  it('stopped (SIGSTOP): scrapes answer in time, up 0 (reason timeout), one read unanswered at most; fresh after SIGCONT', async () => {
    // Past the client's commandTimeout (1 s), when ioredis rejects the read but keeps the command
    // queued until Redis answers it.
    const mostQueued = await queuedWhileDown(1, () => redis.pause(), 14, 150);
    expect(mostQueued).toBe(1);
    await expectFailedReads('timeout');
    redis.resume();
    // Redis answers what it owes; the next scrape reads again.
    await waitFor(() => queued() === 0);
    await expectUp(2);
  });
});

async function waitReady(client: Redis): Promise<void> {
  await waitFor(() => client.status === 'ready');
}

async function waitFor(condition: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((r) => setTimeout(r, 20));
  }
}
