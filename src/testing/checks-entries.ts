/**
 * Checks of an incremental store (`append` and `snapshot`, see `IncrementalStore`): appends fenced
 * and sequenced like commits (a zombie's refused, two writers never forking the log), acquire
 * answering the base and the entries after it, snapshots compacting the log, whole commits and
 * endings deleting it, the two size limits, and delete. They run only on a store with both
 * methods; the first check says whether a store has both or neither.
 */
import assert from 'node:assert/strict';
import type {
  AcquireOutcome,
  Checkpoint,
  CheckpointEntry,
  CommitOutcome,
  IncrementalStore,
  Lease,
} from '../core/spi/store.ts';
import { rejection, snapshotLimitApplied } from './checks-limits.ts';
import {
  type Check,
  type CheckContext,
  checkpoint,
  defined,
  incremental,
  jsonOfBytes,
  LONG_LEASE_MS,
  SNAPSHOT_LIMIT,
  sleep,
} from './kit.ts';
import { begun, created, named, racedWrites, renewedFrom, writesAtOnce } from './steps.ts';

function log(context: CheckContext): IncrementalStore {
  const store = incremental(context.store);
  assert.ok(store !== undefined, 'the store should have append() and snapshot()');
  return store;
}

/** The entry of `id` at `seq`: its text says which, with characters a store must keep. */
function entry(id: string, seq: number, text = `{"seq":${seq},"said":"é ✓ 𝄞"}`): CheckpointEntry {
  return { conversationId: id, seq, dispatchCount: seq * 2, entry: text };
}

async function appended(store: IncrementalStore, e: CheckpointEntry, lease: Lease) {
  const outcome = await store.append(e, lease, LONG_LEASE_MS);
  assert.ok(
    outcome.ok,
    `append of ${e.conversationId} seq ${e.seq} should apply, got ${JSON.stringify(outcome)}`,
  );
  return outcome.lease;
}

/** Appends seqs `from`..`to` (each `entry(id, seq)`), answering the lease. */
async function appendRange(
  store: IncrementalStore,
  id: string,
  from: number,
  to: number,
  lease: Lease,
) {
  let held = lease;
  for (let seq = from; seq <= to; seq++) held = await appended(store, entry(id, seq), held);
  return held;
}

/** The conversation of `label` begun and appended seqs 2..`to`: its ids and its lease. */
async function withEntries(context: CheckContext, label: string, to: number) {
  const { id, orchestrator, lease } = await begun(context, label);
  return { id, orchestrator, lease: await appendRange(log(context), id, 2, to, lease) };
}

const texts = (id: string, from: number, to: number) =>
  Array.from({ length: to - from + 1 }, (_, i) => entry(id, from + i).entry);

/** What acquire answers, as [status, seq, dispatchCount, state, entries] (entries [] if absent). */
function read(outcome: AcquireOutcome) {
  assert.equal(outcome.status, 'acquired', 'acquire should answer acquired');
  const { checkpoint: cp, entries } = outcome as {
    checkpoint: Checkpoint;
    entries?: readonly string[] | undefined;
  };
  return [cp.status, cp.seq, cp.dispatchCount, cp.state, [...(entries ?? [])]] as const;
}

/** Releases and acquires again as another owner: what a resuming process would read. */
async function reread(context: CheckContext, id: string, lease: Lease, reader = 'reader') {
  await context.store.release(id, lease);
  const outcome = await context.store.acquire(id, context.owner(reader), LONG_LEASE_MS);
  return { read: read(outcome), lease: (outcome as { lease: Lease }).lease };
}

const refused = (o: CommitOutcome) => defined(o);

/**
 * Deletes `id`; then what `write` (`what`: an append, a snapshot) answers must be `not_found`,
 * and it must create nothing.
 */
