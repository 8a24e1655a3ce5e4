/**
 * The PostgreSQL store under faults, on a real server: the server stopped as in a crash
 * (`pg_ctl stop -m immediate`) under commits and restarted, and writer processes SIGKILLed
 * mid-commit many times.
 */
import { describe, expect, it } from 'vitest';
import { createPostgresStore } from '../../src/stores/postgres/index.ts';
import { killServer, killWriters } from '../helpers/network-store-crash.ts';
import { hasPostgres } from '../helpers/postgres.ts';
import { postgresPerSuite } from '../helpers/postgres-suite.ts';

describe.runIf(hasPostgres())('PostgreSQL store under faults', () => {
  const server = postgresPerSuite();

  it('loses no acknowledged commit when the server crashes, fails calls clearly meanwhile, and works after the restart', async () => {
    const store = createPostgresStore({
      connectionString: server().connectionString,
      table: 'outage',
      connectTimeoutMs: 1_000,
      queryTimeoutMs: 2_000,
    });
    try {
      await killServer(
        store,
        { kill: () => server().crash(), restart: () => server().restart() },
        new RegExp(
          `^PostgreSQL store \\(postgres://postgres@127.0.0.1:${server().port}/postgres\\): (commit|get) of conversation "outage-\\d-\\d+"( \\(in a group commit of \\d+\\))? failed: `,
        ),
      );
    } finally {
      await store.close();
    }
  }, 120_000);

  it('connects and migrates once the server is up when its first call found it down', async () => {
    await server().crash();
    const store = createPostgresStore({
      connectionString: server().connectionString,
      table: 'late',
      connectTimeoutMs: 1_000,
    });
    try {
      await expect(store.get('x')).rejects.toThrow(
        `PostgreSQL store (postgres://postgres@127.0.0.1:${server().port}/postgres): connecting and migrating the schema failed: connect ECONNREFUSED`,
      );
    } finally {
      await server().restart();
    }
    try {
      expect(await store.get('x')).toBeUndefined();
    } finally {
      await store.close();
    }
  }, 60_000);

  it('keeps whole checkpoints and every confirmed commit across 12 SIGKILLs of the writer mid-commit', async () => {
    const store = createPostgresStore({
      connectionString: server().connectionString,
      table: 'crash',
    });
    try {
      await killWriters(store, ['postgres', server().connectionString, 'crash', '8'], 8, 12);
    } finally {
      await store.close();
    }
  }, 300_000);
});
