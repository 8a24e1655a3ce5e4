/**
 * The fleet's rows (skipped when /usr/bin/redis-server is missing): its own redis-server on a free
 * port (AOF, appendfsync everysec), the Redis store, worker processes of this file
 * (`node bench/fleet.js worker`).
 * - Conversations per second on 1 and on 2 worker processes: `BENCH_FLEET_CONVERSATIONS` (1,000)
 *   conversations in flight at once, 3 dispatches each, every responder a 100 ms wait like a
 *   model call. It must scale while the CPU is not saturated.
 * - From `start()` to the first dispatch, against a bare BullMQ no-op job's round trip (add ->
 *   processed -> the producer sees it completed) in the same run, one at a time, alternating,
 *   medians (target: within 1.5x).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Queue, QueueEvents, Worker } from 'bullmq';
import { createConversationQueue, createConversationWorker } from '../src/fleet/index.ts';
import {
  ConversationOrchestrator,
  type ConversationStore,
  type Message,
  roundRobin,
  stopWhen,
} from '../src/index.ts';
import { createRedisStore } from '../src/stores/redis/index.ts';
import { hasRedisServer, REDIS_SERVER, startRedis } from '../test/helpers/redis.ts';

const CONVERSATIONS = Number(process.env.BENCH_FLEET_CONVERSATIONS ?? 1_000);
const LATENCY_ROUNDS = Number(process.env.BENCH_FLEET_ROUNDS ?? 40);
const RESPONDER_MS = 100;

async function openStore(url: string): Promise<ConversationStore> {
  return createRedisStore({ url });
}

interface Three {
  readonly turns: number;
}

/** Three 100 ms dispatches; `onDispatch` hears each responder call. */
function threeTurns(store: ConversationStore, onCall?: (id: string) => void) {
  return new ConversationOrchestrator<Three, number>({
    name: 'bench',
    responders: ['a', 'b', 'c'].map((name) => ({
      name,
      async respond(_m: Message<number>, state) {
        onCall?.(state.conversationId);
        await new Promise((r) => setTimeout(r, RESPONDER_MS));
        return { sender: name, content: state.projection.turns };
      },
    })),
    turnPolicy: roundRobin(),
    projection: { initial: () => ({ turns: 0 }), fold: (s) => ({ turns: s.turns + 1 }) },
    termination: stopWhen((s) => s.projection.turns >= 3, 'done'),
    store,
  });
}

/** A worker process: `node bench/fleet.js worker <url> <queue>`; prints READY, drains on SIGTERM. */
async function workerMain(url: string, queueName: string): Promise<void> {
  const store = await openStore(url);
  const worker = createConversationWorker({
    connection: url,
    queueName,
    store,
    orchestrators: [threeTurns(store)],
    concurrency: CONVERSATIONS,
    onEvent: () => undefined,
  });
  await worker.ready(10_000);
  process.stdout.write('READY\n');
  process.once('SIGTERM', async () => {
    await worker.close();
    await store.close();
    process.exit(0);
  });
}

function spawnWorkers(url: string, queueName: string, n: number): Promise<ChildProcess[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const child = spawn(
        process.execPath,
        [fileURLToPath(import.meta.url), 'worker', url, queueName],
        {
          stdio: ['ignore', 'pipe', 'inherit'],
        },
      );
      await new Promise<void>((resolve, reject) => {
        let out = '';
        child.stdout?.on('data', (c: Buffer) => {
          out += c.toString();
          if (out.includes('READY')) resolve();
        });
        child.once('exit', () => reject(new Error(`bench worker exited: ${out}`)));
      });
      return child;
    }),
  );
}

async function stopWorkers(children: readonly ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(async (c) => {
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await exited;
    }),
  );
}

