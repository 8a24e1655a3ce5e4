/**
 * The store's tables, created and migrated by the store itself. Versioned: `co_schema_versions`
 * holds one row per conversations table with the version its columns are at. Idempotent and safe
 * when several processes start at once: the whole migration runs in one transaction under a
 * transaction-scoped advisory lock, so the second process waits and then finds the table at the
 * current version. A table at a version newer than this code knows is refused, not touched.
 */
import { OrchestratorError } from '../../core/spi/errors.ts';
import { NEWER_SCHEMA_CODE } from '../shared/store-error.ts';
import type { PostgresPoolClient } from './options.ts';

/** The schema version this code writes and reads. */
export const SCHEMA_VERSION = 2;

/** The table that records each conversations table's schema version. */
export const VERSIONS_TABLE = 'co_schema_versions';

/** `pg_advisory_xact_lock` key of the migrations (any constant both processes agree on). */
const LOCK_KEY = "hashtext('conversation-orchestrator:migrations')";

/**
 * Migration `i` takes the table from version `i` to `i + 1`. Append, never edit: a deployed table
 * has run the ones before.
 */
const MIGRATIONS: readonly ((table: string) => string)[] = [
  // 1: one row per conversation: the checkpoint (replaced on each commit), its lease, its times.
  // Times are epoch milliseconds of the server's clock. Ids sort bytewise (COLLATE "C"), as in
  // JavaScript, so `list()` pages the same way whatever the database's collation. No index
  // covers a column a running commit changes (seq, state, lease, updated_at), so those commits
  // are HOT updates (no index writes), given room on the page (fillfactor 80).
  (t) => `
    CREATE TABLE "${t}" (
      conversation_id text COLLATE "C" PRIMARY KEY,
      orchestrator text NOT NULL,
      status text NOT NULL CHECK (status IN ('running', 'suspended', 'ended')),
      seq bigint NOT NULL,
      dispatch_count bigint NOT NULL,
      state text NOT NULL,
      result text,
      suspended_at bigint,
      owner text,
      epoch bigint NOT NULL,
      lease_expires_at bigint,
      updated_at bigint NOT NULL,
      ended_at bigint
    ) WITH (fillfactor = 80);
    CREATE INDEX "${t}_by_status" ON "${t}" (status, conversation_id);
    CREATE INDEX "${t}_by_orchestrator" ON "${t}" (orchestrator, status, conversation_id);
    CREATE INDEX "${t}_ended" ON "${t}" (ended_at) WHERE status = 'ended';
  `,
  // 2: incremental checkpoints (issue 41). `state` is the base (a whole checkpoint or a
  // snapshot); `base_seq` its seq when entries follow it, NULL when the base is at `seq` (a whole
  // commit; every version-1 row). The entries after the base are rows of `{t}_entries`, deleted
  // with their conversation (the cascade also covers delete() and purgeExpired()). Adding a
  // nullable column rewrites nothing, so the migration is instant on a large table.
  (t) => `
    ALTER TABLE "${t}" ADD COLUMN base_seq bigint;
    CREATE TABLE "${t}_entries" (
      conversation_id text COLLATE "C" NOT NULL REFERENCES "${t}" (conversation_id) ON DELETE CASCADE,
      seq bigint NOT NULL,
      entry text NOT NULL,
      PRIMARY KEY (conversation_id, seq)
    );
  `,
];

/** Thrown (wrapped by the store) when the table was made by a newer version of this package. */
export class NewerSchemaError extends OrchestratorError {
  override name = 'NewerSchemaError';
  override readonly code: string = NEWER_SCHEMA_CODE;
  constructor(table: string, found: number) {
    super(
      `table "${table}" is at schema version ${found}, newer than the ${SCHEMA_VERSION} this version of conversation-orchestrator knows: upgrade the package (or point the store at another table); nothing was changed`,
    );
  }
}

/** Brings `table` to SCHEMA_VERSION in one transaction; throws NewerSchemaError for a newer one. */
export async function migrate(
  client: PostgresPoolClient,
  table: string,
  timeoutMs: number,
): Promise<void> {
  const q = (text: string, values?: unknown[]) =>
    client.query({ text, ...(values === undefined ? {} : { values }), query_timeout: timeoutMs });
  await q('BEGIN');
  try {
    await q(`SELECT pg_advisory_xact_lock(${LOCK_KEY})`);
    await q(
      `CREATE TABLE IF NOT EXISTS "${VERSIONS_TABLE}" (table_name text PRIMARY KEY, version integer NOT NULL)`,
    );
    const { rows } = await q(`SELECT version FROM "${VERSIONS_TABLE}" WHERE table_name = $1`, [
      table,
    ]);
    const found = rows.length === 0 ? 0 : Number(rows[0]?.version);
    if (found > SCHEMA_VERSION) throw new NewerSchemaError(table, found);
    for (let version = found; version < SCHEMA_VERSION; version++) {
      await q((MIGRATIONS[version] as (t: string) => string)(table));
    }
    if (found < SCHEMA_VERSION) {
      await q(
        `INSERT INTO "${VERSIONS_TABLE}" (table_name, version) VALUES ($1, $2)
         ON CONFLICT (table_name) DO UPDATE SET version = EXCLUDED.version`,
        [table, SCHEMA_VERSION],
      );
    }
    await q('COMMIT');
  } catch (error) {
    await q('ROLLBACK').catch(() => {});
    throw error;
  }
}
