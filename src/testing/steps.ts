/**
 * Steps that several checks take alike: a create and a commit that must apply, a conversation
 * begun for a check, two writers racing acquire-and-write, and writes of many conversations at
 * once.
 */
import assert from 'node:assert/strict';
import type { AcquireOutcome, Checkpoint, Lease } from '../core/spi/store.ts';
import { type CheckContext, checkpoint, defined, LONG_LEASE_MS, sleep } from './kit.ts';

/** Creates `cp` as `owner`, asserting it did: the creator's lease. */
export async function created(
  context: CheckContext,
  cp: Checkpoint,
  owner: string,
  leaseMs = LONG_LEASE_MS,
): Promise<Lease> {
  const outcome = await context.store.create(cp, owner, leaseMs);
  assert.equal(outcome.created, true, `create of ${cp.conversationId} should create it`);
  return (outcome as { lease: Lease }).lease;
}

/** Commits `cp` under `lease`, asserting it applied: the renewed lease. */
export async function committed(
  context: CheckContext,
  cp: Checkpoint,
  lease: Lease,
): Promise<Lease> {
  const outcome = await context.store.commit(cp, lease, LONG_LEASE_MS);
  assert.deepEqual(
    defined(outcome),
    { ok: true, lease: outcome.ok ? outcome.lease : undefined },
    `commit of ${cp.conversationId} seq ${cp.seq} should apply`,
  );
  return (outcome as { lease: Lease }).lease;
}

/**
 * Asserts that `outcome` applied (`applies` says so otherwise) and renewed `held` from `before`:
 * the same owner and epoch, the lease running `LONG_LEASE_MS` from the `what`. The renewed lease.
 */
export function renewedFrom(
  outcome: { readonly ok: true; readonly lease: Lease } | { readonly ok: false },
  held: Lease,
  before: number,
  what: 'commit' | 'append',
  applies: string,
): Lease {
  assert.ok(outcome.ok, applies);
  assert.deepEqual([outcome.lease.owner, outcome.lease.epoch], [held.owner, held.epoch]);
  assert.ok(
    outcome.lease.expiresAt >= before + LONG_LEASE_MS - 1_000,
    `the lease should run ${LONG_LEASE_MS} ms from the ${what}, expires at ${outcome.lease.expiresAt} (${what} at ${before})`,
  );
  return outcome.lease;
}

/** What a commit or an append answers, as far as these steps read it. */
type WriteOutcome = { readonly ok: true } | { readonly ok: false; readonly reason: string };

/** The conversation id and the orchestrator name of `label`, unique to this run of the kit. */
export function named(context: CheckContext, label: string): { id: string; orchestrator: string } {
  return { id: context.id(label), orchestrator: context.orchestrator(label) };
}

/**
 * The conversation of `label` (`context.id(label)`, `context.orchestrator(label)`) created at
 * seq 1 (with `fields`) by `owner` (`a`) for `leaseMs`: its ids and the creator's lease.
 */
export async function begun(
  context: CheckContext,
  label: string,
  options: {
    readonly owner?: string;
    readonly leaseMs?: number;
    readonly fields?: Partial<Omit<Checkpoint, 'conversationId' | 'seq'>>;
  } = {},
): Promise<{ id: string; orchestrator: string; lease: Lease }> {
  const { id, orchestrator } = named(context, label);
  const lease = await created(
    context,
    checkpoint(id, orchestrator, 1, options.fields),
    context.owner(options.owner ?? 'a'),
    options.leaseMs,
  );
  return { id, orchestrator, lease };
}

/**
 * Two writers racing acquire-and-write on `id` 40 times. In each of 20 rounds `w1` and `w2` (in
 * turn first) acquire a 1 ms lease 3 ms apart: by the time the second asks, the first one's has
 * lapsed and is taken over while the first still believes it holds it. Both then write at once
 * (`write`, with the text `{writer, seq}` and a 1 ms lease) the next seq of what each read: one
 * of them at most may apply. Answers the writes that applied and how many acquires or writes
 * were held or refused (a refusal is never `not_found`).
 */
export async function racedWrites(
  context: CheckContext,
  id: string,
  write: (seq: number, text: string, lease: Lease) => Promise<WriteOutcome>,
): Promise<{ wins: { seq: number; text: string }[]; refusals: number }> {
  const wins: { seq: number; text: string }[] = [];
  let refusals = 0;
  const writeFrom = async (outcome: AcquireOutcome) => {
    if (outcome.status !== 'acquired') {
      refusals += 1;
      return;
    }
    const seq = outcome.checkpoint.seq + 1;
    const text = JSON.stringify({ writer: outcome.lease.owner, seq });
    const result = await write(seq, text, outcome.lease);
    if (result.ok) wins.push({ seq, text });
    else {
      assert.notEqual(result.reason, 'not_found');
      refusals += 1;
    }
  };
  for (let round = 0; round < 20; round++) {
    const [first, second] = round % 2 === 0 ? ['w1', 'w2'] : ['w2', 'w1'];
    await sleep(3);
    const a = await context.store.acquire(id, context.owner(first), 1);
    await sleep(3);
    const b = await context.store.acquire(id, context.owner(second), 1);
    await Promise.all([writeFrom(a), writeFrom(b)]);
  }
  return { wins, refusals };
}

/**
 * Twenty conversations of `label` (ids `label-0`..`label-19`) created by `a`, then all written
 * in one turn of the event loop (`write`): the even ones at seq 2, which apply, the odd ones at
 * seq 3, a gap refused with `sequence`. Each gets its own outcome, and the stored seqs say so.
 */
export async function writesAtOnce(
  context: CheckContext,
  label: string,
  write: (id: string, orchestrator: string, seq: number, lease: Lease) => Promise<WriteOutcome>,
): Promise<void> {
  const orchestrator = context.orchestrator(label);
  const ids = Array.from({ length: 20 }, (_, i) => context.id(`${label}-${i}`));
  const leases = await Promise.all(
    ids.map((id) => created(context, checkpoint(id, orchestrator, 1), context.owner('a'))),
  );
  const outcomes = await Promise.all(
    ids.map((id, i) => write(id, orchestrator, i % 2 === 0 ? 2 : 3, leases[i] as Lease)),
  );
  assert.deepEqual(
    outcomes.map((o) => (o.ok ? 'ok' : o.reason)),
    ids.map((_, i) => (i % 2 === 0 ? 'ok' : 'sequence')),
  );
  const seqs = await Promise.all(ids.map(async (id) => (await context.store.get(id))?.seq));
  assert.deepEqual(
    seqs,
    ids.map((_, i) => (i % 2 === 0 ? 2 : 1)),
  );
}

/** How many conversations of `orchestrator` `list()` tells as unleased (up to 10). */
export async function unleasedCount(context: CheckContext, orchestrator: string): Promise<number> {
  return (await context.store.list({ orchestrator, unleased: true, limit: 10 })).length;
}
