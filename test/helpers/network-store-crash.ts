/**
 * The crash tests shared by the PostgreSQL and Redis stores (`runAndKill` by SQLite's too).
 * - `killWriters`: a writer process (store-crash-writer.ts) SIGKILLed mid-commit `kills` times
 *   at random moments; after each, every stored checkpoint is whole, nothing the writer saw
 *   committed is lost, and the next writer takes the dead holder's leases at once.
 * - `killServer`: the database killed under commits and restarted: no acknowledged commit lost,
 *   calls during the outage reject with the store's clear error, the same store object works
 *   after the restart.
 */

import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { expect } from 'vitest';
import { newLeaseOwner } from '../../src/core/durable/lease-owner.ts';
import type { Checkpoint, ConversationStore, Lease } from '../../src/core/spi/store.ts';
import { readCrashState } from './crash-state.ts';

const WRITER = resolve(import.meta.dirname, 'store-crash-writer.ts');

/**
 * Runs the writer (store-crash-writer.ts with `args`) until its first commit and `killAfterMs`
 * more, SIGKILLs it; the highest seq it printed per id.
 */
export function runAndKill(
  args: readonly string[],
  killAfterMs: number,
): Promise<Map<string, number>> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, ['--import', 'tsx', WRITER, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const seen = new Map<string, number>();
    let out = '';
    let err = '';
    let armed = false;
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const lines = out.split('\n');
      out = lines.pop() ?? '';
      for (const line of lines) {
        if (line === 'ready') continue;
        const [id, seq] = line.split(' ');
        seen.set(id as string, Math.max(seen.get(id as string) ?? 0, Number(seq)));
        // The kill is armed at the first confirmed commit, then lands at a random moment.
        if (!armed) {
          armed = true;
          setTimeout(() => child.kill('SIGKILL'), killAfterMs);
        }
      }
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    child.once('error', fail);
    child.once('exit', (code, signal) => {
      if (signal !== 'SIGKILL') fail(new Error(`the writer exited with ${code}: ${err}`));
      else done(seen);
    });
  });
}

export async function killWriters(
  store: ConversationStore,
  writerArgs: readonly string[],
  conversations: number,
  kills: number,
): Promise<void> {
  const stored = new Map<string, number>();
  const advanced: number[] = [];
  const reader = newLeaseOwner(); // this process, alive: the next writer waits for release
  for (let kill = 0; kill < kills; kill++) {
    const seen = await runAndKill(writerArgs, Math.floor(Math.random() * 150));
    let progress = 0;
    for (let i = 0; i < conversations; i++) {
      const id = `c${i}`;
      // The killed writer's process is gone: its leases are taken at once (a crash: takenOver).
      const acquired = await store.acquire(id, reader, 60_000);
      if (acquired.status !== 'acquired') throw new Error(`${id}: ${acquired.status}`);
      expect(acquired.takenOver).toBe(true);
      const { checkpoint } = acquired;
      expect(readCrashState(checkpoint.state)).toEqual({ id, seq: checkpoint.seq, whole: true });
      expect(checkpoint.dispatchCount).toBe(checkpoint.seq - 1);
      expect(checkpoint.seq).toBeGreaterThanOrEqual(seen.get(id) ?? 0);
      expect(checkpoint.seq).toBeGreaterThanOrEqual(stored.get(id) ?? 1);
      progress += checkpoint.seq - (stored.get(id) ?? 1);
      stored.set(id, checkpoint.seq);
      await store.release(id, acquired.lease);
    }
    advanced.push(progress);
  }
  expect(advanced.filter((p) => p < 1)).toEqual([]);
}

function checkpointOf(id: string, seq: number): Checkpoint {
  return {
    conversationId: id,
    orchestrator: 'outage',
    status: 'running',
    seq,
    dispatchCount: seq - 1,
    state: JSON.stringify({ id, seq }),
  };
}

export interface KillableServer {
  /** Kills the server the way a crash does. */
  kill(): Promise<void>;
  /** Starts it again on the same data. */
  restart(): Promise<void>;
}

/**
 * Commits 10 conversations in a loop, kills the server mid-loop, restarts it: every commit that
 * was acknowledged is there; the calls during the outage rejected with an error matching
 * `outage`; the same store commits again after the restart.
 */
export async function killServer(
  store: ConversationStore,
  server: KillableServer,
  outage: RegExp,
): Promise<void> {
  const ids = Array.from({ length: 10 }, (_, i) => `outage-${i}-${Date.now()}`);
  const owner = newLeaseOwner();
  const held = new Map<string, { lease: Lease; acked: number }>();
  for (const id of ids) {
    const created = await store.create(checkpointOf(id, 1), owner, 600_000);
    if (!created.created) throw new Error(`could not create ${id}`);
    held.set(id, { lease: created.lease, acked: 1 });
  }
  let stop = false;
  const errors: string[] = [];
  const loops = [...held].map(async ([id, h]) => {
    while (!stop) {
      try {
        const outcome = await store.commit(checkpointOf(id, h.acked + 1), h.lease, 600_000);
        if (!outcome.ok) throw new Error(`${id} refused: ${outcome.reason}`);
        h.acked += 1;
      } catch (error) {
        errors.push((error as Error).message);
        return;
      }
    }
  });
  await new Promise((r) => setTimeout(r, 300));
  const before = [...held.values()].reduce((n, h) => n + h.acked, 0);
  await server.kill();
  try {
    await Promise.all(loops);
    stop = true;
    expect(before).toBeGreaterThan(ids.length);
    // Every loop ended on the outage, each with the store's error.
    expect(errors).toHaveLength(ids.length);
    for (const message of errors) expect(message).toMatch(outage);
    await expect(store.get(ids[0] as string)).rejects.toThrow(outage);
  } finally {
    stop = true;
    await server.restart();
  }
  for (const [id, h] of held) {
    // A commit in flight at the kill may have applied without its answer: seq acked or acked + 1.
    const stored = await store.get(id);
    expect([h.acked, h.acked + 1]).toContain(stored?.seq);
    const next = (stored?.seq as number) + 1;
    const outcome = await store.commit(checkpointOf(id, next), h.lease, 600_000);
    expect(outcome.ok).toBe(true);
    expect((await store.get(id))?.seq).toBe(next);
  }
}
