/**
 * Worker processes for the fleet tests: `node --import tsx test/fixtures/fleet-worker.ts` with an
 * environment, its stdout read line by line (READY, EVENT, STATS), signals sent by pid.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ConversationWorkerStats } from '../../src/fleet/index.ts';
import type { Invocation } from '../fixtures/fleet-app.ts';

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
  let out = '';
  let err = '';
  child.stdout?.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr?.on('data', (c: Buffer) => {
    err += c.toString();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = waitFor(
    () => out.includes('READY\n'),
    60_000,
    () => `worker ${child.pid} ready (stdout: ${out}, stderr: ${err})`,
    () => child.exitCode !== null || child.signalCode !== null,
  );
  return {
    pid: child.pid as number,
    output: () => `${out}\n--- stderr ---\n${err}`,
    ready,
    exited,
    signal: (signal) => {
      if (child.exitCode === null && child.signalCode === null)
        process.kill(child.pid as number, signal);
    },
    async stop() {
      child.kill('SIGTERM');
      await exited;
      const line = out.split('\n').find((l) => l.startsWith('STATS '));
      if (line === undefined) throw new Error(`worker ${child.pid} printed no stats: ${out}${err}`);
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
