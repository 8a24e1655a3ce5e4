/**
 * The identity property of durability with incremental checkpoints: a transcript conversation
 * (entries, snapshots every 40 dispatches, compaction) SIGKILLed at random moments and resumed
 * in a new process ends exactly as an uninterrupted run, on SQLite, PostgreSQL and Redis, and
 * only the invocation in flight at a crash runs again.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { hasPostgres, type RunningPostgres, startPostgres } from '../helpers/postgres.ts';
import { hasRedisServer, type RunningRedis, startRedis } from '../helpers/redis.ts';

const CHILD = join(import.meta.dirname, '../fixtures', 'transcript-child.ts');
const KILLS = 4;
const dir = mkdtempSync(join(tmpdir(), 'transcript-crash-'));
let postgres: RunningPostgres | undefined;
let redis: RunningRedis | undefined;
afterAll(async () => {
  await postgres?.stop();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

interface Ran {
  readonly killed: boolean;
  readonly out: string;
}

/** Runs the child; with `killAfterMs`, SIGKILLs it that long after its first commit. */
function child(args: readonly string[], killAfterMs?: number): Promise<Ran> {
  return new Promise((done, fail) => {
    const p = spawn(process.execPath, ['--import', 'tsx', CHILD, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    p.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (killAfterMs !== undefined && out.startsWith('started\n') && !p.killed) {
        setTimeout(() => p.kill('SIGKILL'), killAfterMs);
        killAfterMs = undefined;
      }
    });
    p.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    p.once('error', fail);
    p.once('exit', (code, signal) => {
      if (signal === 'SIGKILL') done({ killed: true, out });
      else if (code === 0) done({ killed: false, out });
      else fail(new Error(`the child exited with ${code}: ${err}`));
    });
  });
}

const result = (out: string): unknown => JSON.parse(out.trim().split('\n').at(-1) as string);

const stores: [string, () => Promise<string | undefined>][] = [
  ['sqlite', async () => 'file'],
  [
    'postgres',
    async () => {
      if (!hasPostgres()) return undefined;
      postgres ??= await startPostgres();
      return postgres.connectionString;
    },
  ],
  [
    'redis',
    async () => {
      if (!hasRedisServer()) return undefined;
      redis ??= await startRedis();
      return redis.url;
    },
  ],
];

describe.each(stores)('a transcript conversation on %s, SIGKILLed and resumed', (kind, where) => {
  it('ends as an uninterrupted run, re-running only the invocation in flight at each crash', async () => {
    const location = await where();
    if (location === undefined) throw new Error(`${kind} is not installed on this machine`);
    const at = (name: string) => (kind === 'sqlite' ? join(dir, `${name}.db`) : location);
    const baseline = await child([
      kind,
      at('base'),
      'tb_base',
      join(dir, `${kind}-base.log`),
      'run',
    ]);
    expect(baseline.killed).toBe(false);
    const expected = result(baseline.out) as { dispatchCount: number };
    expect(expected.dispatchCount).toBe(400);
    let kills = 0;
    for (let k = 0; k < KILLS; k++) {
      const name = `k${k}`;
      const log = join(dir, `${kind}-${name}.log`);
      const args = [kind, at(name), `tb_${name}`, log];
      const killed = await child([...args, 'run'], 5 + Math.floor(Math.random() * 150));
      if (killed.killed) kills++;
      let resumed = killed;
      // Killed again while resuming, now and then: each segment goes on from the last commit.
      if (killed.killed && k % 2 === 1)
        resumed = await child([...args, 'resume'], Math.random() * 60);
      if (resumed.killed) resumed = await child([...args, 'resume']);
      expect(resumed.killed).toBe(false);
      expect(result(resumed.out)).toEqual(expected);
      // Every invocation has one key; one that ran again did so with a higher attempt.
      const lines = readFileSync(log, 'utf8').trim().split('\n');
      const byKey = new Map<string, string[]>();
      for (const line of lines) {
        const [key, attempt] = line.split(' ') as [string, string];
        byKey.set(key, [...(byKey.get(key) ?? []), attempt]);
      }
      expect(byKey.size).toBe(400);
      // A key runs again only with a higher attempt (or runs first at attempt 2 when the crash
      // came after its predecessor's commit, before it started): one per crash at most.
      let again = 0;
      for (const attempts of byKey.values()) {
        const n = attempts.map(Number);
        for (let i = 1; i < n.length; i++) expect(n[i]).toBeGreaterThan(n[i - 1] as number);
        if (n.some((a) => a > 1)) again++;
      }
      expect(again).toBeLessThanOrEqual(2);
    }
    // The run takes about 200 ms past its first commit here: most kills land inside it.
    expect(kills).toBeGreaterThanOrEqual(KILLS / 2);
  }, 180_000);
});
