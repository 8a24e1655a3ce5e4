/** The conformance kit against the PostgreSQL store on a real PostgreSQL 15 (a table per store). */
import { afterAll, beforeAll, describe } from 'vitest';
import { createPostgresStore } from '../../src/stores/postgres/index.ts';
import { hasPostgres, type RunningPostgres, startPostgres } from '../helpers/postgres.ts';
import { describeConversationStore } from '../helpers/store-conformance.ts';

let server: RunningPostgres;
let tables = 0;

describe.runIf(hasPostgres())('PostgreSQL store', () => {
  beforeAll(async () => {
    server = await startPostgres();
  });
  afterAll(async () => {
    await server?.stop();
  });
  describeConversationStore('the PostgreSQL store', (options) =>
    createPostgresStore({
      connectionString: server.connectionString,
      table: `conformance_${tables++}`,
      ...options,
    }),
  );
});
