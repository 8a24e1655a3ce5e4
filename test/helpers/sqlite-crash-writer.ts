/**
 * A child process for the SQLite crash test: commits checkpoints of CONVERSATIONS conversations
 * in a tight loop (all of them each turn, so they share group commits) until it is killed.
 * Prints `ready` once it holds them all, then `id seq` after each commit that resolved: what it
 * prints was committed, so the parent can check nothing printed was lost.
 * State texts vary in size (up to ~20 KB, overflow pages) so a torn write would show.
 */
import { newLeaseOwner, setLeaseOwnerLive } from '../../src/core/lease-owner.ts';
import type { Checkpoint, Lease } from '../../src/core/store.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';

const [path, count] = [process.argv[2] as string, Number(process.argv[3] ?? 8)];
const store = createSqliteStore({ path });
const owner = newLeaseOwner();
setLeaseOwnerLive(owner, true);

/** The state text of a checkpoint: it names its conversation and seq, and its pad says its length. */
function state(id: string, seq: number): string {
  const length = (seq * 7919) % 20_000;
  return JSON.stringify({ id, seq, length, pad: 'x'.repeat(length) });
}
const checkpoint = (id: string, seq: number): Checkpoint => ({
  conversationId: id,
  orchestrator: 'crash',
  status: 'running',
  seq,
  dispatchCount: seq - 1,
  state: state(id, seq),
});

const held = new Map<string, { lease: Lease; seq: number }>();
for (let i = 0; i < count; i++) {
  const id = `c${i}`;
  const acquired = await store.acquire(id, owner, 60_000);
  if (acquired.status === 'acquired') {
    held.set(id, { lease: acquired.lease, seq: acquired.checkpoint.seq });
  } else if (acquired.status === 'not_found') {
    const created = await store.create(checkpoint(id, 1), owner, 60_000);
    if (!created.created) throw new Error(`could not create ${id}`);
    held.set(id, { lease: created.lease, seq: 1 });
  } else {
    throw new Error(`${id}: ${acquired.status}`);
  }
}
process.stdout.write('ready\n');
for (;;) {
  await Promise.all(
    [...held].map(async ([id, h]) => {
      const outcome = await store.commit(checkpoint(id, h.seq + 1), h.lease, 60_000);
      if (!outcome.ok) throw new Error(`${id} seq ${h.seq + 1}: ${outcome.reason}`);
      h.seq += 1;
      h.lease = outcome.lease;
      process.stdout.write(`${id} ${h.seq}\n`);
    }),
  );
}
