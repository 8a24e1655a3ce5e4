/**
 * The servers tests start never outlive the test process: a process that starts a redis-server
 * and a PostgreSQL through the helpers and exits without stopping them leaves neither running.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { hasPostgres } from '../helpers/postgres.ts';

const run = promisify(execFile);
const FIXTURE = resolve(import.meta.dirname, '../fixtures/leaves-servers.ts');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie (exited, not yet reaped by init) still answers kill(0): read its state.
  try {
    return !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
  } catch {
    return false;
  }
}

it('stops every server a test process leaves behind when it exits', async () => {
  const args = ['--import', 'tsx', FIXTURE, ...(hasPostgres() ? ['--postgres'] : [])];
  const { stdout } = await run(process.execPath, args, { timeout: 90_000 });
  const { redisPid, postgresPid } = JSON.parse(stdout.trim()) as {
    redisPid: number;
    postgresPid?: number;
  };
  expect(Number.isInteger(redisPid)).toBe(true);
  for (const pid of [redisPid, postgresPid]) {
    if (pid === undefined) continue;
    const deadline = Date.now() + 10_000;
    while (alive(pid) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(alive(pid), `pid ${pid}`).toBe(false);
  }
}, 120_000);
