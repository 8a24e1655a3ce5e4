/** The conformance kit against the PostgreSQL store on a real PostgreSQL 15 (a table per store). */
import { describe } from 'vitest';
import { createPostgresStore } from '../../src/stores/postgres/index.ts';
import { hasPostgres } from '../helpers/postgres.ts';
import { postgresPerSuite } from '../helpers/postgres-suite.ts';
import { describeConversationStore } from '../helpers/store-conformance.ts';

let tables = 0;

describe.runIf(hasPostgres())('PostgreSQL store', () => {
  const server = postgresPerSuite();
  describeConversationStore('the PostgreSQL store', (options) =>
    createPostgresStore({
      connectionString: server().connectionString,
      table: `conformance_${tables++}`,
      ...options,
    }),
  );
});
