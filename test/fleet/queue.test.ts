/**
 * The producer side of the fleet against a real redis-server: a conversation id is started once,
 * also when producers race; an unreachable Redis is named in a bounded error; a resume with no
 * recorded suspension enqueues nothing.
 */
import { spawnSync } from 'node:child_process';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createConversationQueue,
  createConversationWorker,
  PAYLOAD_FORMAT,
  RedisUnreachableError,
} from '../../src/fleet/index.ts';
import { ConversationExistsError, createMemoryStore } from '../../src/index.ts';
import { approval, desks } from '../fixtures/fleet-app.ts';
import { freePort } from '../helpers/prometheus.ts';
import { type RunningRedis, startRedis } from '../helpers/redis.ts';

let redis: RunningRedis;
/** The redis-server's pid while a test holds it `SIGSTOP`ped: continued again whatever happens. */
let stopped: number | undefined;
beforeAll(async () => {
  redis = await startRedis({ aof: true, appendfsync: 'always' });
}, 30_000);
afterAll(async () => {
  if (stopped !== undefined) process.kill(stopped, 'SIGCONT');
  await redis?.stop();
});

/** Freezes the redis-server (`SIGSTOP`): its sockets stay open and nothing answers. */
async function freezeRedis(): Promise<number> {
  const admin = new Redis(redis.url);
  const info = await admin.info('server');
  admin.disconnect();
  const pid = Number(/process_id:(\d+)/.exec(info)?.[1]);
  process.kill(pid, 'SIGSTOP');
  stopped = pid;
  return pid;
}

function thawRedis(pid: number): void {
  process.kill(pid, 'SIGCONT');
  stopped = undefined;
}

const input = { sender: 'user', content: { seed: 1 } };

