/** The store a test's child process is told to open on its command line. */
import type { ConversationStore } from '../../src/core/spi/store.ts';
import { createPostgresStore } from '../../src/stores/postgres/index.ts';
import { createRedisStore } from '../../src/stores/redis/index.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';

/**
 * `sqlite` on the file `where`, `postgres` on the connection string `where` (table `namespace`)
 * or `redis` at the URL `where` (key prefix `namespace`).
 */
export function openStore(kind: string, where: string, namespace: string): ConversationStore {
  return kind === 'sqlite'
    ? createSqliteStore({ path: where })
    : kind === 'postgres'
      ? createPostgresStore({ connectionString: where, table: namespace })
      : createRedisStore({ url: where, prefix: namespace });
}
