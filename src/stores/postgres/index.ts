/**
 * `conversation-orchestrator/postgres`: the PostgreSQL conversation store, on `pg` (an optional
 * peer dependency: install it to use this entry point).
 */
export type {
  PostgresConnectionOptions,
  PostgresPool,
  PostgresPoolClient,
  PostgresPoolOptions,
  PostgresQuery,
  PostgresResult,
  PostgresStoreCommonOptions,
  PostgresStoreOptions,
} from './options.ts';
export { SCHEMA_VERSION } from './schema.ts';
export { createPostgresStore, type PostgresStore } from './store.ts';