async function refusedOnceDeleted(
  store: IncrementalStore,
  id: string,
  what: string,
  write: () => Promise<unknown>,
): Promise<void> {
  assert.equal(await store.delete(id), true);
  assert.deepEqual(await write(), { ok: false, reason: 'not_found' });
  assert.equal(await store.get(id), undefined, `${what} of a deleted id creates nothing`);
}

export const entryChecks: readonly Check[] = [
  {
    name: 'incremental: a store has append() and snapshot() both or neither, and maxSnapshotBytes with them',
    async run(context) {
      const { store } = context;
      const has = [typeof store.append, typeof store.snapshot].map((t) => t === 'function');
      assert.ok(
        has[0] === has[1],
        `append() and snapshot() come together: the store has ${has[0] ? 'append() without snapshot()' : 'snapshot() without append()'}`,
      );
      if (has[0] && store.maxSnapshotBytes !== undefined) {
        assert.ok(
          Number.isSafeInteger(store.maxSnapshotBytes) && store.maxSnapshotBytes >= 1_024,
          `maxSnapshotBytes should be an integer of at least 1,024, is ${store.maxSnapshotBytes}`,
        );
      }
    },
  },
  {
    name: 'append: fenced and sequenced like commit (another owner or a stale epoch fenced, a gap or replay sequence, a deleted id not_found), renewing the lease',
    incremental: true,
    async run(context) {
      const store = log(context);
      const { id, orchestrator, lease: first } = await begun(context, 'append', { leaseMs: 1_000 });
      const before = Date.now();
      const outcome = await store.append(entry(id, 2), first, LONG_LEASE_MS);
      const lease = renewedFrom(
        outcome,
        first,
        before,
        'append',
        `the append should apply, got ${JSON.stringify(outcome)}`,
      );
      const stored = await store.get(id);
      assert.deepEqual(
        [stored?.seq, stored?.dispatchCount, stored?.status, stored?.owner, stored?.leaseExpiresAt],
        [2, 4, 'running', first.owner, lease.expiresAt],
        'get() tells the appended seq, dispatch count and renewed lease',
      );
      const stranger = { ...lease, owner: context.owner('stranger') };
      assert.deepEqual(refused(await store.append(entry(id, 3), stranger, LONG_LEASE_MS)), {
        ok: false,
        reason: 'fenced',
        storedSeq: 2,
      });
      const stale = { ...lease, epoch: lease.epoch - 1 };
      assert.deepEqual(refused(await store.append(entry(id, 3), stale, LONG_LEASE_MS)), {
        ok: false,
        reason: 'fenced',
        storedSeq: 2,
      });
      assert.deepEqual(refused(await store.append(entry(id, 4), lease, LONG_LEASE_MS)), {
        ok: false,
        reason: 'sequence',
        storedSeq: 2,
      });
      assert.deepEqual(refused(await store.append(entry(id, 2, '"again"'), lease, LONG_LEASE_MS)), {
        ok: false,
        reason: 'sequence',
        storedSeq: 2,
      });
      // A commit's seq follows an entry's, and an entry's a commit's.
      assert.deepEqual(
        refused(await store.commit(checkpoint(id, orchestrator, 2), lease, LONG_LEASE_MS)),
        { ok: false, reason: 'sequence', storedSeq: 2 },
      );
      const renewed = await appended(store, entry(id, 3), lease);
      assert.equal((await store.get(id))?.seq, 3, 'the refused appends left the stored seq');
      // A lease past its expiry that nobody took still appends: the epoch fences, not the clock.
      const short = await store.renew(id, renewed, 30);
      assert.ok(short !== undefined, 'renew should answer the lease');
      await sleep(80);
      await appended(store, entry(id, 4), short);
      const back = await reread(context, id, short);
      assert.deepEqual(back.read[4], texts(id, 2, 4), 'only the applied entries are kept');
      await refusedOnceDeleted(store, id, 'an append', async () =>
        refused(await store.append(entry(id, 5), back.lease, LONG_LEASE_MS)),
      );
    },
  },
  {
    name: "append zombie: once another owner took over an expired lease, the old holder's append and snapshot are refused (fenced) and store nothing",
    incremental: true,
    async run(context) {
      const store = log(context);
      let {
        id,
        orchestrator,
        lease: old,
      } = await begun(context, 'append-zombie', { owner: 'old', leaseMs: 50 });
      old = await appended(store, entry(id, 2), old);
      const short = await store.renew(id, old, 50);
      assert.ok(short !== undefined);
      await sleep(150);
      const taken = await store.acquire(id, context.owner('new'), LONG_LEASE_MS);
      assert.deepEqual(read(taken).slice(1), [2, 4, JSON.stringify({ seq: 1 }), texts(id, 2, 2)]);
      assert.equal((taken as { takenOver: boolean }).takenOver, true);
      const fresh = (taken as { lease: Lease }).lease;
      const [zombie, holder] = await Promise.all([
        store.append(entry(id, 3, '"zombie"'), short, LONG_LEASE_MS),
        store.append(entry(id, 3, '"holder"'), fresh, LONG_LEASE_MS),
      ]);
      // The stored seq it answers is 2 or 3, as the two land.
      assert.deepEqual([zombie.ok, zombie.ok ? undefined : zombie.reason], [false, 'fenced']);
      assert.equal(holder.ok, true, 'the new holder appends');
      const zombieSnapshot = await store.snapshot(
        checkpoint(id, orchestrator, 3, { state: '"zombie snapshot"' }),
        short,
      );
      assert.deepEqual(zombieSnapshot, { ok: false, reason: 'fenced' });
      const back = await reread(context, id, (holder as { lease: Lease }).lease);
      assert.deepEqual(back.read.slice(1), [
        3,
        6,
        JSON.stringify({ seq: 1 }),
        [entry(id, 2).entry, '"holder"'],
      ]);
    },
  },
  {
    name: 'append racing: two writers racing acquire-and-append 40 times never fork the log: the entries are the applied ones, in seq order',
    incremental: true,
    async run(context) {
      const store = log(context);
      const { id } = await begun(context, 'append-fork', { owner: 'w0', leaseMs: 1 });
      const raced = await racedWrites(context, id, (seq, text, lease) =>
        store.append(entry(id, seq, text), lease, 1),
      );
      const { refusals } = raced;
      const wins = raced.wins.map((w) => w.text);
      assert.ok(wins.length > 0, 'at least one of the 40 appends should apply, none did');
      assert.ok(refusals > 0, 'at least one of the 40 should be refused or held, none was');
      await sleep(5);
      const [, seq, , , entries] = read(
        await store.acquire(id, context.owner('reader'), LONG_LEASE_MS),
      );
      const bySeq = [...wins].sort(
        (x, y) => (JSON.parse(x) as { seq: number }).seq - (JSON.parse(y) as { seq: number }).seq,
      );
      assert.deepEqual(entries, bySeq, 'the entries are the applied appends, once each, in order');
      assert.deepEqual(
        entries.map((e) => (JSON.parse(e) as { seq: number }).seq),
        Array.from({ length: wins.length }, (_, i) => i + 2),
        'every appended seq once, from 2 up',
      );
      assert.equal(seq, wins.length + 1);
    },
  },
  {
    name: 'append reads: acquire answers the base and the entries after it in order; get() and list() tell the latest seq and dispatchCount; an append after a suspension runs it again',
    incremental: true,
    async run(context) {
      const store = log(context);
      const { id, orchestrator } = named(context, 'append-read');
      const base = JSON.stringify({ base: 'héllo ✓ 𝄞 \u0000 "quoted"' });
      let lease = await created(
        context,
        checkpoint(id, orchestrator, 1, { state: base }),
        context.owner('a'),
      );
      lease = await appendRange(store, id, 2, 6, lease);
      const [listed] = await store.list({ orchestrator, limit: 10 });
      assert.deepEqual(
        [listed?.conversationId, listed?.seq, listed?.dispatchCount, listed?.status],
        [id, 6, 12, 'running'],
      );
      let back = await reread(context, id, lease);
      assert.deepEqual(back.read, ['running', 6, 12, base, texts(id, 2, 6)]);
      // A suspension is a whole commit; the next holder's append makes it running again.
      const suspended = checkpoint(id, orchestrator, 7, {
        status: 'suspended',
        dispatchCount: 12,
        suspendedAt: 1_700_000_000_000,
        state: '"suspended"',
      });
      const parked = await store.commit(suspended, back.lease, LONG_LEASE_MS);
      assert.ok(parked.ok, 'the suspended commit should apply');
      const resumed = await store.acquire(id, context.owner('b'), LONG_LEASE_MS);
      assert.deepEqual(read(resumed), ['suspended', 7, 12, '"suspended"', []]);
      lease = await appended(store, entry(id, 8), (resumed as { lease: Lease }).lease);
      const stored = await store.get(id);
      assert.deepEqual(
        [stored?.status, stored?.seq, stored?.dispatchCount, stored?.suspendedAt],
        ['running', 8, 16, undefined],
        'an append leaves the conversation running',
      );
      back = await reread(context, id, lease);
      assert.deepEqual(back.read, ['running', 8, 16, '"suspended"', texts(id, 8, 8)]);
    },
  },
  {
    name: 'snapshot: at a seq held as an entry it becomes the base and deletes the entries up to it (compacted counts them), keeps the later ones, the seq and the lease',
    incremental: true,
    async run(context) {
      const store = log(context);
      let { id, orchestrator, lease } = await withEntries(context, 'snapshot', 6);
      const before = await store.get(id);
      const at4 = checkpoint(id, orchestrator, 4, { dispatchCount: 8, state: '"snapshot 4"' });
      assert.deepEqual(await store.snapshot(at4, lease), { ok: true, compacted: 3 });
      const after = await store.get(id);
      assert.deepEqual(
        [after?.seq, after?.dispatchCount, after?.status, after?.owner, after?.leaseExpiresAt],
        [before?.seq, before?.dispatchCount, 'running', lease.owner, before?.leaseExpiresAt],
        'a snapshot changes neither the seq, the dispatch count nor the lease',
      );
      // The holder goes on appending behind its snapshot.
      lease = await appended(store, entry(id, 7), lease);
      let back = await reread(context, id, lease);
      assert.deepEqual(back.read, ['running', 7, 14, '"snapshot 4"', texts(id, 5, 7)]);
      const at7 = checkpoint(id, orchestrator, 7, { dispatchCount: 14, state: '"snapshot 7"' });
      assert.deepEqual(await store.snapshot(at7, back.lease), { ok: true, compacted: 3 });
      back = await reread(context, id, back.lease, 'second reader');
      assert.deepEqual(back.read, ['running', 7, 14, '"snapshot 7"', []]);
    },
  },
  {
    name: 'snapshot and append at once: a snapshot at the last entry and the next append, issued together, both apply',
    incremental: true,
    async run(context) {
      const store = log(context);
      const { id, orchestrator, lease } = await withEntries(context, 'snapshot-append', 5);
      const [snap, next] = await Promise.all([
        store.snapshot(checkpoint(id, orchestrator, 5, { state: '"at 5"' }), lease),
        store.append(entry(id, 6), lease, LONG_LEASE_MS),
      ]);
      assert.deepEqual(snap, { ok: true, compacted: 4 });
      assert.ok(next.ok, `the append should apply, got ${JSON.stringify(next)}`);
      const back = await reread(context, id, next.lease);
      assert.deepEqual(back.read, ['running', 6, 12, '"at 5"', texts(id, 6, 6)]);
    },
  },
  {
    name: 'snapshot refused: stale at a seq at or before the base, past the stored seq, or after a whole commit; fenced for another lease; not_found when deleted; each changes nothing',
    incremental: true,
    async run(context) {
      const store = log(context);
      const { id, orchestrator } = named(context, 'snapshot-stale');
      const snap = (seq: number, state: string) => checkpoint(id, orchestrator, seq, { state });
      let lease = await created(context, checkpoint(id, orchestrator, 1), context.owner('a'));
      assert.deepEqual(await store.snapshot(snap(1, '"at base"'), lease), {
        ok: false,
        reason: 'stale',
      });
      lease = await appendRange(store, id, 2, 5, lease);
      assert.deepEqual(await store.snapshot(snap(3, '"at 3"'), lease), { ok: true, compacted: 2 });
      for (const seq of [3, 2, 6]) {
        assert.deepEqual(
          await store.snapshot(snap(seq, `"refused ${seq}"`), lease),
          { ok: false, reason: 'stale' },
          `a snapshot at seq ${seq} (base 3, stored 5) is stale`,
        );
      }
      const stranger = { ...lease, owner: context.owner('stranger') };
      assert.deepEqual(await store.snapshot(snap(4, '"stranger"'), stranger), {
        ok: false,
        reason: 'fenced',
      });
      assert.deepEqual(
        await store.snapshot(snap(4, '"stale epoch"'), { ...lease, epoch: lease.epoch - 1 }),
        { ok: false, reason: 'fenced' },
      );
      let back = await reread(context, id, lease);
      assert.deepEqual(back.read, ['running', 5, 10, '"at 3"', texts(id, 4, 5)]);
      // After a whole commit there is no entry to snapshot: its seq and the earlier ones are stale.
      const whole = await store.commit(
        checkpoint(id, orchestrator, 6, { dispatchCount: 12, state: '"whole 6"' }),
        back.lease,
        LONG_LEASE_MS,
      );
      assert.ok(whole.ok, 'the whole commit should apply');
      for (const seq of [6, 5]) {
        assert.deepEqual(await store.snapshot(snap(seq, `"after whole ${seq}"`), whole.lease), {
          ok: false,
          reason: 'stale',
        });
      }
      back = await reread(context, id, whole.lease, 'second reader');
      assert.deepEqual(back.read, ['running', 6, 12, '"whole 6"', []]);
      await refusedOnceDeleted(store, id, 'a snapshot', () =>
        store.snapshot(snap(6, '"deleted"'), back.lease),
      );
    },
  },
  {
    name: 'whole commits: a commit after entries deletes them all; an ended conversation has none and takes no append',
    incremental: true,
    async run(context) {
      const store = log(context);
      let { id, orchestrator, lease } = await withEntries(context, 'whole', 4);
      const whole = await store.commit(
        checkpoint(id, orchestrator, 5, { dispatchCount: 9, state: '"whole 5"' }),
        lease,
        LONG_LEASE_MS,
      );
      assert.ok(whole.ok, 'the whole commit should apply');
      lease = await appended(store, entry(id, 6), whole.lease);
      const back = await reread(context, id, lease);
      assert.deepEqual(back.read, ['running', 6, 12, '"whole 5"', texts(id, 6, 6)]);
      lease = await appendRange(store, id, 7, 8, back.lease);
      const result = JSON.stringify({ ending: 'converged' });
      const end = checkpoint(id, orchestrator, 9, {
        status: 'ended',
        dispatchCount: 17,
        state: '"ended"',
        result,
      });
      const ended = await store.commit(end, lease, LONG_LEASE_MS);
      assert.ok(ended.ok, 'the ended commit should apply');
      const final = await store.acquire(id, context.owner('late'), LONG_LEASE_MS);
      assert.equal(final.status, 'ended');
      const { checkpoint: cp, entries } = final as { checkpoint: Checkpoint; entries?: unknown };
      assert.deepEqual(defined(cp), end, 'the ended checkpoint comes back whole');
      assert.equal(entries, undefined, 'an ended conversation answers no entries');
      assert.deepEqual(refused(await store.append(entry(id, 10), lease, LONG_LEASE_MS)), {
        ok: false,
        reason: 'fenced',
        storedSeq: 9,
      });
      assert.deepEqual(
        [(await store.get(id))?.seq, (await store.get(id))?.status],
        [9, 'ended'],
        'the refused append left the ended conversation',
      );
    },
  },
  {
    name: 'entry and snapshot size: an entry of exactly maxCheckpointBytes (UTF-8) is accepted and one byte more rejected; a snapshot likewise at maxSnapshotBytes; each refusal changes nothing',
    incremental: true,
    storeOptions: { maxSnapshotBytes: SNAPSHOT_LIMIT },
    async run(context) {
      const store = log(context);
      const entryLimit = store.maxCheckpointBytes;
      const snapshotLimit = store.maxSnapshotBytes ?? entryLimit;
      snapshotLimitApplied(store, snapshotLimit);
      let { id, orchestrator, lease } = await begun(context, 'entry-size');
      const atLimit = jsonOfBytes(entryLimit);
      lease = await appended(store, entry(id, 2, atLimit), lease);
      const error = await rejection('an append one byte past maxCheckpointBytes', () =>
        store.append(entry(id, 3, jsonOfBytes(entryLimit + 1)), lease, LONG_LEASE_MS),
      );
      assert.ok(
        error.message.includes(id) || error.message.includes(String(entryLimit)),
        `the error should name the conversation or the limit: ${error.message}`,
      );
      assert.equal((await store.get(id))?.seq, 2, 'the refused append left the stored seq');
      lease = await appended(store, entry(id, 3), lease);
      await rejection('a snapshot one byte past maxSnapshotBytes', () =>
        store.snapshot(
          checkpoint(id, orchestrator, 2, { state: jsonOfBytes(snapshotLimit + 1) }),
          lease,
        ),
      );
      let back = await reread(context, id, lease);
      assert.deepEqual(back.read, [
        'running',
        3,
        6,
        JSON.stringify({ seq: 1 }),
        [atLimit, entry(id, 3).entry],
      ]);
      const whole = jsonOfBytes(snapshotLimit);
      assert.deepEqual(
        await store.snapshot(checkpoint(id, orchestrator, 2, { state: whole }), back.lease),
        { ok: true, compacted: 1 },
      );
      back = await reread(context, id, back.lease, 'second reader');
      assert.equal(back.read[3] === whole, true, 'the snapshot at the limit comes back whole');
      assert.deepEqual(back.read[4], [entry(id, 3).entry]);
    },
  },
  {
    name: 'delete: removes the entries too; an id created again starts with none',
    incremental: true,
    async run(context) {
      const store = log(context);
      const { id, orchestrator } = await withEntries(context, 'entry-delete', 4);
      assert.equal(await store.delete(id), true);
      assert.equal(await store.get(id), undefined);
      const again = await created(
        context,
        checkpoint(id, orchestrator, 1, { state: '"again"' }),
        context.owner('b'),
      );
      const back = await reread(context, id, again);
      assert.deepEqual(back.read, ['running', 1, 0, '"again"', []]);
      const next = await appended(store, entry(id, 2, '"new 2"'), back.lease);
      const last = await reread(context, id, next, 'second reader');
      assert.deepEqual(last.read, ['running', 2, 4, '"again"', ['"new 2"']]);
    },
  },
  {
    name: 'appends of many conversations at once each get their own outcome (a refused one does not fail the others)',
    incremental: true,
    async run(context) {
      const store = log(context);
      await writesAtOnce(context, 'append-batch', (id, _orchestrator, seq, lease) =>
        store.append(entry(id, seq), lease, LONG_LEASE_MS),
      );
    },
  },
];
