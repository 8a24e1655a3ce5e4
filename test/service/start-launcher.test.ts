/**
 * `npm start` (scripts/start.mjs) on every Node a clone may meet: on 22 and 24 it runs the demo
 * in its own process; on an older Node (Debian's 20 on these machines) it runs the demo on
 * Node 24 from the npm registry, passes SIGTERM on, and a SIGKILL of it takes the demo down too
 * (a restart must find the port free and the store's lease holder dead).
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

/** A Node older than 22 on this machine, or undefined (then that half has nothing to run on). */
const OLD_NODE = ['/usr/bin/node', '/usr/local/bin/node'].find((path) => {
  try {
    const v = execFileSync(path, ['-v'], { encoding: 'utf8' }).trim();
    return Number(v.slice(1).split('.')[0]) < 22;
  } catch {
    return false;
  }
});

function start(node: string) {
  const child = spawn(
    node,
    ['scripts/start.mjs', '--port', '0', '--data', mkdtempSync(join(tmpdir(), 'launcher-'))],
    { cwd: ROOT, stdio: 'pipe', env: { ...process.env } },
  );
  let out = '';
  let err = '';
  child.stdout?.on('data', (c: Buffer) => {
    out += c;
  });
  child.stderr?.on('data', (c: Buffer) => {
    err += c;
  });
  const exited = new Promise<{ code: number | null; signal: string | null }>((done) =>
    child.on('exit', (code, signal) => done({ code, signal })),
  );
  const listening = new Promise<number>((done, fail) => {
    const timer = setTimeout(() => fail(new Error(`no listening line: ${out} ${err}`)), 120_000);
    const check = () => {
      const m = /listening on http:\/\/[\d.]+:(\d+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        done(Number(m[1]));
      }
    };
    child.stdout?.on('data', check);
    child.on('exit', () => fail(new Error(`exited: ${out} ${err}`)));
  });
  return { child, exited, listening, out: () => out, err: () => err };
}

async function healthy(port: number): Promise<boolean> {
  return fetch(`http://127.0.0.1:${port}/healthz`).then(
    (r) => r.ok,
    () => false,
  );
}

async function closedWithin(port: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (!(await healthy(port))) return true;
    await new Promise((r) => setTimeout(r, 100));
  }
  return false;
}

function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return !/^\d+ \(.*\) Z/.test(stat);
  } catch {
    return false;
  }
}

const pidsOf = (child: ChildProcess) => {
  try {
    return execFileSync('pgrep', ['-P', String(child.pid)], { encoding: 'utf8' }).trim();
  } catch {
    return '';
  }
};

describe('npm start on this Node (22 or 24)', () => {
  it('runs the demo in its own process and stops on SIGTERM', async () => {
    const s = start(process.execPath);
    const port = await s.listening;
    expect(await healthy(port)).toBe(true);
    expect(pidsOf(s.child)).toBe(''); // no second process
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    expect(s.err()).not.toMatch(/past its end of life/);
  });
});

describe.skipIf(OLD_NODE === undefined)(`npm start on an older Node (${OLD_NODE})`, () => {
  it('runs the demo on Node 24 fetched from the npm registry, and passes SIGTERM on', async () => {
    const s = start(OLD_NODE as string);
    const port = await s.listening;
    expect(s.err()).toMatch(
      /is past its end of life \(22 and 24 are supported\): running the demo on v24\./,
    );
    expect(await healthy(port)).toBe(true);
    s.child.kill('SIGTERM');
    expect((await s.exited).code).toBe(0);
    expect(s.out() + s.err()).toMatch(/SIGTERM: .*closed\./);
    expect(await closedWithin(port, 2_000)).toBe(true);
  }, 180_000);

  it('takes the demo down with it when killed with SIGKILL', async () => {
    const s = start(OLD_NODE as string);
    const port = await s.listening;
    const service = pidsOf(s.child);
    expect(service).toMatch(/^\d+$/);
    s.child.kill('SIGKILL');
    await s.exited;
    expect(await closedWithin(port, 5_000)).toBe(true);
    // Gone, or a zombie waiting for whoever adopted it to reap it: not running either way.
    expect(running(Number(service))).toBe(false);
  }, 180_000);
});
