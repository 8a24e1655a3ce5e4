/**
 * One test at a time may write the package's dist/ (`npm run build`, `npm pack`'s prepack) and
 * use what it wrote: test files run two at a time, and a build empties dist/ first, so a second
 * build under way would take away the files the first one is running or packing. A lock across
 * processes: a directory made atomically, holding its owner's pid; a lock whose owner died is
 * taken over.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../..');
const LOCK = join(ROOT, '.tmp', 'dist.lock');

function ownerAlive(): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(LOCK, 'pid'), 'utf8'));
  } catch {
    // Made, its pid not written yet: its owner is alive and about to write it.
    return true;
  }
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Runs `work` holding the dist/ lock (waiting up to `timeoutMs` for it). */
export async function withDistLock<T>(work: () => Promise<T>, timeoutMs = 300_000): Promise<T> {
  mkdirSync(join(ROOT, '.tmp'), { recursive: true });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      if (!ownerAlive()) {
        rmSync(LOCK, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) {
        throw new Error(`expected the dist/ lock (${LOCK}) within ${timeoutMs} ms, still held`);
      }
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  writeFileSync(join(LOCK, 'pid'), String(process.pid));
  try {
    return await work();
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}
