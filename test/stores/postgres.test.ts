/**
 * The PostgreSQL store against a real PostgreSQL 15 started by the test: every method and its
 * races (test/helpers/network-store-cases.ts), the schema's migrations, group commit, retention
 * and bad servers.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/spi/store.ts';
import { createPostgresStore, SCHEMA_VERSION } from '../../src/stores/postgres/index.ts';
import { checkpoint, remoteOwner, storeCases } from '../helpers/network-store-cases.ts';
import { hasPostgres, startPostgres } from '../helpers/postgres.ts';
import { checkGroupWrites } from '../helpers/postgres-group-writes.ts';
import { postgresPerSuite } from '../helpers/postgres-suite.ts';
import { freePort } from '../helpers/prometheus.ts';
import { silentServer } from '../helpers/silent-server.ts';

const LONG = 60_000;

describe.runIf(hasPostgres())('PostgreSQL store', () => {
  const server = postgresPerSuite();

  // maxSnapshotBytes below its 256 MiB default: the size case builds a string one byte past it.
  storeCases('postgres', () =>
    createPostgresStore({
      connectionString: server().connectionString,
      maxSnapshotBytes: 20 * 1024 * 1024,
    }),
  );

  describe('schema', () => {
    it('creates its table at the current version, once, when four processes start at once', async () => {
      const table = `t_${randomUUID().replaceAll('-', '')}`;
      const stores = Array.from({ length: 4 }, () =>
        createPostgresStore({ connectionString: server().connectionString, table }),
      );
      await Promise.all(stores.map((s) => s.ready()));
      const client = new pg.Client(server().connectionString);
      await client.connect();
      try {
        const { rows } = await client.query(
          'SELECT version FROM co_schema_versions WHERE table_name = $1',
          [table],
        );
        expect(rows).toEqual([{ version: SCHEMA_VERSION }]);
        // Opening it again changes nothing and works.
        const again = createPostgresStore({ connectionString: server().connectionString, table });
        expect((await again.create(checkpoint('a', 1), remoteOwner(), LONG)).created).toBe(true);
        await again.close();
      } finally {
        await client.end();
        await Promise.all(stores.map((s) => s.close()));
      }
    });

    it('refuses a table of a newer schema version with a clear error and changes nothing', async () => {
      const table = `t_${randomUUID().replaceAll('-', '')}`;
      const first = createPostgresStore({ connectionString: server().connectionString, table });
      await first.create(checkpoint('kept', 1), remoteOwner(), LONG);
      await first.close();
      const client = new pg.Client(server().connectionString);
      await client.connect();
      try {
        await client.query('UPDATE co_schema_versions SET version = 99 WHERE table_name = $1', [
          table,
        ]);
        const newer = createPostgresStore({ connectionString: server().connectionString, table });
        const expected = `PostgreSQL store (postgres://postgres@127.0.0.1:${server().port}/postgres): connecting and migrating the schema failed: table "${table}" is at schema version 99, newer than the ${SCHEMA_VERSION} this version of conversation-orchestrator knows: upgrade the package (or point the store at another table); nothing was changed`;
        await expect(newer.ready()).rejects.toThrow(expected);
        await expect(newer.get('kept')).rejects.toThrow(expected);
        await newer.close();
        const { rows } = await client.query(`SELECT seq FROM "${table}"`);
        expect(rows).toEqual([{ seq: '1' }]);
      } finally {
        await client.end();
      }
    });
  });

  describe('group commit', () => {
    it('commits 300 conversations that commit in one tick in fewer statements, each fenced on its own', async () => {
      await checkGroupWrites(server().connectionString, 'commit', async (group) => {
        const { store, ids } = group;
        const seqs = await Promise.all(ids.map(async (cid) => (await store.get(cid))?.seq));
        expect(seqs.filter((s) => s === 2)).toHaveLength(298);
        // A second commit of one conversation in the same tick waits for the first.
        const cid = ids[0] as string;
        const [third, fourth] = await group.twoAtOnce();
        expect([third.ok, fourth.ok]).toEqual([true, true]);
        expect((await store.get(cid))?.seq).toBe(4);
      });
    });
  });

  describe('retention', () => {
    it('purgeExpired() deletes ended conversations past retentionMs, and only those', async () => {
      const store = createPostgresStore({
        connectionString: server().connectionString,
        table: 'retention',
        retentionMs: 0,
      });
      try {
        const ended = `e-${randomUUID()}`;
        const running = `r-${randomUUID()}`;
        const { lease } = (await store.create(checkpoint(ended, 1), remoteOwner(), LONG)) as {
          lease: Lease;
        };
        await store.create(checkpoint(running, 1), remoteOwner(), LONG);
        await store.commit(checkpoint(ended, 2, { status: 'ended', result: '{}' }), lease, LONG);
        await new Promise((r) => setTimeout(r, 5));
        expect(await store.purgeExpired()).toBe(1);
        expect(await store.get(ended)).toBeUndefined();
        expect((await store.get(running))?.status).toBe('running');
        expect(await store.purgeExpired()).toBe(0);
      } finally {
        await store.close();
      }
    });
  });

  describe('ownership of the pool', () => {
    it('leaves a given pool open when it closes', async () => {
      const pool = new pg.Pool({ connectionString: server().connectionString });
      const store = createPostgresStore({ pool });
      await store.get('nobody');
      await store.close();
      expect((await pool.query('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
      await pool.end();
    });
  });

  describe('bad servers and bad options', () => {
    // Accepts connections and never says a word.
    const silent = silentServer();

    it('fails a call to a server that never answers within connectTimeoutMs, naming the store', async () => {
      const store = createPostgresStore({
        connectionString: `postgres://u:secret@127.0.0.1:${silent.port}/db`,
        connectTimeoutMs: 300,
      });
      await expect(store.get('x')).rejects.toThrow(
        `PostgreSQL store (postgres://u@127.0.0.1:${silent.port}/db): connecting and migrating the schema failed: could not connect within connectTimeoutMs`,
      );
      await store.close();
    });

    it('fails a call to a port nobody listens on, and to a host that does not exist', async () => {
      const port = await freePort();
      const refused = createPostgresStore({
        connectionString: `postgres://u@127.0.0.1:${port}/db`,
      });
      await expect(refused.get('x')).rejects.toThrow(
        new RegExp(
          `^PostgreSQL store \\(postgres://u@127.0.0.1:${port}/db\\): connecting and migrating the schema failed: connect ECONNREFUSED 127.0.0.1:${port}`,
        ),
      );
      await refused.close();
      const nowhere = createPostgresStore({
        connectionString: 'postgres://u@no-such-host.invalid:5432/db',
      });
      await expect(nowhere.get('x')).rejects.toThrow(
        /^PostgreSQL store \(postgres:\/\/u@no-such-host.invalid:5432\/db\): connecting and migrating the schema failed: getaddrinfo (ENOTFOUND|EAI_AGAIN) no-such-host.invalid/,
      );
      await nowhere.close();
    });

    it('fails with a wrong password, naming the store and the refusal, the password not shown', async () => {
      const guarded = await startPostgres({ password: 'right-one' });
      try {
        const wrong = guarded.connectionString.replace('right-one', 'wrong-one');
        const store = createPostgresStore({ connectionString: wrong });
        await expect(store.ready()).rejects.toThrow(
          `PostgreSQL store (postgres://postgres@127.0.0.1:${guarded.port}/postgres): connecting and migrating the schema failed: password authentication failed for user "postgres" (28P01)`,
        );
        await store.close();
        const right = createPostgresStore({ connectionString: guarded.connectionString });
        await right.ready();
        await right.close();
      } finally {
        await guarded.stop();
      }
    });

    it('rejects bad options at construction with the value shown', () => {
      expect(() =>
        createPostgresStore({ connectionString: server().connectionString, table: 'x; drop' }),
      ).toThrow(
        'Expected `table` to be 1-63 letters, digits or _ (not starting with a digit), got `"x; drop"` (string) (createPostgresStore)',
      );
      expect(() =>
        createPostgresStore({ connectionString: server().connectionString, retentionMs: -1 }),
      ).toThrow(
        'Expected `retentionMs` to be an integer >= 0, got `-1` (number) (createPostgresStore)',
      );
      expect(() => createPostgresStore({} as never)).toThrow(
        'Expected createPostgresStore options with `pool` (a pg Pool) or `connectionString` (a string), got keys []',
      );
    });
  });
});
