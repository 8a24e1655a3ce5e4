/**
 * What the PostgreSQL store's test files share: a server for the tests of a `describe`, and group
 * writes (300 conversations written in one tick on a store whose pool counts the statements of a
 * kind, so a test can tell they shared statements and that each was fenced on its own row).
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';
import type { Lease } from '../../src/core/spi/store.ts';
import { createPostgresStore } from '../../src/stores/postgres/index.ts';
import { checkpoint, remoteOwner } from './network-store-cases.ts';
import { type RunningPostgres, startPostgres } from './postgres.ts';

const LONG = 60_000;

type PostgresStore = ReturnType<typeof createPostgresStore>;

/**
 * A PostgreSQL server of its own for the tests of the `describe` this is called in: started
 * before them, stopped after them. `server()` is it, once started.
 */
export function postgresPerSuite(): () => RunningPostgres {
  let server: RunningPostgres | undefined;
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });
  return () => server as RunningPostgres;
}

export interface GroupWrites<O> {
  readonly store: PostgresStore;
  readonly pool: pg.Pool;
  readonly ids: readonly string[];
  readonly leases: readonly Lease[];
  /** What each write answered: conversation 5 wrote seq 4 (a gap), 7 a stale epoch. */
  readonly outcomes: readonly O[];
  /** The statements `counted` matched during the writes. */
  readonly statements: number;
  /** Two writes of the first conversation in one tick: seq 3 and 4 under its lease. */
  twoAtOnce(): Promise<[O, O]>;
  /** Closes the store, then the pool. */
  close(): Promise<void>;
}

/**
 * Creates 300 conversations (seq 1) in the table `table` on `connectionString`, then calls
 * `write(id, seq, lease)` for all in one tick: seq 2 under each one's lease, but seq 4 for
 * conversation 5 and a stale epoch (9) for conversation 7. Counts the statements whose text
 * `counted` matches from the first write on.
 */
export async function groupWrites<O>(
  connectionString: string,
  table: string,
  counted: (text: string) => boolean,
  write: (store: PostgresStore, id: string, seq: number, lease: Lease) => Promise<O>,
): Promise<GroupWrites<O>> {
  const pool = new pg.Pool({ connectionString });
  pool.on('error', () => {});
  let statements = 0;
  const counting = {
    query: (q: { text: string; values?: unknown[] }) => {
      if (counted(q.text)) statements++;
      return pool.query(q) as never;
    },
    connect: () => pool.connect() as never,
  };
  const store = createPostgresStore({ pool: counting, table });
  const close = async () => {
    await store.close();
    await pool.end();
  };
  try {
    const ids = Array.from({ length: 300 }, () => `g-${randomUUID()}`);
    const leases = await Promise.all(
      ids.map(
        async (cid) =>
          ((await store.create(checkpoint(cid, 1), remoteOwner(), LONG)) as { lease: Lease }).lease,
      ),
    );
    statements = 0;
    const stale = { ...(leases[7] as Lease), epoch: 9 };
    const outcomes = await Promise.all(
      ids.map((cid, i) =>
        write(store, cid, i === 5 ? 4 : 2, i === 7 ? stale : (leases[i] as Lease)),
      ),
    );
    const twoAtOnce = () =>
      Promise.all([
        write(store, ids[0] as string, 3, leases[0] as Lease),
        write(store, ids[0] as string, 4, leases[0] as Lease),
      ]);
    return { store, pool, ids, leases, outcomes, statements, twoAtOnce, close };
  } catch (error) {
    await close();
    throw error;
  }
}
