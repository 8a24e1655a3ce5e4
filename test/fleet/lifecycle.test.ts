/**
 * A conversation's life across a fleet, on real processes and a real redis-server (AOF): it
 * suspends on one worker, every worker stops, new ones start later and a person's answer resumes
 * it (two concurrent resumes apply once); a draining worker hands its segments back; a job for an
 * orchestrator no worker runs fails once and marks the conversation failed; a job that is not ours
 * is refused; the producer's trace context reaches the responders.
 *
 * Scaled: the workers are started again 3 s after the last one stopped (the issue says a minute;
 * nothing in the fleet depends on how long).
 */
import { join } from 'node:path';
import { context, propagation, ROOT_CONTEXT, TraceFlags, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { createConversationQueue } from '../../src/fleet/index.ts';
import { type DeskState, deskInput, desks } from '../fixtures/fleet-app.ts';
import { byKey, readInvocations, useFleet, waitFor } from '../helpers/fleet-workers.ts';

const fleet = useFleet({
  redis: { aof: true, appendfsync: 'always' },
  dirPrefix: 'co-fleet-life-',
  concurrency: 10,
  responderMs: 20,
});

const person = { sender: 'person', content: 1 };

/**
 * A worker of `approval` on the queue `queue` (logging to `queue.log`) and a producer that
 * started `conversationId` (4 turns), once it is suspended.
 */
async function suspendedOn(queue: string, conversationId: string) {
  const log = join(fleet.dir, `${queue}.log`);
  const worker = fleet.worker(queue, log, { ORCHESTRATORS: 'approval' });
  await worker.ready;
  const producer = createConversationQueue({ connection: fleet.redis.url, queueName: queue });
  await producer.start('approval', { sender: 'user', content: 4 }, { conversationId });
  await waitFor(
    async () => (await fleet.store.get(conversationId))?.status === 'suspended',
    60_000,
    () => `${conversationId} suspended`,
  );
  return { log, worker, producer };
}

describe('a conversation across a fleet', () => {
  it('suspends on one worker, waits with no worker, and ends once when two resumes race on new workers', async () => {
    const { log, worker: first, producer } = await suspendedOn('suspend', 'ask-1');
    const suspended = await fleet.store.get('ask-1');
    expect(await first.stop()).toMatchObject({ suspended: 1, ended: 0 });
    await new Promise((r) => setTimeout(r, 3_000));
    expect(await fleet.store.get('ask-1')).toMatchObject({
      status: 'suspended',
      seq: suspended?.seq,
    });

    const [a, b] = [
      fleet.worker('suspend', log, { ORCHESTRATORS: 'approval' }),
      fleet.worker('suspend', log, { ORCHESTRATORS: 'approval' }),
    ];
    await Promise.all([a.ready, b.ready]);
    const other = createConversationQueue({ connection: fleet.redis.url, queueName: 'suspend' });
    const resumes = await Promise.all([
      producer.resume('ask-1', { input: person }),
      other.resume('ask-1', { input: person }),
    ]);
    expect(resumes).toEqual([
      { enqueued: true, suspension: suspended?.seq },
      { enqueued: true, suspension: suspended?.seq },
    ]);
    await waitFor(
      async () => (await fleet.store.get('ask-1'))?.status === 'ended',
      60_000,
      () => 'ask-1 ended',
    );
    const ended = await fleet.store.get('ask-1');
    const result = ended?.result as {
      decision: { reason: string };
      state: { projection: DeskState };
    };
    expect(result.decision.reason).toBe('done');
    expect(result.state.projection).toMatchObject({ answers: 1, turns: 4, target: 4 });
    // Once ended, a late resume finds no suspension and enqueues nothing.
    expect(await producer.resume('ask-1', { input: person })).toEqual({ enqueued: false });
    await Promise.all([producer.close(), other.close()]);
    const stats = await Promise.all([a.stop(), b.stop()]);
    expect(stats[0].ended + stats[1].ended).toBe(1);
  }, 180_000);

  it('hands running segments back when a worker drains, and another worker ends them exactly', async () => {
    const log = join(fleet.dir, 'drain.log');
    const ids = Array.from({ length: 10 }, (_, n) => `drain-${n}`);
    const expected = await Promise.all(
      ids.map(async (id, n) => {
        const r = await desks({ responderMs: 0 }).run(deskInput(n), { conversationId: id });
        return { dispatchCount: r.dispatchCount, projection: r.state.projection };
      }),
    );
    const draining = fleet.worker('drain', log, { RESPONDER_MS: '400' });
    await draining.ready;
    const producer = createConversationQueue({ connection: fleet.redis.url, queueName: 'drain' });
    for (const [n, id] of ids.entries())
      await producer.start('desks', deskInput(n), { conversationId: id });
    await waitFor(
      () => readInvocations(log).length >= 10,
      30_000,
      () => '10 invocations',
    );
    const drained = await draining.stop();
    expect(drained.handedBack).toBe(10);
    const heir = fleet.worker('drain', log, { RESPONDER_MS: '20' });
    await waitFor(
      () => fleet.allEnded(ids),
      60_000,
      () => 'the drained conversations ended',
    );
    const endings = await Promise.all(
      ids.map(async (id) => {
        const r = (await fleet.store.get(id))?.result as {
          dispatchCount: number;
          state: { projection: DeskState };
        };
        return { dispatchCount: r.dispatchCount, projection: r.state.projection };
      }),
    );
    expect(endings).toEqual(expected);
    // The drain let the call open in each conversation (400 ms responders) finish and commit:
    // the heir runs none of them again, and every call is a first attempt.
    const runs = [...byKey(readInvocations(log)).values()];
    expect(runs.filter((r) => r.length > 1)).toEqual([]);
    expect(runs.every((r) => r[0]?.attempt === 1)).toBe(true);
    await producer.close();
    expect(await heir.stop()).toMatchObject({ ended: 10, handedBack: 0 });
  }, 180_000);

  it('fails a job naming an orchestrator the worker does not run, once, and marks its conversation failed', async () => {
    const { log, worker: asking, producer } = await suspendedOn('unknown', 'orphan');
    await asking.stop();
    // A new deployment that no longer runs `approval`.
    const other = fleet.worker('unknown', log, { ORCHESTRATORS: 'desks' });
    await other.ready;
    await producer.resume('orphan', { input: person });
    const bull = new Queue('unknown', { connection: { url: fleet.redis.url } });
    await waitFor(
      async () => (await bull.getJobCounts('failed')).failed === 1,
      30_000,
      () => 'the resume job failed',
    );
    const [job] = await bull.getJobs(['failed']);
    expect(job?.failedReason).toBe(
      'No orchestrator named "approval" runs on this worker (it runs "desks"); every worker of a queue must run the same orchestrators',
    );
    expect(job?.attemptsMade).toBe(1);
    expect(await fleet.store.get('orphan')).toMatchObject({ status: 'ended' });
    expect((await fleet.store.get('orphan'))?.result).toMatchObject({
      error: { name: 'UnknownOrchestratorError' },
    });

    // A job that is not ours: refused for good, logged, nothing run.
    await bull.add('mail', { to: 'someone@example.com' }, { attempts: 5 });
    await waitFor(
      async () => (await bull.getJobCounts('failed')).failed === 2,
      30_000,
      () => 'the foreign job failed',
    );
    const foreign = (await bull.getJobs(['failed'])).find((j) => j.name === 'mail');
    expect(foreign?.failedReason).toMatch(
      /^Refused job \d+: Expected the job data's `format` to be 'conversation-orchestrator\/segment@1', got undefined$/,
    );
    expect(foreign?.attemptsMade).toBe(1);
    await bull.close();
    await producer.close();
    const stats = await other.stop();
    expect(stats.refused).toBe(2);
    expect(other.output()).toContain('EVENT {"type":"refused"');
    expect(other.output()).toContain('EVENT {"type":"unknown_orchestrator"');
  }, 180_000);

  it("runs each segment in the producer's trace context", async () => {
    const log = join(fleet.dir, 'trace.log');
    const traced = fleet.worker('trace', log, { TRACE: '1' });
    await traced.ready;
    const manager = new AsyncLocalStorageContextManager().enable();
    context.setGlobalContextManager(manager);
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const producer = createConversationQueue({ connection: fleet.redis.url, queueName: 'trace' });
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const parent = trace.setSpanContext(ROOT_CONTEXT, {
      traceId,
      spanId: 'b7ad6b7169203331',
      traceFlags: TraceFlags.SAMPLED,
    });
    try {
      await context.with(parent, () =>
        producer.start('desks', deskInput(0), { conversationId: 'traced-1' }),
      );
      await waitFor(
        async () => (await fleet.store.get('traced-1'))?.status === 'ended',
        60_000,
        () => 'traced-1 ended',
      );
      const seen = readInvocations(log).map((i) => i.traceId);
      expect(seen.length).toBe(3);
      expect(new Set(seen)).toEqual(new Set([traceId]));
    } finally {
      await producer.close();
      propagation.disable();
      context.disable();
      await traced.stop();
    }
  }, 120_000);
});
