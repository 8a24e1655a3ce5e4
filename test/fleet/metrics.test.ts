/**
 * The queue metrics of a worker (`createConversationWorker({ registry })`) on a real redis-server
 * and real BullMQ workers: a worker SIGKILLed mid-work leaves stalled jobs that the surviving
 * worker's BullMQ finds and counts; each job's wait is observed; the queue-wide values (BullMQ's
 * job counts, the oldest waiting job) are read from Redis at scrape time and a scrape never waits
 * on a Redis that does not answer. Every exposition is clean by `promtool check metrics`.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createConversationQueue, createConversationWorker } from '../../src/fleet/index.ts';
import { createRedisStore } from '../../src/stores/redis/index.ts';
import { deskInput, desks } from '../fixtures/fleet-app.ts';
import { readInvocations, useFleet, waitFor } from '../helpers/fleet-workers.ts';
import { hasRedisServer, startRedis } from '../helpers/redis.ts';

const fleet = useFleet({
  redis: { aof: true },
  dirPrefix: 'co-fleet-metrics-',
  concurrency: 20,
  responderMs: 50,
  enabled: hasRedisServer(),
});

/** The value of `name{labels}` in an exposition (labels in any order), or undefined. */
function sample(text: string, name: string, labels: Record<string, string>): number | undefined {
  for (const line of text.split('\n')) {
    const match = /^([a-zA-Z_:][\w:]*)(?:\{([^}]*)\})? (\S+)/.exec(line);
    if (match?.[1] !== name) continue;
    const have = new Map(
      [...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]] as const),
    );
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) return Number(match[3]);
  }
  return undefined;
}

/** promtool's one complaint about BullMQ's own name: a gauge named `_count`, kept as BullMQ names it. */
const BULLMQ_NAME =
  'bullmq_job_count non-histogram and non-summary metrics should not have "_count" suffix\n';

/** What `promtool check metrics` says, less its complaint about BullMQ's name. */
function promtool(text: string): string {
  const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  return (lint.stdout + lint.stderr).replace(BULLMQ_NAME, '');
}

describe.skipIf(!hasRedisServer())('the queue metrics of a worker', () => {
  it("count the stalled jobs of a SIGKILLed worker and every job's wait, and read the queue from Redis", async () => {
    const log = join(fleet.dir, 'stalled.log');
    const victim = fleet.worker('metered', log, { METRICS: '1' });
    await victim.ready;
    const queue = createConversationQueue({ connection: fleet.redis.url, queueName: 'metered' });
    const ids = Array.from({ length: 30 }, (_, n) => `metered-${n}`);
    for (const [n, id] of ids.entries()) {
      await queue.start('desks', deskInput(n), { conversationId: id });
    }
    await waitFor(
      () => readInvocations(log).length >= 20,
      60_000,
      () => '20 invocations on the first worker',
    );
    victim.signal('SIGKILL');
    await victim.exited;
    const survivor = fleet.worker('metered', log, { METRICS: '1' });
    await survivor.ready;
    await waitFor(
      () => fleet.allEnded(ids),
      120_000,
      () => 'every conversation to end',
    );
    await queue.close();
    const stats = await survivor.stop();
    const line = survivor
      .output()
      .split('\n')
      .find((l) => l.startsWith('METRICS '));
    expect(line, survivor.output()).toBeDefined();
    const text = JSON.parse((line as string).slice(8)) as string;
    const q = { queue: 'metered' };
    // The dead worker held jobs: the survivor's BullMQ found them stalled and took them back.
    expect(sample(text, 'orchestrator_queue_jobs_stalled_total', q)).toBeGreaterThan(0);
    // Every job the survivor took had its wait observed (its segments, plus held/handed-back).
    const waited = sample(text, 'orchestrator_queue_job_wait_seconds_count', q) ?? 0;
    expect(waited).toBeGreaterThanOrEqual(stats.ended);
    expect(sample(text, 'orchestrator_queue_job_wait_seconds_bucket', { ...q, le: '+Inf' })).toBe(
      waited,
    );
    // The queue as Redis holds it once everything ended: nothing waits, nothing is active.
    expect(sample(text, 'bullmq_job_count', { ...q, state: 'waiting' })).toBe(0);
    expect(sample(text, 'bullmq_job_count', { ...q, state: 'active' })).toBe(0);
    expect(sample(text, 'orchestrator_queue_oldest_waiting_seconds', q)).toBe(0);
    expect(promtool(text)).toBe('');
  }, 240_000);

  it('reads the oldest waiting job at scrape time, and a scrape never waits on a Redis that does not answer', async () => {
    const own = await startRedis();
    const registry = new Registry();
    const local = createRedisStore({ url: own.url });
    // One slow conversation at a time: the others wait in the queue.
    const worker = createConversationWorker({
      connection: own.url,
      queueName: 'backlog',
      store: local,
      orchestrators: [desks({ store: local, responderMs: 400, leaseMs: 2_000 })],
      concurrency: 1,
      registry,
      metricsTimeoutMs: 300,
      onEvent: () => {},
    });
    const queue = createConversationQueue({ connection: own.url, queueName: 'backlog' });
    try {
      await worker.ready(10_000);
      for (let n = 0; n < 4; n++) {
        await queue.start('desks', deskInput(n), { conversationId: `backlog-${n}` });
      }
      await new Promise((r) => setTimeout(r, 1_500));
      const text = await registry.metrics();
      const q = { queue: 'backlog' };
      expect(sample(text, 'bullmq_job_count', { ...q, state: 'active' })).toBe(1);
      expect(sample(text, 'bullmq_job_count', { ...q, state: 'waiting' })).toBeGreaterThanOrEqual(
        2,
      );
      const oldest = sample(text, 'orchestrator_queue_oldest_waiting_seconds', q) ?? 0;
      expect(oldest).toBeGreaterThan(0.5);
      expect(oldest).toBeLessThan(60);
      expect(promtool(text)).toBe('');
      // Redis stops answering (CLIENT PAUSE: every command of every client waits 3 s): the
      // scrape answers within the timeout, without the queue-wide series, and keeps this
      // worker's own.
      const admin = new Redis(own.url);
      await admin.call('CLIENT', 'PAUSE', '3000', 'ALL');
      admin.disconnect();
      await new Promise((r) => setTimeout(r, 1_100));
      const started = Date.now();
      const paused = await registry.metrics();
      expect(Date.now() - started).toBeLessThan(2_000);
      expect(sample(paused, 'bullmq_job_count', { ...q, state: 'waiting' })).toBeUndefined();
      expect(sample(paused, 'orchestrator_queue_oldest_waiting_seconds', q)).toBeUndefined();
      expect(sample(paused, 'orchestrator_queue_jobs_stalled_total', q)).toBe(0);
      expect(promtool(paused)).toBe('');
    } finally {
      await queue.close();
      await worker.close({ timeoutMs: 2_000 });
      await local.close();
      await own.stop();
    }
    // close() took them off the registry.
    expect(await registry.metrics()).not.toContain('bullmq_job_count');
  }, 120_000);
});
