/**
 * A child process for the stores' crash tests: commits checkpoints of `count` conversations in a
 * tight loop (all of them each turn, so they share group commits) until it is killed. Prints
 * `ready` once it holds them all, then `id seq` after each commit that resolved ok: what it prints
 * was committed, so the parent can check nothing printed was lost. States are crash-state.ts's.
 *
 * argv: `sqlite <path> <count>`, `postgres <connectionString> <table> <count>` or
 * `redis <url> <prefix> <count>`.
 */
import { newLeaseOwner, setLeaseOwnerLive } from '../../src/core/durable/lease-owner.ts';
import type { Checkpoint, Lease } from '../../src/core/spi/store.ts';
import { crashState } from './crash-state.ts';
import { openStore } from './open-store.ts';

const [kind, where, ...rest] = process.argv.slice(2) as [string, string, ...string[]];
const namespace = rest.length > 1 ? (rest[0] as string) : '';
const count = Number(rest.at(-1) ?? 8);
const store = openStore(kind, where, namespace);
const owner = newLeaseOwner();
setLeaseOwnerLive(owner, true);
const checkpoint = (id: string, seq: number): Checkpoint => ({
  conversationId: id,
  orchestrator: 'crash',
  status: 'running',
  seq,
  dispatchCount: seq - 1,
  state: crashState(id, seq),
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
