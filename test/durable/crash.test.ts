/**
 * The identity property of durability: a deterministic conversation SIGKILLed at any point (in a
 * responder, before or after a store write, in the listener) and resumed in a new process ends
 * exactly as an uninterrupted run, and only the invocation in flight at the crash runs again.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';

const child = join(import.meta.dirname, '../fixtures', 'durable-child.ts');
const dir = mkdtempSync(join(tmpdir(), 'durable-crash-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function spawn(args: string[]): { status: number | null; signal: string | null; out: string } {
  const done = spawnSync(process.execPath, ['--import', 'tsx', child, ...args], {
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { status: done.status, signal: done.signal, out: done.stdout };
}

let round = 0;
describe('a conversation killed with SIGKILL and resumed in a new process', () => {
  const baseline = spawn([join(dir, 'base.json'), join(dir, 'base.log'), 'run']);

  it('runs uninterrupted to a deterministic ending (the baseline)', () => {
    expect(baseline.status).toBe(0);
    expect(JSON.parse(baseline.out)).toMatchObject({ reason: 'converged', dispatchCount: 23 });
  });

  it('ends with the same ending, dispatch count, projection and usage, re-running only the invocation in flight', () => {
    fc.assert(
      fc.property(
        fc.oneof(
          fc.tuple(fc.constant('responder'), fc.integer({ min: 1, max: 23 })),
          fc.tuple(fc.constant('listener'), fc.integer({ min: 1, max: 23 })),
          fc.tuple(fc.constantFrom('store:before', 'store:after'), fc.integer({ min: 1, max: 25 })),
        ),
        ([where, n]) => {
          round++;
          const store = join(dir, `s${round}.json`);
          const log = join(dir, `a${round}.log`);
          const kill = where.startsWith('store')
            ? `${where.replace(':', `:${n}:`)}`
            : `${where}:${n}`;
          const killed = spawn([store, log, 'run', kill]);
          expect(killed.signal).toBe('SIGKILL');
          const resumed = spawn([store, log, 'resume']);
          expect(resumed.status).toBe(0);
          expect(JSON.parse(resumed.out)).toEqual(JSON.parse(baseline.out));
          // Every invocation has one key; only the one in flight at the crash ran twice.
          const lines = readFileSync(log, 'utf8').trim().split('\n');
          const again = lines.filter((line) => !line.endsWith(' 1'));
          expect(again.length).toBeLessThanOrEqual(1);
          for (const line of again) {
            const [key, attempt] = line.split(' ');
            expect(attempt).toBe('2');
            // Twice when it ran before the crash (killed in it, or its commit never landed);
            // once when the crash came after its predecessor's commit, before it started.
            expect(lines.filter((l) => l.startsWith(`${key} `)).length).toBeLessThanOrEqual(2);
          }
          if (where === 'responder') expect(again).toEqual([`crash-1:${n} 2`]);
        },
      ),
      { numRuns: 8, seed: 28 },
    );
  }, 240_000);
});
