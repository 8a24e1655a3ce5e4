/**
 * Checks of what a store keeps and reads back: round trips, get/delete, list, stats, suspended
 * and ended conversations (what @langchain/langgraph-checkpoint-validation checks of a saver:
 * put/getTuple round trips, list filters and paging, deleteThread).
 */
import assert from 'node:assert/strict';
import type { Checkpoint, Lease } from '../core/spi/store.ts';
import { type Check, type CheckContext, checkpoint, defined, LONG_LEASE_MS } from './kit.ts';
import { begun, committed, created } from './steps.ts';

/**
 * The conversation of `label` begun, then committed at seq 2 with `fields` (its suspension, its
 * ending): what was written, the creator's lease it was written under and the lease the commit
 * answered.
 */
async function committedAtTwo(
  context: CheckContext,
  label: string,
  fields: Partial<Omit<Checkpoint, 'conversationId' | 'seq'>>,
): Promise<{ id: string; orchestrator: string; lease: Lease; written: Checkpoint; after: Lease }> {
  const { id, orchestrator, lease } = await begun(context, label);
  const written = checkpoint(id, orchestrator, 2, fields);
  const after = await committed(context, written, lease);
  return { id, orchestrator, lease, written, after };
}

export const recordChecks: readonly Check[] = [
  {
    name: 'round trip: acquire gives back every checkpoint field as committed (running, suspended, ended)',
    async run(context) {
      const { store } = context;
      const id = context.id('round-trip');
      const orchestrator = context.orchestrator('round-trip');
      const [a, b] = [context.owner('a'), context.owner('b')];
      let lease = await created(context, checkpoint(id, orchestrator, 1), a);
      const running = checkpoint(id, orchestrator, 2, {
        dispatchCount: 7,
        state: JSON.stringify({
          text: 'héllo ✓ 𝄞 \u0000 "quoted" \\ line\nbreak',
          numbers: [0, -1.5, 1e300, Number.MAX_SAFE_INTEGER],
          nested: { empty: {}, list: [], none: null, yes: true },
        }),
      });
      lease = await committed(context, running, lease);
      await store.release(id, lease);
      const first = await store.acquire(id, b, LONG_LEASE_MS);
      assert.equal(first.status, 'acquired');
      assert.deepEqual(defined((first as { checkpoint: Checkpoint }).checkpoint), running);

      const suspended = checkpoint(id, orchestrator, 3, {
        status: 'suspended',
        dispatchCount: 8,
        suspendedAt: 1_700_000_000_123,
        state: JSON.stringify({ waitingFor: 'a person' }),
      });
      await committed(context, suspended, (first as { lease: Lease }).lease);
      const second = await store.acquire(id, a, LONG_LEASE_MS);
      assert.equal(second.status, 'acquired');
      assert.deepEqual(defined((second as { checkpoint: Checkpoint }).checkpoint), suspended);

      const resultValue = { ending: 'converged', dispatchCount: 9, text: 'fin ✓' };
      const ended = checkpoint(id, orchestrator, 4, {
        status: 'ended',
        dispatchCount: 9,
        state: JSON.stringify({ last: true }),
        result: JSON.stringify(resultValue),
      });
      await committed(context, ended, (second as { lease: Lease }).lease);
      const third = await store.acquire(id, b, LONG_LEASE_MS);
      assert.equal(third.status, 'ended');
      assert.deepEqual(defined((third as { checkpoint: Checkpoint }).checkpoint), ended);
      const stored = await store.get(id);
      assert.ok(stored !== undefined, 'get should find the ended conversation');
      assert.deepEqual(
        {
          conversationId: stored.conversationId,
          orchestrator: stored.orchestrator,
          status: stored.status,
          dispatchCount: stored.dispatchCount,
          seq: stored.seq,
          result: stored.result,
          owner: stored.owner,
        },
        {
          conversationId: id,
          orchestrator,
          status: 'ended',
          dispatchCount: 9,
          seq: 4,
          result: resultValue,
          owner: undefined,
        },
      );
      assert.equal(typeof stored.updatedAt, 'number');
    },
  },
  {
    name: 'create: an id already taken answers created false and leaves the stored conversation',
    async run(context) {
      const id = context.id('taken');
      const orchestrator = context.orchestrator('taken');
      await created(
        context,
        checkpoint(id, orchestrator, 1, { dispatchCount: 5 }),
        context.owner('a'),
      );
      const again = await context.store.create(
        checkpoint(id, orchestrator, 1, { dispatchCount: 99 }),
        context.owner('b'),
        LONG_LEASE_MS,
      );
      assert.deepEqual(defined(again), { created: false });
      const stored = await context.store.get(id);
      assert.equal(stored?.dispatchCount, 5);
      assert.equal(stored?.owner, context.owner('a'));
    },
  },
  {
    name: 'get and delete: an unknown id reads undefined; delete answers true, then false; the id can be created again',
    async run(context) {
      const { store } = context;
      const id = context.id('deleted');
      const orchestrator = context.orchestrator('deleted');
      assert.equal(await store.get(id), undefined);
      assert.equal(await store.delete(id), false);
      await created(context, checkpoint(id, orchestrator, 1), context.owner('a'));
      assert.equal(await store.delete(id), true);
      assert.equal(await store.get(id), undefined);
      assert.equal(await store.delete(id), false);
      await created(context, checkpoint(id, orchestrator, 1), context.owner('b'));
      assert.equal((await store.get(id))?.owner, context.owner('b'));
    },
  },
  {
    name: 'list: filters by orchestrator, status and unleased, orders by id and pages with limit and after',
    async run(context) {
      const { store } = context;
      const [oa, ob] = [context.orchestrator('list-a'), context.orchestrator('list-b')];
      const owner = context.owner('a');
      const ids = ['1', '2', '3', '4', '5', '6'].map((n) => context.id(`list-${n}`));
      const [a1, a2, a3, a4, b1, b2] = ids as [string, string, string, string, string, string];
      // Created out of order: list orders by id, not by insertion.
      const leaseA1 = await created(context, checkpoint(a1, oa, 1), owner);
      await created(context, checkpoint(b2, ob, 1, { status: 'suspended', suspendedAt: 5 }), owner);
      const leaseA4 = await created(context, checkpoint(a4, oa, 1), owner);
      await committed(context, checkpoint(a4, oa, 2, { status: 'ended', result: '{}' }), leaseA4);
      const leaseA2 = await created(context, checkpoint(a2, oa, 1), owner);
      await store.release(a2, leaseA2);
      await created(context, checkpoint(a3, oa, 1, { status: 'suspended', suspendedAt: 7 }), owner);
      await created(context, checkpoint(b1, ob, 1), owner);
      const idsOf = async (query: Parameters<typeof store.list>[0]) =>
        (await store.list(query)).map((c) => c.conversationId);

      assert.deepEqual(await idsOf({ orchestrator: oa, limit: 100 }), [a1, a2, a3, a4]);
      assert.deepEqual(await idsOf({ orchestrator: ob, limit: 100 }), [b1, b2]);
      assert.deepEqual(await idsOf({ orchestrator: oa, status: 'running', limit: 100 }), [a1, a2]);
      assert.deepEqual(await idsOf({ orchestrator: oa, status: 'suspended', limit: 100 }), [a3]);
      assert.deepEqual(await idsOf({ orchestrator: oa, status: 'ended', limit: 100 }), [a4]);
      assert.deepEqual(await idsOf({ orchestrator: oa, unleased: true, limit: 100 }), [a2, a3, a4]);
      assert.deepEqual(
        await idsOf({ orchestrator: oa, status: 'running', unleased: true, limit: 100 }),
        [a2],
      );
      assert.deepEqual(await idsOf({ orchestrator: oa, limit: 2 }), [a1, a2]);
      assert.deepEqual(await idsOf({ orchestrator: oa, limit: 2, after: a2 }), [a3, a4]);
      assert.deepEqual(await idsOf({ orchestrator: oa, limit: 2, after: a4 }), []);
      assert.deepEqual(await idsOf({ status: 'suspended', limit: 100, after: a4 }), [b2]);

      const [first, second] = await store.list({ orchestrator: oa, limit: 2 });
      assert.deepEqual(
        [first?.owner, first?.leaseExpiresAt, second?.owner, second?.leaseExpiresAt],
        [owner, leaseA1.expiresAt, undefined, undefined],
        'a live lease is shown with its expiry, a released one is not',
      );
      const [suspended] = await store.list({ orchestrator: oa, status: 'suspended', limit: 1 });
      assert.equal(suspended?.suspendedAt, 7);
    },
  },
  {
    name: 'list limit: 0 answers no conversation',
    async run(context) {
      const { store } = context;
      const orchestrator = context.orchestrator('limit');
      await created(
        context,
        checkpoint(context.id('limit-1'), orchestrator, 1),
        context.owner('a'),
      );
      assert.equal((await store.list({ orchestrator, limit: 1 })).length, 1);
      assert.deepEqual(await store.list({ orchestrator, limit: 0 }), []);
    },
  },
  {
    name: 'stats: running and suspended counts per orchestrator, with the oldest suspension',
    async run(context) {
      const { store } = context;
      const [oa, ob] = [context.orchestrator('stats-a'), context.orchestrator('stats-b')];
      const owner = context.owner('a');
      const make = (label: string, o: string, fields: Partial<Checkpoint> = {}) =>
        created(context, checkpoint(context.id(label), o, 1, fields), owner);
      await make('s1', oa);
      await make('s2', oa);
      await make('s3', oa, { status: 'suspended', suspendedAt: 2_000 });
      await make('s4', oa, { status: 'suspended', suspendedAt: 1_000 });
      await make('s5', oa, { status: 'ended', result: '{}' });
      await make('s6', ob);
      const mine = (await store.stats())
        .filter((s) => s.orchestrator === oa || s.orchestrator === ob)
        .map((s) => defined(s))
        .sort((x, y) => String(x.orchestrator).localeCompare(String(y.orchestrator)));
      assert.deepEqual(mine, [
        { orchestrator: oa, running: 2, suspended: 2, oldestSuspendedAt: 1_000 },
        { orchestrator: ob, running: 1, suspended: 0 },
      ]);
    },
  },
  {
    name: 'suspended: committing a suspended checkpoint releases the lease; another owner acquires it (takenOver false) with suspendedAt',
    async run(context) {
      const { store } = context;
      const { id, lease, written } = await committedAtTwo(context, 'suspended', {
        status: 'suspended',
        suspendedAt: 1_234,
      });
      const stored = await store.get(id);
      assert.deepEqual(
        [stored?.status, stored?.suspendedAt, stored?.owner],
        ['suspended', 1_234, undefined],
      );
      const acquired = await store.acquire(id, context.owner('b'), LONG_LEASE_MS);
      assert.equal(acquired.status, 'acquired');
      const { takenOver, lease: next } = acquired as { takenOver: boolean; lease: Lease };
      assert.equal(takenOver, false, 'a suspension is a handoff, not a crash');
      assert.equal(next.epoch, lease.epoch + 1);
      assert.equal(next.owner, context.owner('b'));
      assert.deepEqual(defined((acquired as { checkpoint: Checkpoint }).checkpoint), written);
    },
  },
  {
    name: 'ended: acquire answers ended with the result and takes no lease; the last holder can neither commit nor renew',
    async run(context) {
      const { store } = context;
      const { id, orchestrator, written, after } = await committedAtTwo(context, 'ended', {
        status: 'ended',
        result: JSON.stringify({ ending: 'failed', error: 'boom' }),
      });
      const outcome = await store.acquire(id, context.owner('b'), LONG_LEASE_MS);
      assert.deepEqual(defined(outcome), { status: 'ended', checkpoint: written });
      const stored = await store.get(id);
      assert.deepEqual(
        [stored?.status, stored?.owner, stored?.result],
        ['ended', undefined, { ending: 'failed', error: 'boom' }],
      );
      assert.equal(await store.renew(id, after, LONG_LEASE_MS), undefined);
      const late = await store.commit(checkpoint(id, orchestrator, 3), after, LONG_LEASE_MS);
      assert.equal(late.ok, false, 'a commit after the end must be refused');
      assert.equal((await store.get(id))?.seq, 2);
    },
  },
];
