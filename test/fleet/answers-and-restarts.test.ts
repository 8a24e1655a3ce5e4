/**
 * Review 4: a hostile review of the fleet (conversation-orchestrator/bullmq). Each test asserts a
 * promise of docs/fleet.md and fails now on purpose, naming the defect it shows. Real redis-server,
 * real BullMQ; faults are injected where the fleet's own tests inject them (a store wrapper, an
 * ioredis or BullMQ prototype, a SIGSTOPped or SIGKILLed process).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createConversationQueue,
  createConversationWorker,
  PAYLOAD_FORMAT,
} from '../../src/fleet/index.ts';
import {
  ConversationExistsError,
  type ConversationStore,
  createMemoryStore,
} from '../../src/index.ts';
import { createRedisStore } from '../../src/stores/redis/index.ts';
import { approval, desks, type Invocation } from '../fixtures/fleet-app.ts';
import { waitFor } from '../helpers/fleet-workers.ts';
import { type RunningRedis, startRedis } from '../helpers/redis.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const person = { sender: 'person', content: 1 };

let redis: RunningRedis;
let admin: Redis;
/** The redis-server's pid while a test holds it SIGSTOPped: continued again whatever happens. */
let stopped: number | undefined;
beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url);
}, 30_000);
afterAll(async () => {
  if (stopped !== undefined) process.kill(stopped, 'SIGCONT');
  admin?.disconnect();
  await redis?.stop();
});

/** Waits (bounded) for `check`; answers whether it came true. */
async function eventually(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(50);
  }
  return check();
}

/** A worker of `queueName` on this file's Redis, running `app` on `store`, its events ignored. */
function quietWorker(queueName: string, store: ConversationStore, app: ReturnType<typeof desks>) {
  return createConversationWorker({
    connection: redis.url,
    queueName,
    store,
    orchestrators: [app],
    onEvent: () => undefined,
  });
}

