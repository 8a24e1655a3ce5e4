/**
 * The PostgreSQL store's two group writes (commits and appends) as one table, each with the
 * statement that carries a group, run through test/helpers/postgres-suite.ts's groupWrites with
 * what every group must answer: the 300 writes shared at most three statements, and each was
 * fenced on its own row (conversation 5's gap refused by its seq, 7's stale epoch as fenced, the
 * other 298 written).
 */
import { expect } from 'vitest';
import type { CheckpointEntry } from '../../src/core/spi/store.ts';
import { checkpoint } from './network-store-cases.ts';
import { type GroupWrites, groupWrites } from './postgres-suite.ts';

const LONG = 60_000;

/** The entry of dispatch `seq - 1` of `conversationId`: its seq, as JSON. */
export const entry = (conversationId: string, seq: number): CheckpointEntry => ({
  conversationId,
  seq,
  dispatchCount: seq - 1,
  entry: JSON.stringify({ seq }),
});

type Write = Parameters<typeof groupWrites<{ ok: boolean }>>[3];

const KINDS: Record<'commit' | 'append', { counted: (text: string) => boolean; write: Write }> = {
  commit: {
    counted: (text) => text.includes('UPDATE') && text.includes('seq - 1'),
    write: (store, cid, seq, lease) => store.commit(checkpoint(cid, seq), lease, LONG),
  },
  append: {
    counted: (text) => text.includes('INSERT INTO') && text.includes('_entries"'),
    write: (store, cid, seq, lease) => store.append(entry(cid, seq), lease, LONG),
  },
};

/**
 * Group writes of `kind` in the table `group_<kind>` on `connectionString`: expects them shared
 * and fenced each on its own, then runs `check` on them; closes them whatever happens.
 */
export async function checkGroupWrites(
  connectionString: string,
  kind: 'commit' | 'append',
  check: (group: GroupWrites<{ ok: boolean }>) => Promise<void>,
): Promise<void> {
  const { counted, write } = KINDS[kind];
  const group = await groupWrites(connectionString, `group_${kind}`, counted, write);
  try {
    expect(group.statements).toBeLessThanOrEqual(3);
    expect(group.outcomes.filter((o) => o.ok)).toHaveLength(298);
    expect(group.outcomes[5]).toEqual({ ok: false, reason: 'sequence', storedSeq: 1 });
    expect(group.outcomes[7]).toEqual({ ok: false, reason: 'fenced', storedSeq: 1 });
    await check(group);
  } finally {
    await group.close();
  }
}
