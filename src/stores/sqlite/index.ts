/**
 * `conversation-orchestrator/sqlite`: the embedded conversation store on better-sqlite3 (an
 * optional peer, `^12`), loaded when a store is created.
 */
import type { ConversationStore } from '../../core/spi/store.ts';
import type { SqliteStoreOptions } from './options.ts';
import { SqliteConversationStore } from './store.ts';

export type { SqliteStoreOptions } from './options.ts';

/**
 * A conversation store in one SQLite file (WAL, `synchronous=FULL` by default), shared safely by
 * the processes of one host. Commits arriving in the same turn of the event loop share one
 * transaction (group commit). Throws at once when better-sqlite3 is not installed, the file
 * cannot be opened for writing, or it holds a schema newer than this version writes.
 *
 * @example
 * ```ts
 * import { createSqliteStore } from 'conversation-orchestrator/sqlite';
 * const store = createSqliteStore({ path: 'conversations.db' });
 * ```
 */
export function createSqliteStore(options: SqliteStoreOptions): ConversationStore {
  return new SqliteConversationStore(options);
}
