/**
 * A worker's close() drains: each running segment finishes its responder call in flight,
 * commits it and is handed back, so the worker that takes the job over runs no dispatch a second
 * time (before: 10 conversations on worker A, close(): 8 dispatches invoked on A and again on B).
 * Real redis-server and BullMQ; two workers in one process, sharing one memory store.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConversationQueue, createConversationWorker } from '../../src/fleet/index.ts';
import {
  ConversationOrchestrator,
  createMemoryStore,
  maxDispatches,
  roundRobin,
} from '../../src/index.ts';
import { waitFor } from '../helpers/fleet-workers.ts';
import { type RunningRedis, startRedis } from '../helpers/redis.ts';

let redis: RunningRedis;
beforeAll(async () => {
  redis = await startRedis();
}, 30_000);
afterAll(async () => {
  await redis?.stop();
});

describe('ConversationWorker.close() with dispatches running', () => {
  it('lets each finish and commit: the next worker invokes none of them again', async () => {
    const queueName = 'drain-no-repeat';
    const store = createMemoryStore();
    /** Every invocation: which worker ran it, its idempotency key and attempt. */
    const invoked: { worker: string; key: string; attempt: number }[] = [];
    const desks = (worker: string) =>
      new ConversationOrchestrator<number, number>({
        name: 'desks',
        store,
        responders: [
          {
            name: 'desk',
            respond: async (m, _s, context) => {
              invoked.push({ worker, key: context.idempotencyKey, attempt: context.attempt });
              await new Promise((resolve) => setTimeout(resolve, 150));
              return { sender: 'desk', content: m.content + 1 };
            },
          },
        ],
        turnPolicy: roundRobin(),
        projection: { initial: () => 0, fold: (sum, m) => sum + m.content },
        termination: maxDispatches(8),
      });
    const options = { connection: redis.url, queueName, store, concurrency: 10 };
    const a = createConversationWorker({ ...options, orchestrators: [desks('A')] });
    await a.ready();
    const producer = createConversationQueue({ connection: redis.url, queueName });
    for (let i = 0; i < 10; i++) {
      await producer.start('desks', { sender: 'user', content: 0 }, { conversationId: `d-${i}` });
    }
    // Every conversation under way on A, each in the middle of a call.
    await waitFor(
      () => invoked.length >= 20,
      30_000,
      () => `A invoked ${invoked.length}`,
    );
    await a.close({ timeoutMs: 5_000 });
    expect(a.stats().handedBack).toBeGreaterThanOrEqual(10);
    const b = createConversationWorker({ ...options, orchestrators: [desks('B')] });
    try {
      await b.ready();
      await waitFor(
        async () => {
          const all = await Promise.all(Array.from({ length: 10 }, (_, i) => store.get(`d-${i}`)));
          return all.every((c) => c?.status === 'ended');
        },
        60_000,
        () => `not all ended (${invoked.length} invocations)`,
      );
      const keys = new Map<string, string[]>();
      for (const i of invoked) keys.set(i.key, [...(keys.get(i.key) ?? []), i.worker]);
      const twice = [...keys].filter(([, workers]) => workers.length > 1);
      expect(twice).toEqual([]);
      expect(keys.size).toBe(80); // 10 conversations x 8 dispatches, each invoked once
      expect(invoked.every((i) => i.attempt === 1)).toBe(true);
      expect(invoked.some((i) => i.worker === 'B')).toBe(true);
    } finally {
      await b.close({ timeoutMs: 2_000 });
      await producer.close();
    }
  }, 120_000);
});
