/**
 * The PostgreSQL store's incremental checkpoints against a real PostgreSQL 15: a table of schema
 * version 1 migrates in place (its conversations then take entries), appends of many
 * conversations in one tick go in one statement each fenced on its own row, and an append is one
 * statement (its entry and its row change together or not at all).
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/spi/store.ts';
import { createPostgresStore, SCHEMA_VERSION } from '../../src/stores/postgres/index.ts';
import { checkpoint, remoteOwner } from '../helpers/network-store-cases.ts';
import { hasPostgres } from '../helpers/postgres.ts';
import { checkGroupWrites, entry } from '../helpers/postgres-group-writes.ts';
import { postgresPerSuite } from '../helpers/postgres-suite.ts';

const LONG = 60_000;

/** Version 1's table as deployed (schema.ts's first migration). */
const VERSION_1 = (t: string) => `
  CREATE TABLE IF NOT EXISTS co_schema_versions (table_name text PRIMARY KEY, version integer NOT NULL);
  CREATE TABLE "${t}" (
    conversation_id text COLLATE "C" PRIMARY KEY, orchestrator text NOT NULL,
    status text NOT NULL CHECK (status IN ('running', 'suspended', 'ended')),
    seq bigint NOT NULL, dispatch_count bigint NOT NULL, state text NOT NULL, result text,
    suspended_at bigint, owner text, epoch bigint NOT NULL, lease_expires_at bigint,
    updated_at bigint NOT NULL, ended_at bigint
  ) WITH (fillfactor = 80);
  CREATE INDEX "${t}_by_status" ON "${t}" (status, conversation_id);
  CREATE INDEX "${t}_by_orchestrator" ON "${t}" (orchestrator, status, conversation_id);
  CREATE INDEX "${t}_ended" ON "${t}" (ended_at) WHERE status = 'ended';
  INSERT INTO co_schema_versions VALUES ('${t}', 1);
  INSERT INTO "${t}" VALUES ('old', 'desks', 'running', 3, 2, '{"old":true}', NULL, NULL, NULL, 4,
    NULL, 1, NULL);`;

describe.runIf(hasPostgres())('PostgreSQL store: incremental checkpoints', () => {
  const server = postgresPerSuite();

  it('migrates a table of schema version 1 in place: its conversation is kept and takes entries', async () => {
    expect(SCHEMA_VERSION).toBe(2);
    const table = `v1_${randomUUID().replaceAll('-', '')}`;
    const client = new pg.Client(server().connectionString);
    await client.connect();
    const store = createPostgresStore({ connectionString: server().connectionString, table });
    try {
      await client.query(VERSION_1(table));
      const taken = await store.acquire('old', remoteOwner(), LONG);
      expect(taken.status).toBe('acquired');
      const { checkpoint: cp, lease } = taken as {
        checkpoint: { seq: number; state: string };
        lease: Lease;
      };
      expect([cp.seq, cp.state, lease.epoch, 'entries' in taken]).toEqual([
        3,
        '{"old":true}',
        5,
        false,
      ]);
      const { rows } = await client.query(
        'SELECT version FROM co_schema_versions WHERE table_name = $1',
        [table],
      );
      expect(rows).toEqual([{ version: 2 }]);
      expect((await store.append(entry('old', 4), lease, LONG)).ok).toBe(true);
      await store.release('old', lease);
      const again = await store.acquire('old', remoteOwner(), LONG);
      expect((again as { entries?: unknown }).entries).toEqual(['{"seq":4}']);
      expect((again as { checkpoint: { seq: number } }).checkpoint.seq).toBe(4);
    } finally {
      await store.close();
      await client.end();
    }
  });

  it('appends 300 conversations that append in one tick in fewer statements, each fenced on its own', async () => {
    await checkGroupWrites(server().connectionString, 'append', async (group) => {
      const { store, pool, ids, leases } = group;
      const { rows } = await pool.query('SELECT count(*)::int AS n FROM "group_append_entries"');
      expect(rows).toEqual([{ n: 298 }]);
      // A second append of one conversation in the same tick waits for the first.
      const cid = ids[0] as string;
      const lease = leases[0] as Lease;
      const [third, fourth] = await group.twoAtOnce();
      expect([third.ok, fourth.ok]).toEqual([true, true]);
      await store.release(cid, lease);
      const back = await store.acquire(cid, remoteOwner(), LONG);
      expect((back as { entries?: unknown }).entries).toEqual([
        '{"seq":2}',
        '{"seq":3}',
        '{"seq":4}',
      ]);
    });
  });

  it('an append whose entry the database refuses changes neither the row nor the log', async () => {
    const table = `refuse_${randomUUID().replaceAll('-', '')}`;
    const store = createPostgresStore({ connectionString: server().connectionString, table });
    const client = new pg.Client(server().connectionString);
    await client.connect();
    try {
      const made = await store.create(checkpoint('c', 1), remoteOwner(), LONG);
      const lease = (made as { lease: Lease }).lease;
      expect((await store.append(entry('c', 2), lease, LONG)).ok).toBe(true);
      // A constraint that fails the insert half of the next append's statement.
      await client.query(
        `ALTER TABLE "${table}_entries" ADD CONSTRAINT no_three CHECK (entry <> '{"seq":3}')`,
      );
      await expect(store.append(entry('c', 3), lease, LONG)).rejects.toThrow(/no_three/);
      expect((await store.get('c'))?.seq).toBe(2);
      const { rows } = await client.query(`SELECT seq FROM "${table}_entries" ORDER BY seq`);
      expect(rows).toEqual([{ seq: '2' }]);
      await client.query(`ALTER TABLE "${table}_entries" DROP CONSTRAINT no_three`);
      expect((await store.append(entry('c', 3), lease, LONG)).ok).toBe(true);
    } finally {
      await store.close();
      await client.end();
    }
  });
});
