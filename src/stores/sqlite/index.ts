/**
 * `conversation-orchestrator/sqlite`: the embedded conversation store on better-sqlite3 (an
 * optional peer, `^12`), loaded when a store is created.
 */
export type { SqliteStoreOptions } from './options.ts';
export { createSqliteStore, type SqliteStore } from './store.ts';
