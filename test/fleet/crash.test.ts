/**
 * The fleet survives its parts dying, on real processes: a real redis-server (AOF, appendfsync
 * always) holding both the BullMQ queue and the conversations (the Redis store), worker processes
 * started with `node --import tsx`, SIGKILL, SIGSTOP/SIGCONT, and redis-server itself killed.
 * Every conversation must end exactly as an uninterrupted single-process run of the same input.
 *
 * Scaled for 2 loaded cores: 200 conversations of 3-9 dispatches with 20 ms responders;
 * lockDuration 2 s, stalledInterval 1 s and a 2 s store lease (production defaults: 10 s, 5 s,
 * 10 s) so a recovery takes seconds; the redis-server kill runs 40 conversations.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { createConversationQueue } from '../../src/fleet/index.ts';
import { type DeskState, deskInput, desks, type Invocation } from '../fixtures/fleet-app.ts';
import { byKey, readInvocations, useFleet, waitFor } from '../helpers/fleet-workers.ts';

const fleet = useFleet({
  redis: { aof: true, appendfsync: 'always' },
  dirPrefix: 'co-fleet-',
  concurrency: 20,
  responderMs: 50,
});

interface Ending {
  readonly reason: string;
  readonly dispatchCount: number;
  readonly projection: DeskState;
}

/** What an uninterrupted run in this process, with no store, ends with. */
async function uninterrupted(n: number, id: string): Promise<Ending> {
  const result = await desks({ responderMs: 0 }).run(deskInput(n), { conversationId: id });
  return {
    reason: result.decision.reason,
    dispatchCount: result.dispatchCount,
    projection: result.state.projection,
  };
}

/** How the store says a conversation ended, or `undefined` while it has not. */
async function stored(id: string): Promise<Ending | undefined> {
  const s = await fleet.store.get(id);
  if (s?.status !== 'ended') return undefined;
  const result = s.result as {
    decision: { reason: string };
    dispatchCount: number;
    state: { projection: DeskState };
  };
  return {
    reason: result.decision.reason,
    dispatchCount: result.dispatchCount,
    projection: result.state.projection,
  };
}

