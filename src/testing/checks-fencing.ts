/**
 * Checks of leases and fencing: races of creates, acquires and commits (where
 * @langchain/langgraph-checkpoint-validation has no two-writer case), stale epochs, sequence gaps
 * and replays, renew, release and expiry.
 */
import assert from 'node:assert/strict';
import type { AcquireOutcome, Checkpoint, Lease } from '../core/spi/store.ts';
import { type Check, checkpoint, defined, LONG_LEASE_MS, sleep } from './kit.ts';
import {
  begun,
  committed,
  racedWrites,
  renewedFrom,
  unleasedCount,
  writesAtOnce,
} from './steps.ts';

const RACERS = 10;

function acquiredLease(outcome: AcquireOutcome, what: string): Lease {
  assert.equal(outcome.status, 'acquired', `${what} should acquire`);
  return (outcome as { lease: Lease }).lease;
}

export const fencingChecks: readonly Check[] = [
  {
    name: `create race: of ${RACERS} creates of one id at once, exactly one creates it`,
    async run(context) {
      const id = context.id('create-race');
      const orchestrator = context.orchestrator('create-race');
      const outcomes = await Promise.all(
        Array.from({ length: RACERS }, (_, i) =>
          context.store.create(
            checkpoint(id, orchestrator, 1, { state: JSON.stringify({ racer: i }) }),
            context.owner(`racer-${i}`),
            LONG_LEASE_MS,
          ),
        ),
      );
      const winners = outcomes.flatMap((o, i) => (o.created ? [i] : []));
      assert.equal(winners.length, 1, `exactly one create should win, ${winners.length} did`);
      const stored = await context.store.get(id);
      assert.equal(stored?.owner, context.owner(`racer-${winners[0]}`));
    },
  },
  {
    name: `acquire race: of ${RACERS} acquires at once, exactly one acquires and the others answer held`,
    async run(context) {
      const { store } = context;
      const { id, lease } = await begun(context, 'acquire-race', { owner: 'first' });
      await store.release(id, lease);
      const outcomes = await Promise.all(
        Array.from({ length: RACERS }, (_, i) =>
          store.acquire(id, context.owner(`racer-${i}`), LONG_LEASE_MS),
        ),
      );
      const statuses = outcomes.map((o) => o.status).sort();
      assert.deepEqual(statuses, ['acquired', ...Array(RACERS - 1).fill('held')]);
      const winner = outcomes.find((o) => o.status === 'acquired') as { lease: Lease };
      assert.equal(winner.lease.epoch, lease.epoch + 1);
      for (const o of outcomes) {
        if (o.status === 'held') {
          assert.deepEqual(defined(o), {
            status: 'held',
            owner: winner.lease.owner,
            leaseExpiresAt: winner.lease.expiresAt,
          });
        }
      }
    },
  },
  {
    name: "two writers: once another owner took over an expired lease, the old holder's commit is refused (fenced) and the new one's applies",
    async run(context) {
      const { store } = context;
      const {
        id,
        orchestrator,
        lease: old,
      } = await begun(context, 'zombie', { owner: 'old', leaseMs: 50 });
      await sleep(150);
      const taken = await store.acquire(id, context.owner('new'), LONG_LEASE_MS);
      assert.equal(taken.status, 'acquired');
      assert.equal((taken as { takenOver: boolean }).takenOver, true);
      const fresh = (taken as { lease: Lease }).lease;
      assert.equal(fresh.epoch, old.epoch + 1);
      const [zombie, holder] = await Promise.all([
        store.commit(checkpoint(id, orchestrator, 2, { state: '"old"' }), old, LONG_LEASE_MS),
        store.commit(checkpoint(id, orchestrator, 2, { state: '"new"' }), fresh, LONG_LEASE_MS),
      ]);
      assert.deepEqual([zombie.ok, zombie.ok ? undefined : zombie.reason], [false, 'fenced']);
      assert.equal(holder.ok, true);
      const stored = await store.get(id);
      assert.deepEqual([stored?.seq, stored?.owner], [2, context.owner('new')]);
      // Renew and release of the old holder change nothing either.
      assert.equal(await store.renew(id, old, LONG_LEASE_MS), undefined);
      await store.release(id, old);
      assert.equal((await store.get(id))?.owner, context.owner('new'));
    },
  },
  {
    name: 'two writers racing acquire-and-commit 40 times never fork: the committed seqs have no gap and no duplicate',
    async run(context) {
      const { store } = context;
      const { id, orchestrator } = await begun(context, 'fork', { owner: 'w0', leaseMs: 1 });
      const raced = await racedWrites(context, id, (seq, state, lease) =>
        store.commit(checkpoint(id, orchestrator, seq, { state }), lease, 1),
      );
      const { refusals } = raced;
      const wins = raced.wins.map((w) => w.seq);
      const sorted = [...wins].sort((x, y) => x - y);
      assert.deepEqual(
        sorted,
        Array.from({ length: wins.length }, (_, i) => i + 2),
        'every committed seq once, from 2 up',
      );
      assert.ok(wins.length > 0, 'at least one of the 40 commits should apply, none did');
      assert.ok(
        refusals > 0,
        'at least one of the 40 acquire-and-commits should be refused or held, none was',
      );
      await sleep(5);
      const last = await store.acquire(id, context.owner('reader'), LONG_LEASE_MS);
      const stored = (last as { checkpoint: Checkpoint }).checkpoint;
      assert.equal(stored.seq, wins.length + 1);
      assert.equal(JSON.parse(stored.state).seq, stored.seq);
    },
  },
  {
    name: 'fencing: a commit with a stale epoch or another owner is refused (fenced) and changes nothing',
    async run(context) {
      const { store } = context;
      const { id, orchestrator, lease: first } = await begun(context, 'stale');
      await store.release(id, first);
      const second = acquiredLease(
        await store.acquire(id, context.owner('a'), LONG_LEASE_MS),
        'the second acquire',
      );
      const stale = await store.commit(checkpoint(id, orchestrator, 2), first, LONG_LEASE_MS);
      assert.deepEqual(defined(stale), { ok: false, reason: 'fenced', storedSeq: 1 });
      const stranger = await store.commit(
        checkpoint(id, orchestrator, 2),
        { ...second, owner: context.owner('stranger') },
        LONG_LEASE_MS,
      );
      assert.deepEqual(defined(stranger), { ok: false, reason: 'fenced', storedSeq: 1 });
      assert.equal((await store.get(id))?.seq, 1);
      await committed(context, checkpoint(id, orchestrator, 2), second);
    },
  },
  {
    name: 'sequence: a gap (seq + 2) and a replay (the stored seq) are refused with reason sequence and the stored seq',
    async run(context) {
      const { store } = context;
      let { id, orchestrator, lease } = await begun(context, 'sequence');
      lease = await committed(context, checkpoint(id, orchestrator, 2), lease);
      const gap = await store.commit(checkpoint(id, orchestrator, 4), lease, LONG_LEASE_MS);
      assert.deepEqual(defined(gap), { ok: false, reason: 'sequence', storedSeq: 2 });
      const replay = await store.commit(
        checkpoint(id, orchestrator, 2, { state: '"again"' }),
        lease,
        LONG_LEASE_MS,
      );
      assert.deepEqual(defined(replay), { ok: false, reason: 'sequence', storedSeq: 2 });
      await committed(context, checkpoint(id, orchestrator, 3), lease);
      assert.equal((await store.get(id))?.seq, 3);
    },
  },
  {
    name: 'not found: commit answers not_found, acquire not_found, renew undefined and release resolves for an unknown id',
    async run(context) {
      const { store } = context;
      const id = context.id('unknown');
      const lease: Lease = { owner: context.owner('a'), epoch: 1, expiresAt: Date.now() };
      const outcome = await store.commit(
        checkpoint(id, context.orchestrator('unknown'), 2),
        lease,
        LONG_LEASE_MS,
      );
      assert.deepEqual(defined(outcome), { ok: false, reason: 'not_found' });
      assert.deepEqual(await store.acquire(id, context.owner('a'), LONG_LEASE_MS), {
        status: 'not_found',
      });
      assert.equal(await store.renew(id, lease, LONG_LEASE_MS), undefined);
      await store.release(id, lease);
      assert.equal(await store.get(id), undefined, 'nothing was created');
    },
  },
  {
    name: 'commit: while running it renews the lease (same owner and epoch); a suspended or ended checkpoint releases it',
    async run(context) {
      const { store } = context;
      const {
        id,
        orchestrator,
        lease: first,
      } = await begun(context, 'commit-lease', { leaseMs: 1_000 });
      const before = Date.now();
      const outcome = await store.commit(checkpoint(id, orchestrator, 2), first, LONG_LEASE_MS);
      const renewed = renewedFrom(outcome, first, before, 'commit', 'the commit should apply');
      const stored = await store.get(id);
      assert.deepEqual([stored?.owner, stored?.leaseExpiresAt], [first.owner, renewed.expiresAt]);
      await committed(
        context,
        checkpoint(id, orchestrator, 3, { status: 'suspended', suspendedAt: 1 }),
        renewed,
      );
      assert.equal((await store.get(id))?.owner, undefined);
      assert.equal(
        await unleasedCount(context, orchestrator),
        1,
        'a suspended conversation is unleased',
      );
    },
  },
  {
    name: 'renew: extends a held lease from now; a stale or released lease answers undefined',
    async run(context) {
      const { store } = context;
      const { id, lease } = await begun(context, 'renew', { leaseMs: 1_000 });
      const renewed = await store.renew(id, lease, LONG_LEASE_MS);
      assert.ok(renewed !== undefined, 'renew of a held lease should answer the lease');
      assert.deepEqual([renewed.owner, renewed.epoch], [lease.owner, lease.epoch]);
      assert.ok(renewed.expiresAt > lease.expiresAt, 'the renewed lease should end later');
      assert.equal((await store.get(id))?.leaseExpiresAt, renewed.expiresAt);
      assert.equal(
        await store.renew(id, { ...lease, epoch: lease.epoch - 1 }, LONG_LEASE_MS),
        undefined,
      );
      await store.release(id, renewed);
      assert.equal(await store.renew(id, renewed, LONG_LEASE_MS), undefined);
      assert.equal((await store.get(id))?.owner, undefined);
    },
  },
  {
    name: 'release: the checkpoint stays, the next acquire is not a takeover, and the released holder is fenced',
    async run(context) {
      const { store } = context;
      let { id, orchestrator, lease } = await begun(context, 'release');
      lease = await committed(context, checkpoint(id, orchestrator, 2), lease);
      await store.release(id, lease);
      const stored = await store.get(id);
      assert.deepEqual([stored?.seq, stored?.status, stored?.owner], [2, 'running', undefined]);
      const next = await store.acquire(id, context.owner('b'), LONG_LEASE_MS);
      assert.equal(next.status, 'acquired');
      assert.equal((next as { takenOver: boolean }).takenOver, false);
      assert.equal((next as { checkpoint: Checkpoint }).checkpoint.seq, 2);
      const late = await store.commit(checkpoint(id, orchestrator, 3), lease, LONG_LEASE_MS);
      assert.deepEqual(defined(late), { ok: false, reason: 'fenced', storedSeq: 2 });
    },
  },
  {
    name: 'lease expiry: a live lease answers held; once it expires another owner acquires it with takenOver true and a higher epoch',
    async run(context) {
      const { store } = context;
      const { id, orchestrator, lease } = await begun(context, 'expiry', { leaseMs: 300 });
      const held = await store.acquire(id, context.owner('b'), LONG_LEASE_MS);
      assert.deepEqual(defined(held), {
        status: 'held',
        owner: context.owner('a'),
        leaseExpiresAt: lease.expiresAt,
      });
      assert.deepEqual(await unleasedCount(context, orchestrator), 0);
      await sleep(450);
      assert.equal(await unleasedCount(context, orchestrator), 1, 'an expired lease is unleased');
      assert.equal((await store.get(id))?.owner, undefined, 'an expired lease is not shown');
      const taken = await store.acquire(id, context.owner('b'), LONG_LEASE_MS);
      assert.equal(taken.status, 'acquired');
      assert.equal((taken as { takenOver: boolean }).takenOver, true);
      assert.equal((taken as { lease: Lease }).lease.epoch, lease.epoch + 1);
    },
  },
  {
    name: 'lease owner: the holder may acquire its own live lease again (epoch raised, not a takeover)',
    async run(context) {
      const { store } = context;
      const { id, orchestrator, lease } = await begun(context, 'own');
      const again = await store.acquire(id, context.owner('a'), LONG_LEASE_MS);
      assert.equal(again.status, 'acquired');
      assert.equal((again as { lease: Lease }).lease.epoch, lease.epoch + 1);
      const stale = await store.commit(checkpoint(id, orchestrator, 2), lease, LONG_LEASE_MS);
      assert.equal(stale.ok, false, 'the lease of the earlier epoch is fenced');
    },
  },
  {
    name: 'commits of many conversations at once each get their own outcome (a refused one does not fail the others)',
    async run(context) {
      // Odd ones skip a seq: refused; even ones apply. All issued in one turn of the event loop.
      await writesAtOnce(context, 'batch', (id, orchestrator, seq, lease) =>
        context.store.commit(checkpoint(id, orchestrator, seq), lease, LONG_LEASE_MS),
      );
    },
  },
];