async function throughput(url: string, store: ConversationStore, workers: number): Promise<number> {
  const queueName = `throughput-${workers}`;
  const children = await spawnWorkers(url, queueName, workers);
  const queue = createConversationQueue({ connection: url, queueName });
  const ids = Array.from({ length: CONVERSATIONS }, (_, i) => `w${workers}-${i}`);
  const started = performance.now();
  await Promise.all(
    ids.map((id) => queue.start('bench', { sender: 'user', content: 0 }, { conversationId: id })),
  );
  // Ids end in roughly start order: walk a cursor over them.
  let cursor = 0;
  while (cursor < ids.length) {
    if ((await store.get(ids[cursor] as string))?.status === 'ended') cursor += 1;
    else await new Promise((r) => setTimeout(r, 20));
  }
  const seconds = (performance.now() - started) / 1000;
  await queue.close();
  await stopWorkers(children);
  return CONVERSATIONS / seconds;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
}

async function latency(url: string, store: ConversationStore): Promise<[number, number]> {
  let firstCall: ((id: string) => void) | undefined;
  const orchestrator = threeTurns(store, (id) => firstCall?.(id));
  const worker = createConversationWorker({
    connection: url,
    queueName: 'latency',
    store,
    orchestrators: [orchestrator],
    onEvent: () => undefined,
  });
  await worker.ready();
  const queue = createConversationQueue({ connection: url, queueName: 'latency' });
  const connection = { url, maxRetriesPerRequest: null };
  const bare = new Queue('bare', { connection });
  const bareWorker = new Worker('bare', async () => undefined, { connection });
  const events = new QueueEvents('bare', { connection });
  await Promise.all([bare.waitUntilReady(), bareWorker.waitUntilReady(), events.waitUntilReady()]);
  const ours: number[] = [];
  const theirs: number[] = [];
  for (let round = -3; round < LATENCY_ROUNDS; round++) {
    const id = `latency-${round}`;
    const t0 = performance.now();
    const dispatched = new Promise<void>((resolve) => {
      firstCall = (seen) => {
        if (seen === id) resolve();
      };
    });
    await queue.start('bench', { sender: 'user', content: 0 }, { conversationId: id });
    await dispatched;
    const t1 = performance.now();
    const job = await bare.add('noop', {});
    await job.waitUntilFinished(events);
    const t2 = performance.now();
    if (round >= 0) {
      ours.push(t1 - t0);
      theirs.push(t2 - t1);
    }
  }
  await Promise.all([
    queue.close(),
    worker.close(),
    bareWorker.close(),
    bare.close(),
    events.close(),
  ]);
  return [median(ours), median(theirs)];
}

export async function fleetTables(): Promise<void> {
  console.log('\n### Fleet (BullMQ workers, Redis store)\n');
  if (!hasRedisServer()) {
    console.log(`(skipped: no ${REDIS_SERVER})`);
    return;
  }
  const redis = await startRedis({ aof: true, appendfsync: 'everysec' });
  const store = await openStore(redis.url);
  try {
    const one = await throughput(redis.url, store, 1);
    const two = await throughput(redis.url, store, 2);
    console.log(
      `| ${CONVERSATIONS.toLocaleString('en')} conversations in flight, 3 dispatches of ${RESPONDER_MS} ms | conversations/s |`,
    );
    console.log('|---|---:|');
    console.log(`| 1 worker | ${one.toFixed(0)} |`);
    console.log(`| 2 workers | ${two.toFixed(0)} (${(two / one).toFixed(2)}x) |`);
    const [ours, theirs] = await latency(redis.url, store);
    console.log('\n| one at a time, medians | ms |');
    console.log('|---|---:|');
    console.log(
      `| start() to the first dispatch | ${ours.toFixed(2)} (${(ours / theirs).toFixed(2)}x) |`,
    );
    console.log(`| bare BullMQ no-op job, add to completed seen | ${theirs.toFixed(2)} |`);
  } finally {
    await store.close();
    await redis.stop();
  }
}

if (process.argv[2] === 'worker') {
  await workerMain(process.argv[3] as string, process.argv[4] as string);
} else if (process.argv[1] === fileURLToPath(import.meta.url)) {
  await fleetTables();
  process.exit(0);
}