describe('createConversationQueue', () => {
  it('refuses an id already started with ConversationExistsError', async () => {
    const queue = createConversationQueue({ connection: redis.url, queueName: 'q-once' });
    try {
      await queue.start('desks', input, { conversationId: 'c-1' });
      const second = queue.start('desks', input, { conversationId: 'c-1' });
      await expect(second).rejects.toBeInstanceOf(ConversationExistsError);
      await expect(second).rejects.toThrow('Conversation c-1 already exists');
      const bull = new Queue('q-once', { connection: { url: redis.url } });
      expect(await bull.getJobCounts('wait')).toEqual({ wait: 1 });
      const [job] = await bull.getJobs(['wait']);
      expect(job?.id).toBe('start.c-1');
      expect(job?.data).toEqual({
        format: PAYLOAD_FORMAT,
        kind: 'start',
        orchestrator: 'desks',
        conversationId: 'c-1',
        input,
        // The start call's claim on the id: tells its job from another call's.
        claim: expect.any(String),
      });
      await bull.close();
    } finally {
      await queue.close();
    }
  });

  it('starts an id once when 20 starts race from two producers', async () => {
    const a = createConversationQueue({ connection: redis.url, queueName: 'q-race' });
    const b = createConversationQueue({ connection: redis.url, queueName: 'q-race' });
    try {
      const settled = await Promise.allSettled(
        Array.from({ length: 20 }, (_, i) =>
          (i % 2 === 0 ? a : b).start(
            'desks',
            { sender: 'user', content: i },
            {
              conversationId: 'raced:1',
            },
          ),
        ),
      );
      expect(settled.filter((s) => s.status === 'fulfilled')).toHaveLength(1);
      const refused = settled.filter((s) => s.status === 'rejected');
      expect(refused).toHaveLength(19);
      for (const r of refused) expect(r.reason).toBeInstanceOf(ConversationExistsError);
      const bull = new Queue('q-race', { connection: { url: redis.url } });
      const jobs = await bull.getJobs(['wait']);
      // `:` is not allowed in BullMQ job ids: it becomes `%`.
      expect(jobs.map((j) => j.id)).toEqual(['start.raced%1']);
      await bull.close();
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('rejects within its bound, naming the server, when Redis cannot be reached', async () => {
    const port = await freePort();
    const queue = createConversationQueue({
      connection: `redis://:secret@127.0.0.1:${port}`,
      timeoutMs: 500,
    });
    try {
      const started = queue.start('desks', input, { conversationId: 'c-1' });
      await expect(started).rejects.toBeInstanceOf(RedisUnreachableError);
      await expect(started).rejects.toThrow(
        new RegExp(
          `^Could not reach Redis at redis://127\\.0\\.0\\.1:${port} within 500 ms: .*ECONNREFUSED`,
        ),
      );
      await expect(started).rejects.not.toThrow('secret');
    } finally {
      await queue.close();
    }
  });

  it('has a worker whose ready() rejects within its bound, naming the server, when Redis cannot be reached', async () => {
    const port = await freePort();
    const events: string[] = [];
    const worker = createConversationWorker({
      connection: `redis://127.0.0.1:${port}`,
      store: createMemoryStore(),
      orchestrators: [],
      onEvent: (e) => events.push(e.type),
    });
    try {
      const ready = worker.ready(500);
      await expect(ready).rejects.toBeInstanceOf(RedisUnreachableError);
      await expect(ready).rejects.toThrow(
        new RegExp(
          `^Could not reach Redis at redis://127\\.0\\.0\\.1:${port} within 500 ms: .*ECONNREFUSED`,
        ),
      );
      expect(events).toContain('redis_error');
      expect(worker.stats().redisErrors).toBeGreaterThan(0);
    } finally {
      await worker.close({ timeoutMs: 1_000 });
    }
  });

  it('rejects start() and resume() with RedisUnreachableError within its bound when a connected Redis stops answering', async () => {
    const queue = createConversationQueue({
      connection: redis.url,
      queueName: 'q-frozen',
      timeoutMs: 500,
    });
    await queue.start('desks', input, { conversationId: 'warm-1' });
    const pid = await freezeRedis();
    try {
      const expected = `Could not reach Redis at ${redis.url} within 500 ms: no answer`;
      const started = queue.start('desks', input, { conversationId: 'frozen-1' });
      await expect(started).rejects.toBeInstanceOf(RedisUnreachableError);
      await expect(started).rejects.toThrow(expected);
      const resumed = queue.resume('frozen-2', { input });
      await expect(resumed).rejects.toBeInstanceOf(RedisUnreachableError);
      await expect(resumed).rejects.toThrow(expected);
    } finally {
      thawRedis(pid);
      await queue.close();
    }
  }, 20_000);

  it("rejects a start with RedisUnreachableError, not the client's own error, when the connection drops under it", async () => {
    const queue = createConversationQueue({
      connection: redis.url,
      queueName: 'q-dropped',
      timeoutMs: 10_000,
    });
    try {
      await queue.start('desks', input, { conversationId: 'warm-1' });
      await freezeRedis();
      const started = queue.start('desks', input, { conversationId: 'dropped-1' });
      const settled = started.then(
        () => undefined,
        (error: unknown) => error,
      );
      await new Promise((resolve) => setTimeout(resolve, 200));
      // A SIGKILL reaches a stopped process: the server is gone with the command unanswered.
      await redis.kill('SIGKILL');
      stopped = undefined;
      const error = await settled;
      expect(error).toBeInstanceOf(RedisUnreachableError);
      expect((error as Error).message).toMatch(
        new RegExp(`^Could not reach Redis at ${redis.url} within 10000 ms: .+`),
      );
      // ioredis's own error is kept as the cause.
      expect((error as Error).cause).toBeInstanceOf(Error);
      expect((error as Error).cause).not.toBeInstanceOf(RedisUnreachableError);
    } finally {
      await queue.close();
      await redis.restart();
    }
  });

  it('rejects a call waiting for the connection as soon as the queue is closed', async () => {
    const port = await freePort();
    const queue = createConversationQueue({
      connection: `redis://127.0.0.1:${port}`,
      timeoutMs: 600_000,
    });
    const started = queue.start('desks', input, { conversationId: 'c-1' });
    const settled = started.then(
      () => undefined,
      (error: unknown) => error,
    );
    await queue.close();
    expect(await settled).toEqual(new Error('The conversation queue "conversations" is closed'));
  }, 20_000);

  it('enqueues a resume sent the moment the suspension lands in the store, before the worker has recorded it', async () => {
    const inner = createMemoryStore();
    const queueName = 'q-fast-answer';
    const producer = createConversationQueue({ connection: redis.url, queueName });
    const answers: Promise<{ enqueued: boolean }>[] = [];
    // The answer goes out as soon as the store holds the suspension: the worker has not yet had
    // the commit's answer, let alone recorded the suspension in Redis.
    const store = Object.assign(Object.create(inner) as typeof inner, {
      commit: async (...args: Parameters<typeof inner.commit>) => {
        const outcome = await inner.commit(...args);
        if (args[0].status === 'suspended') {
          answers.push(
            producer.resume(args[0].conversationId, { input: { sender: 'person', content: 1 } }),
          );
        }
        return outcome;
      },
    });
    const worker = createConversationWorker({
      connection: redis.url,
      queueName,
      store,
      orchestrators: [approval({ responderMs: 0, store })],
    });
    try {
      await worker.ready();
      const ids = ['fast-1', 'fast-2', 'fast-3'];
      for (const id of ids) {
        await producer.start('approval', { sender: 'user', content: 4 }, { conversationId: id });
      }
      const deadline = Date.now() + 20_000;
      while (answers.length < ids.length && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 20));
      }
      const outcomes = await Promise.all(answers);
      expect(outcomes.map((o) => o.enqueued)).toEqual([true, true, true]);
      // Each answer applied: every conversation ends.
      while (Date.now() < deadline) {
        const statuses = await Promise.all(ids.map(async (id) => (await inner.get(id))?.status));
        if (statuses.every((s) => s === 'ended')) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      for (const id of ids) expect((await inner.get(id))?.status).toBe('ended');
    } finally {
      await worker.close({ timeoutMs: 2_000 });
      await producer.close();
    }
  }, 40_000);

  it('lets an id be started again seconds after a producer was killed between taking it and adding its job', async () => {
    const child = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'test/fixtures/fleet-dying-producer.ts', redis.url, 'orphan-1', '400'],
      { encoding: 'utf8', timeout: 60_000 },
    );
    expect(child.signal, child.stderr).toBe('SIGKILL');
    const admin = new Redis(redis.url);
    try {
      const key = 'bull:q-dying:co:started:orphan-1';
      const ttl = await admin.pttl(key);
      // Taken for three times the producer's timeoutMs (1.2 s here), not for 30 days.
      expect(ttl).toBeGreaterThan(0);
      expect(ttl).toBeLessThanOrEqual(1_200);
      const queue = createConversationQueue({
        connection: redis.url,
        queueName: 'q-dying',
        timeoutMs: 400,
      });
      try {
        await expect(
          queue.start('desks', input, { conversationId: 'orphan-1' }),
        ).rejects.toBeInstanceOf(ConversationExistsError);
        await new Promise((r) => setTimeout(r, ttl + 100));
        await queue.start('desks', input, { conversationId: 'orphan-1' });
        // Once its job is in, the id is kept for the marker's lifetime (30 days).
        expect(await admin.pttl(key)).toBeGreaterThan(29 * 24 * 3600 * 1000);
        const bull = new Queue('q-dying', { connection: { url: redis.url } });
        expect(await bull.getJob('start.orphan-1')).toBeDefined();
        await bull.close();
      } finally {
        await queue.close();
      }
    } finally {
      admin.disconnect();
    }
  }, 90_000);

  it('has a worker refuse an orchestrator built without a store, naming it, before connecting', () => {
    const store = createMemoryStore();
    const make = () =>
      createConversationWorker({
        connection: redis.url,
        store,
        orchestrators: [desks({ responderMs: 0, store }), approval({ responderMs: 0 })],
      });
    expect(make).toThrow(TypeError);
    expect(make).toThrow(
      'Expected every orchestrator to be built with a `store` (the worker\'s), got "approval" built without one: a worker would lose its results',
    );
  });

  it("refuses a start or a resume whose conversation id breaks the core's rule, in the core's words", async () => {
    const long = 'a'.repeat(129);
    // The core's own refusals of the same ids, as a worker's run() or resume() would give them.
    const core = desks({ responderMs: 0 });
    const coreSays = async (id: string) =>
      ((await core.run(input as never, { conversationId: id }).catch((e: Error) => e)) as Error)
        .message;
    expect(await coreSays('-x')).toBe(
      'Expected `conversationId` to be an id of 1-128 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`, got `"-x"` (string)',
    );
    const queue = createConversationQueue({ connection: redis.url, queueName: 'q-ids' });
    try {
      await expect(queue.start('desks', input, { conversationId: '-x' })).rejects.toThrow(
        new TypeError(await coreSays('-x')),
      );
      await expect(queue.resume(long, { input })).rejects.toThrow(
        new TypeError(await coreSays(long)),
      );
    } finally {
      await queue.close();
    }
  });

  it('enqueues nothing for a resume when no suspension is recorded', async () => {
    const queue = createConversationQueue({ connection: redis.url, queueName: 'q-resume' });
    try {
      expect(await queue.resume('never-suspended', { input })).toEqual({ enqueued: false });
    } finally {
      await queue.close();
    }
  });

  it('refuses a start or a resume whose input is not a message, before enqueueing anything', async () => {
    const queue = createConversationQueue({ connection: redis.url, queueName: 'q-input' });
    try {
      await expect(queue.start('desks', 42, { conversationId: 'bad-1' })).rejects.toThrow(
        'Expected `input` to be a message ({ sender: string, content }), got number 42',
      );
      await expect(
        queue.start('desks', { sender: 'u', content: 1n }, { conversationId: 'bad-2' }),
      ).rejects.toThrow('JSON.stringify refuses');
      await expect(queue.resume('c2', { input: 42 as never })).rejects.toThrow(
        'Expected `input` to be a message',
      );
      // Nothing was enqueued and the ids were not taken: a correct start of the same id goes in.
      const bull = new Queue('q-input', { connection: { url: redis.url } });
      expect(await bull.getJobCounts('wait')).toEqual({ wait: 0 });
      await queue.start('desks', input, { conversationId: 'bad-1' });
      expect(await bull.getJobCounts('wait')).toEqual({ wait: 1 });
      await bull.close();
    } finally {
      await queue.close();
    }
  });
});
