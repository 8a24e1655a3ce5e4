/**
 * A holder killed with SIGKILL whose parent has not reaped it yet is a zombie: its pid still
 * answers `kill(pid, 0)`, but it runs nothing and will never renew its lease. recover() takes its
 * conversation over at once, as from any dead holder on this host, instead of skipping it until
 * the lease expires (60 s here).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConversationOrchestrator, maxDispatches, roundRobin } from '../../src/index.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const dir = mkdtempSync(join(tmpdir(), 'zombie-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const state = (pid: number): string | undefined => {
  try {
    return /^\d+ \(.*\) (\S)/.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.[1];
  } catch {
    return undefined;
  }
};

describe('a conversation whose holder is a zombie (killed, not yet reaped)', () => {
  it('is taken over by recover() at once, and ends as if never interrupted', async () => {
    const path = join(dir, 'z.db');
    // bash starts the holder, then becomes `sleep`, which never reaps it: killed, it is a zombie.
    const parent = spawn(
      'bash',
      [
        '-c',
        `${JSON.stringify(process.execPath)} --import tsx test/fixtures/zombie-holder.ts ${JSON.stringify(path)} & echo "pid $!"; exec sleep 60`,
      ],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      let out = '';
      const holder = await new Promise<number>((done, fail) => {
        parent.stdout?.on('data', (c: Buffer) => {
          out += c;
          const pid = /^pid (\d+)$/m.exec(out)?.[1];
          if (pid !== undefined && out.includes('parked')) done(Number(pid));
        });
        parent.on('exit', () => fail(new Error(`the holder's parent exited: ${out}`)));
      });
      process.kill(holder, 'SIGKILL');
      while (state(holder) !== 'Z') await new Promise((r) => setTimeout(r, 10));
      expect(() => process.kill(holder, 0)).not.toThrow(); // what made it look alive

      const store = createSqliteStore({ path });
      const o = new ConversationOrchestrator<number, number>({
        name: 'zombie',
        store,
        leaseMs: 60_000,
        responders: [{ name: 'r', respond: (m) => ({ sender: 'r', content: m.content + 1 }) }],
        turnPolicy: roundRobin(),
        projection: { initial: () => 0, fold: (sum, m) => sum + m.content },
        termination: maxDispatches(6),
      });
      expect(await o.recover()).toEqual({
        resumed: 1,
        ended: 1,
        suspended: 0,
        failed: 0,
        skipped: 0,
      });
      const result = await o.resume('z');
      expect(result.dispatchCount).toBe(6);
      expect(result.state.projection).toBe(1 + 2 + 3 + 4 + 5 + 6);
      await store.close();
    } finally {
      parent.kill('SIGKILL');
    }
  }, 60_000);
});
