/**
 * Worker processes for the fleet tests: `node --import tsx test/fixtures/fleet-worker.ts` with an
 * environment, its stdout read line by line (READY, EVENT, STATS), signals sent by pid; and
 * `useFleet()`, the setup the fleet's process tests share (a redis-server, a Redis store on it, a
 * folder for the invocation logs, workers killed after the file).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll } from 'vitest';
import type { ConversationWorkerStats } from '../../src/fleet/index.ts';
import type { ConversationStore } from '../../src/index.ts';
import { createRedisStore } from '../../src/stores/redis/index.ts';
import type { Invocation } from '../fixtures/fleet-app.ts';
import { outputOf } from './child-output.ts';
import { type RedisOptions, type RunningRedis, startRedis } from './redis.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

export interface WorkerProcess {
  readonly pid: number;
  readonly output: () => string;
  readonly ready: Promise<void>;
  signal(signal: NodeJS.Signals): void;
  /** SIGTERM (a drain), then the stats it printed. */
  stop(): Promise<ConversationWorkerStats>;
  readonly exited: Promise<void>;
}

export function spawnWorker(env: Record<string, string>): WorkerProcess {
  const child: ChildProcess = spawn(
    process.execPath,
    ['--import', 'tsx', join(ROOT, 'test/fixtures/fleet-worker.ts')],
    { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const output = outputOf(child);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = waitFor(
    () => output.out.includes('READY\n'),
    60_000,
    () => `worker ${child.pid} ready (stdout: ${output.out}, stderr: ${output.err})`,
    () => child.exitCode !== null || child.signalCode !== null,
  );
  return {
    pid: child.pid as number,
    output: () => `${output.out}\n--- stderr ---\n${output.err}`,
    ready,
    exited,
    signal: (signal) => {
      if (child.exitCode === null && child.signalCode === null)
        process.kill(child.pid as number, signal);
    },
    async stop() {
      child.kill('SIGTERM');
      await exited;
      const line = output.out.split('\n').find((l) => l.startsWith('STATS '));
      if (line === undefined)
        throw new Error(`worker ${child.pid} printed no stats: ${output.out}${output.err}`);
      return JSON.parse(line.slice(6)) as ConversationWorkerStats;
    },
  };
}

/** Polls `done` every 100 ms; rejects naming `what` past `timeoutMs` or when `failed` says so. */
export async function waitFor(
  done: () => boolean | Promise<boolean>,
  timeoutMs: number,
  what: () => string | Promise<string>,
  failed: () => boolean = () => false,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await done()) return;
    if (failed()) throw new Error(`Gave up waiting: ${await what()}`);
    if (Date.now() > deadline) {
      throw new Error(`Timed out after ${timeoutMs} ms waiting for ${await what()}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** The invocations logged so far (whole lines only). */
export function readInvocations(file: string): Invocation[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.endsWith('}'))
    .map((l) => JSON.parse(l) as Invocation);
}

/** The invocations by idempotency key, each key's in the order they ran. */
export function byKey(invocations: readonly Invocation[]): Map<string, Invocation[]> {
  const keys = new Map<string, Invocation[]>();
  for (const i of invocations) keys.set(i.key, [...(keys.get(i.key) ?? []), i]);
  return keys;
}

/** What `useFleet()` sets up. */
export interface FleetSetupOptions {
  /** The redis-server's persistence. */
  readonly redis: RedisOptions;
  /** The temporary folder's name prefix (under the OS's tmpdir). */
  readonly dirPrefix: string;
  /** Each worker's `CONCURRENCY`. */
  readonly concurrency: number;
  /** Each worker's `RESPONDER_MS`: how long a responder takes. */
  readonly responderMs: number;
  /** When false (no redis-server here: the file's tests are skipped), nothing is started. */
  readonly enabled?: boolean;
}

/** A fleet's shared parts, there once `beforeAll` has run. */
export interface FleetSetup {
  readonly redis: RunningRedis;
  /** A Redis store on `redis`, the workers' (to read how conversations stand). */
  readonly store: ConversationStore;
  /** A temporary folder for the invocation logs, removed after the file. */
  readonly dir: string;
  /**
   * Starts a worker process on `queue`, logging invocations to `log`: 2 s store lease and job
   * lock, 1 s stalled checks, then `extra`. SIGKILLed after the file if still running.
   */
  worker(queue: string, log: string, extra?: Record<string, string>): WorkerProcess;
  /** Whether the store says every one of `ids` has ended. */
  allEnded(ids: readonly string[]): Promise<boolean>;
}

/**
 * The setup of the fleet's process tests, registered on the calling file: a redis-server, a Redis
 * store on it and a temporary folder before all its tests; after them its workers SIGKILLed and
 * everything stopped and removed.
 */
export function useFleet(options: FleetSetupOptions): FleetSetup {
  let redis: RunningRedis | undefined;
  let store: ConversationStore | undefined;
  let dir: string | undefined;
  const workers: WorkerProcess[] = [];
  const started = <T>(what: string, value: T | undefined): T => {
    if (value === undefined) throw new Error(`The fleet's ${what} is not started (beforeAll)`);
    return value;
  };

  beforeAll(async () => {
    if (options.enabled === false) return;
    redis = await startRedis(options.redis);
    dir = mkdtempSync(join(tmpdir(), options.dirPrefix));
    store = createRedisStore({ url: redis.url });
  }, 60_000);

  afterAll(async () => {
    for (const w of workers) w.signal('SIGKILL');
    await Promise.all(workers.map((w) => w.exited));
    await store?.close();
    await redis?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  return {
    get redis() {
      return started('redis-server', redis);
    },
    get store() {
      return started('store', store);
    },
    get dir() {
      return started('folder', dir);
    },
    worker(queue, log, extra = {}) {
      const w = spawnWorker({
        REDIS_URL: started('redis-server', redis).url,
        QUEUE: queue,
        LOG: log,
        CONCURRENCY: String(options.concurrency),
        RESPONDER_MS: String(options.responderMs),
        LEASE_MS: '2000',
        LOCK_MS: '2000',
        STALLED_MS: '1000',
        ...extra,
      });
      workers.push(w);
      return w;
    },
    async allEnded(ids) {
      const s = started('store', store);
      for (const id of ids) if ((await s.get(id))?.status !== 'ended') return false;
      return true;
    },
  };
}