describe('review 4: the fleet', () => {
  // Was a defect: the segment mark holds the job id, not the run's own token. A worker paused past its
  // job lock and its store lease (a zombie) comes back, is fenced, and its `finally` drops the mark
  // of the worker that took over the same job (`start.{id}`): an answer sent as the new segment's
  // suspension lands in the store is told { enqueued: false } and is lost.
  it("enqueues a fast answer to a taken-over segment's suspension after the paused worker it replaced comes back", async () => {
    const queueName = 'r4-zombie';
    const inner = createMemoryStore();
    let frozen = false;
    let thaw: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => {
      thaw = resolve;
    });
    // Worker A's store: every call hangs while A is "paused".
    const storeA = new Proxy(inner, {
      get(target, prop) {
        const value = Reflect.get(target, prop);
        if (typeof value !== 'function') return value;
        return async (...args: unknown[]) => {
          if (frozen) await gate;
          return value.apply(target, args);
        };
      },
    }) as ConversationStore;
    const producer = createConversationQueue({ connection: redis.url, queueName });
    const answers: Promise<{ enqueued: boolean }>[] = [];
    const storeB = Object.assign(Object.create(inner) as ConversationStore, {
      commit: async (...args: Parameters<ConversationStore['commit']>) => {
        const outcome = await inner.commit(...args);
        if (args[0].status === 'suspended') answers.push(producer.resume('z-1', { input: person }));
        return outcome;
      },
    });
    const log: string[] = [];
    const app = (worker: string, store: ConversationStore, responderMs: number) =>
      approval({
        store,
        responderMs,
        leaseMs: 500,
        log: (i: Invocation) => log.push(`${worker} ${i.responder}`),
      });
    const common = {
      connection: redis.url,
      queueName,
      lockDurationMs: 1_000,
      stalledIntervalMs: 300,
    };
    const a = createConversationWorker({
      ...common,
      store: storeA,
      concurrency: 1,
      orchestrators: [app('A', storeA, 3_000)],
      onEvent: () => undefined,
    });
    let b: ReturnType<typeof createConversationWorker> | undefined;
    try {
      await a.ready();
      await producer.start('approval', { sender: 'user', content: 4 }, { conversationId: 'z-1' });
      expect(await eventually(async () => log.includes('A clerk'), 10_000)).toBe(true);
      // A pauses: its store calls hang and its job lock lapses.
      frozen = true;
      await admin.del(`bull:${queueName}:start.z-1:lock`);
      b = createConversationWorker({
        ...common,
        store: storeB,
        orchestrators: [app('B', storeB, 1_500)],
        onEvent: () => undefined,
      });
      await b.ready();
      expect(await eventually(async () => log.includes('B clerk'), 15_000)).toBe(true);
      // A comes back while B's segment runs: A is fenced.
      thaw();
      expect(await eventually(async () => a.stats().fenced === 1, 5_000)).toBe(true);
      expect(await eventually(async () => answers.length === 1, 15_000)).toBe(true);
      expect(await answers[0]).toEqual({ enqueued: true, suspension: expect.any(Number) });
      expect(
        await eventually(async () => (await inner.get('z-1'))?.status === 'ended', 10_000),
      ).toBe(true);
    } finally {
      thaw();
      await Promise.all([a.close({ timeoutMs: 1_000 }), b?.close({ timeoutMs: 1_000 })]);
      await producer.close();
    }
  }, 60_000);

  // Was a defect: a worker SIGKILLed after the store committed a suspension and before it
  // recorded it leaves its segment mark; with the default job lock (10 s) and stalled interval
  // (5 s) the job comes back after resume()'s poll (timeoutMs, 5 s) has given up: an answer sent
  // as the store shows the suspension was told { enqueued: false }. A producer given the store
  // (the `store` option) reads the suspension from it.
  it('enqueues an answer to a suspension the store holds when the worker that ran the segment was killed before recording it', async () => {
    const queueName = 'r4-killed';
    const store = createRedisStore({ url: redis.url });
    let child: ChildProcess | undefined;
    let healthy: ReturnType<typeof createConversationWorker> | undefined;
    const producer = createConversationQueue({ connection: redis.url, queueName, store });
    try {
      child = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          '--import',
          join(ROOT, 'test/fixtures/review4-die-before-record.ts'),
          join(ROOT, 'test/fixtures/fleet-worker.ts'),
        ],
        {
          cwd: ROOT,
          env: {
            ...process.env,
            REDIS_URL: redis.url,
            QUEUE: queueName,
            ORCHESTRATORS: 'approval',
            LOCK_MS: '10000',
            STALLED_MS: '5000',
            LEASE_MS: '10000',
          },
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let out = '';
      child.stdout?.on('data', (c: Buffer) => {
        out += c.toString();
      });
      const exited = new Promise((resolve) =>
        child?.once('exit', (_code, signal) => resolve(signal)),
      );
      await waitFor(
        () => out.includes('READY\n'),
        60_000,
        () => `the dying worker (${out})`,
      );
      await producer.start('approval', { sender: 'user', content: 4 }, { conversationId: 'k-1' });
      expect(await exited).toBe('SIGKILL');
      expect((await store.get('k-1'))?.status).toBe('suspended');
      // A healthy worker with the documented defaults takes over the fleet.
      healthy = quietWorker(queueName, store, approval({ store, responderMs: 20 }));
      await healthy.ready();
      // Without the store, a producer says nothing is waiting (the marker was never recorded):
      // what docs/fleet.md says of store-less producers.
      const storeless = createConversationQueue({
        connection: redis.url,
        queueName,
        timeoutMs: 200,
      });
      expect(await storeless.resume('k-1', { input: person })).toEqual({ enqueued: false });
      await storeless.close();
      const waiting = await store.get('k-1');
      expect(waiting?.status).toBe('suspended');
      expect(await producer.resume('k-1', { input: person })).toEqual({
        enqueued: true,
        suspension: waiting?.seq,
      });
      expect(
        await eventually(async () => (await store.get('k-1'))?.status === 'ended', 30_000),
      ).toBe(true);
    } finally {
      child?.kill('SIGKILL');
      await healthy?.close({ timeoutMs: 1_000 });
      await producer.close();
      await store.close();
    }
  }, 90_000);

  // Was a defect: start() gives the id back (DEL of its claim) on any error after the add, also when the
  // add landed and only the claim's extension timed out (Redis stalled longer than timeoutMs).
  // The job is in and the id free: another producer's start() resolves, and BullMQ's jobId dedupe
  // drops its input (the conversation runs the input of the call that was told it failed).
  it('refuses a second start of an id whose first start rejected after its job was added', async () => {
    const queueName = 'r4-pexpire';
    const pid = Number(/process_id:(\d+)/.exec(await admin.info('server'))?.[1]);
    const add = Queue.prototype.add;
    let armed = true;
    Queue.prototype.add = async function (this: Queue, ...args: Parameters<Queue['add']>) {
      const job = await add.apply(this, args);
      if (armed) {
        // Redis stalls for 1 s right after answering the add.
        armed = false;
        process.kill(pid, 'SIGSTOP');
        stopped = pid;
        setTimeout(() => {
          process.kill(pid, 'SIGCONT');
          stopped = undefined;
        }, 1_000);
      }
      return job;
    } as Queue['add'];
    const p1 = createConversationQueue({ connection: redis.url, queueName, timeoutMs: 500 });
    const p2 = createConversationQueue({ connection: redis.url, queueName, timeoutMs: 500 });
    try {
      const first = await p1
        .start('desks', { sender: 'user', content: 'A' }, { conversationId: 'px-1' })
        .then(
          () => 'resolved',
          (error: Error) => error.name,
        );
      Queue.prototype.add = add;
      await sleep(1_200);
      // Settled into a value at once: its rejection is not left unhandled while the job is read.
      const second = p2
        .start('desks', { sender: 'user', content: 'B' }, { conversationId: 'px-1' })
        .then(
          () => 'resolved',
          (error: unknown) => error,
        );
      const bull = new Queue(queueName, { connection: { url: redis.url } });
      const job = await bull.getJob('start.px-1');
      await bull.close();
      // The job that runs is the first call's.
      expect(job?.data.input).toEqual({ sender: 'user', content: 'A' });
      expect(first).toBe('RedisUnreachableError');
      expect(await second).toBeInstanceOf(ConversationExistsError);
    } finally {
      Queue.prototype.add = add;
      await p1.close();
      await p2.close();
    }
  }, 30_000);

  // Was a defect: parsePayload checks the format, kind, names and trace but not `input`; a job in our
  // format whose start input is not a message fails in the core with a TypeError, which the worker
  // retries with backoff a million times instead of failing the job once as `refused`.
  it('fails a job in our format whose input is not a message once, as refused', async () => {
    const queueName = 'r4-bad-input';
    const store = createMemoryStore();
    const worker = quietWorker(queueName, store, desks({ store, responderMs: 0 }));
    const bull = new Queue(queueName, { connection: { url: redis.url } });
    try {
      await worker.ready();
      const job = await bull.add(
        'start',
        {
          format: PAYLOAD_FORMAT,
          kind: 'start',
          orchestrator: 'desks',
          conversationId: 'bad-1',
          input: 42,
        },
        { attempts: 1_000_000, backoff: { type: 'conversation' } },
      );
      await eventually(async () => (await job.getState()) === 'failed', 3_000);
      expect(await job.getState()).toBe('failed');
      expect(worker.stats()).toMatchObject({ refused: 1, retried: 0 });
    } finally {
      await bull.close();
      await worker.close({ timeoutMs: 1_000 });
    }
  }, 30_000);

  // Was a defect: settle() (segment.ts) calls a failed resume 'suspended' whenever the store still
  // shows a suspension, also the very one the job answers: one transient store failure before the
  // answer is applied completes the resume job and drops the answer; every later resume() of that
  // suspension is deduped into the completed job (kept 24 h) and says { enqueued: true } for nothing.
  it("applies a person's answer whose resume segment met one transient store failure", async () => {
    const queueName = 'r4-transient';
    const inner = createMemoryStore();
    let failNextAcquire = false;
    const store = Object.assign(Object.create(inner) as ConversationStore, {
      acquire: async (...args: Parameters<ConversationStore['acquire']>) => {
        if (failNextAcquire) {
          failNextAcquire = false;
          throw new Error('connection reset by peer');
        }
        return inner.acquire(...args);
      },
    });
    const worker = quietWorker(queueName, store, approval({ store, responderMs: 0 }));
    const producer = createConversationQueue({ connection: redis.url, queueName });
    try {
      await worker.ready();
      await producer.start('approval', { sender: 'user', content: 4 }, { conversationId: 't-1' });
      expect(
        await eventually(
          async () => (await admin.exists(`bull:${queueName}:co:suspended:t-1`)) === 1,
          10_000,
        ),
      ).toBe(true);
      failNextAcquire = true;
      expect(await producer.resume('t-1', { input: person })).toEqual({
        enqueued: true,
        suspension: 3,
      });
      await eventually(async () => (await inner.get('t-1'))?.status === 'ended', 10_000);
      expect((await inner.get('t-1'))?.status).toBe('ended');
    } finally {
      await worker.close({ timeoutMs: 1_000 });
      await producer.close();
    }
  }, 30_000);
});