describe('a fleet of workers', () => {
  it('ends 200 conversations exactly as uninterrupted runs while one of two workers is SIGKILLed three times', async () => {
    const N = 200;
    const log = join(fleet.dir, 'kills.log');
    const ids = Array.from({ length: N }, (_, n) => `kill-${n}`);
    const expected = await Promise.all(ids.map((id, n) => uninterrupted(n, id)));
    const steady = fleet.worker('kills', log);
    let victim = fleet.worker('kills', log);
    await Promise.all([steady.ready, victim.ready]);
    const queue = createConversationQueue({ connection: fleet.redis.url, queueName: 'kills' });
    // Three waves, one kill each, so that the victim is always mid-work when it dies.
    const killed: number[] = [];
    const killedAt: number[] = [];
    for (let kill = 1; kill <= 3; kill++) {
      const wave = ids.slice(Math.floor(((kill - 1) * N) / 3), Math.floor((kill * N) / 3));
      for (const id of wave) {
        await queue.start('desks', deskInput(ids.indexOf(id)), { conversationId: id });
      }
      const pid = victim.pid;
      await waitFor(
        () => readInvocations(log).filter((i) => i.pid === pid).length >= 25,
        60_000,
        () => `25 invocations on worker ${pid}`,
      );
      victim.signal('SIGKILL');
      killedAt.push(Date.now());
      await victim.exited;
      killed.push(pid);
      victim = fleet.worker('kills', log);
      await victim.ready;
    }
    await waitFor(
      () => fleet.allEnded(ids),
      180_000,
      () => `${N} conversations ended`,
    );
    await queue.close();

    const endings = await Promise.all(ids.map(stored));
    expect(endings).toEqual(expected);

    const keys = byKey(readInvocations(log));
    // One key per dispatch: a re-run carries its dispatch's original key, never a new one.
    const dispatches = expected.reduce((sum, e) => sum + e.dispatchCount, 0);
    expect(keys.size).toBe(dispatches);
    const rerun = [...keys.values()].filter((runs) => runs.length > 1);
    // At most the dispatches in flight at each kill: one per conversation the victim ran (20).
    expect(rerun.length).toBeLessThanOrEqual(3 * 20);
    expect(rerun.length).toBeGreaterThan(0);
    for (const runs of rerun) {
      expect(runs.map((r) => r.attempt)).toEqual(runs.map((_, i) => i + 1));
      for (const r of runs.slice(0, -1)) expect(killed).toContain(r.pid);
    }
    // For docs/fleet.md (not asserted: timing): from each kill to the re-runs of its dispatches.
    const recovery = killed.map((pid, k) => {
      const again = rerun.filter((runs) => runs[0]?.pid === pid).map((runs) => runs[1]?.at ?? 0);
      if (again.length === 0) return 'nothing in flight';
      return `${((Math.min(...again) - (killedAt[k] ?? 0)) / 1000).toFixed(1)}-${((Math.max(...again) - (killedAt[k] ?? 0)) / 1000).toFixed(1)} s`;
    });
    console.log(`recovery after each SIGKILL (first-last re-run): ${recovery.join(', ')}`);
    await Promise.all([steady.stop(), victim.stop()]);
  }, 300_000);

  it('refuses and counts the commits of a worker paused past its lock, and the conversation has no fork', async () => {
    const log = join(fleet.dir, 'zombie.log');
    const id = 'zombie-1';
    const [expected] = [await uninterrupted(0, id)];
    const zombie = fleet.worker('zombie', log, { CONCURRENCY: '1', RESPONDER_MS: '3000' });
    await zombie.ready;
    const queue = createConversationQueue({ connection: fleet.redis.url, queueName: 'zombie' });
    await queue.start('desks', deskInput(0), { conversationId: id });
    await waitFor(
      () => readInvocations(log).some((i) => i.pid === zombie.pid),
      30_000,
      () => 'the first invocation on the worker to pause',
    );
    zombie.signal('SIGSTOP');
    const pausedAt = Date.now();
    const heir = fleet.worker('zombie', log, { RESPONDER_MS: '200' });
    await heir.ready;
    const first = readInvocations(log)[0] as Invocation;
    await waitFor(
      () => readInvocations(log).some((i) => i.pid === heir.pid && i.key === first.key),
      60_000,
      () => 'the heir re-running the paused dispatch',
    );
    const takeover = readInvocations(log).find((i) => i.pid === heir.pid && i.key === first.key);
    console.log(
      `zombie: paused to the heir's re-run ${(((takeover?.at ?? 0) - pausedAt) / 1000).toFixed(1)} s`,
    );
    zombie.signal('SIGCONT');
    await waitFor(
      async () => (await stored(id)) !== undefined,
      60_000,
      () => `${id} ended`,
    );
    await queue.close();

    expect(await stored(id)).toEqual(expected);
    const runs = byKey(readInvocations(log)).get(first.key) ?? [];
    expect(runs.map((r) => [r.pid, r.attempt])).toEqual([
      [zombie.pid, 1],
      [heir.pid, 2],
    ]);
    expect(byKey(readInvocations(log)).size).toBe(expected.dispatchCount);
    const zombieStats = await zombie.stop();
    expect(zombieStats.fenced).toBe(1);
    expect(zombieStats.ended).toBe(0);
    const heirStats = await heir.stop();
    expect(heirStats.ended).toBe(1);
    expect(heirStats.fenced).toBe(0);
  }, 180_000);

  it('loses no committed dispatch and recovers the jobs in flight when redis-server is SIGKILLed and restarted', async () => {
    const N = 40;
    const log = join(fleet.dir, 'redis.log');
    const ids = Array.from({ length: N }, (_, n) => `redis-kill-${n}`);
    const expected = await Promise.all(ids.map((id, n) => uninterrupted(n, id)));
    const a = fleet.worker('redis-kill', log, { RESPONDER_MS: '50' });
    const b = fleet.worker('redis-kill', log, { RESPONDER_MS: '50' });
    await Promise.all([a.ready, b.ready]);
    const queue = createConversationQueue({ connection: fleet.redis.url, queueName: 'redis-kill' });
    for (const [n, id] of ids.entries()) {
      await queue.start('desks', deskInput(n), { conversationId: id });
    }
    await queue.close();
    await waitFor(
      () => readInvocations(log).length >= 60,
      60_000,
      () => '60 invocations',
    );
    await fleet.redis.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 1_500));
    await fleet.redis.restart();
    await waitFor(
      () => fleet.allEnded(ids),
      60_000,
      async () => {
        const states = await Promise.all(
          ids.map(async (id) => (await fleet.store.get(id))?.status),
        );
        return `${N} conversations ended after the restart (${states.join(',')})\n${a.output().slice(-4000)}\n${b.output().slice(-4000)}`;
      },
    );

    expect(await Promise.all(ids.map(stored))).toEqual(expected);
    const keys = byKey(readInvocations(log));
    expect(keys.size).toBe(expected.reduce((sum, e) => sum + e.dispatchCount, 0));
    // Only dispatches in flight at the kill run again: at most one per conversation.
    const rerun = [...keys.values()].filter((runs) => runs.length > 1);
    expect(rerun.length).toBeLessThanOrEqual(N);
    // A re-run keeps its key and says attempt 2: a segment failed by the store with work the
    // store does not hold never releases its lease (a release reaching Redis as it came back
    // would have made the re-run say 1), so the next holder takes it over as after a crash.
    for (const runs of rerun) {
      expect(runs[0]?.attempt).toBe(1);
      for (const run of runs.slice(1)) expect(run.attempt).toBeGreaterThan(1);
    }
    const stats = await Promise.all([a.stop(), b.stop()]);
    expect(stats[0].redisErrors + stats[1].redisErrors).toBeGreaterThan(0);
    expect(stats[0].ended + stats[1].ended).toBeGreaterThanOrEqual(N);
  }, 300_000);
});
