/**
 * A worker's `close()` on a real redis-server, in a process of its own: once it resolves no timer
 * and no connection of the worker is left, so the process exits by itself, also when a responder
 * ignores its abort signal past the drain bound; and no connection error is reported after it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Queue } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createConversationQueue } from '../../src/fleet/index.ts';
import { outputOf } from '../helpers/child-output.ts';
import { waitFor } from '../helpers/fleet-workers.ts';
import { type RunningRedis, startRedis } from '../helpers/redis.ts';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');
let redis: RunningRedis;
const children: ChildProcess[] = [];

beforeAll(async () => {
  redis = await startRedis();
}, 30_000);

afterAll(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  await redis?.stop();
});

interface Drained {
  /** The child's exit code, or `'hung'` when it was still running 30 s after `close()` resolved. */
  readonly exit: number | string | null;
  readonly stats: { handedBack: number };
  /** Whether the child's event loop emptied (`beforeExit`) rather than being ended. */
  readonly emptied: boolean;
  /** The fleet events printed after `close()` resolved. */
  readonly eventsAfterClose: { type: string }[];
}

/** Starts a closing worker, gives it one conversation, and waits for the process to end. */
async function drainOnce(queueName: string, env: Record<string, string>): Promise<Drained> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', join(ROOT, 'test/fixtures/fleet-closing-worker.ts')],
    {
      cwd: ROOT,
      env: { ...process.env, REDIS_URL: redis.url, QUEUE: queueName, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  const output = outputOf(child);
  const exited = new Promise<number | string | null>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal)),
  );
  const gone = () => child.exitCode !== null || child.signalCode !== null;
  const what = () => `the closing worker (stdout: ${output.out}, stderr: ${output.err})`;
  await waitFor(() => output.out.includes('READY\n'), 60_000, what, gone);
  const producer = createConversationQueue({ connection: redis.url, queueName });
  await producer.start('stuck', { sender: 'user', content: 1 }, { conversationId: 'stuck-1' });
  await producer.close();
  await waitFor(() => output.out.includes('CLOSED '), 60_000, what, gone);
  // Not a speed check: a worker that leaves a timer or a socket behind never exits at all.
  const exit = await Promise.race([
    exited,
    new Promise<string>((resolve) => setTimeout(() => resolve('hung'), 30_000)),
  ]);
  if (exit === 'hung') child.kill('SIGKILL');
  const lines = output.out.split('\n');
  const closedAt = lines.findIndex((l) => l.startsWith('CLOSED '));
  const line = (prefix: string) => lines.find((l) => l.startsWith(prefix))?.slice(prefix.length);
  return {
    exit,
    stats: JSON.parse(line('CLOSED ') as string),
    emptied: lines.includes('EMPTY'),
    eventsAfterClose: lines
      .slice(closedAt + 1)
      .filter((l) => l.startsWith('EVENT '))
      .map((l) => JSON.parse(l.slice(6))),
  };
}

describe('ConversationWorker.close()', () => {
  it('hands a running segment back and leaves nothing behind, so the process exits by itself', async () => {
    // Its responder waits for its abort: the drain lets it run for DRAIN_MS, then cuts it.
    const drained = await drainOnce('close-honour', { STUCK: '0', DRAIN_MS: '2000' });
    expect(drained).toEqual({ exit: 0, stats: drained.stats, emptied: true, eventsAfterClose: [] });
    // Its one job, handed back (once more when BullMQ's fetch under way as the drain began takes
    // it again: it goes straight back to wait), and waiting for another worker.
    expect(drained.stats.handedBack).toBeGreaterThanOrEqual(1);
    expect(drained.stats.handedBack).toBeLessThanOrEqual(2);
    const bull = new Queue('close-honour', { connection: { url: redis.url } });
    expect(await bull.getJobCounts('wait', 'active')).toEqual({ wait: 1, active: 0 });
    await bull.close();
  }, 120_000);

  it('closes anyway past timeoutMs when a segment ignores its abort, and the process still exits by itself', async () => {
    const drained = await drainOnce('close-stuck', { STUCK: '1', DRAIN_MS: '1000' });
    expect(drained).toEqual({ exit: 0, stats: drained.stats, emptied: true, eventsAfterClose: [] });
    expect(drained.stats.handedBack).toBe(0);
    // Its job is BullMQ's to take back once its lock lapses: it is still active, not lost.
    const bull = new Queue('close-stuck', { connection: { url: redis.url } });
    expect(await bull.getJobCounts('wait', 'active')).toEqual({ wait: 0, active: 1 });
    await bull.close();
  }, 120_000);
});
