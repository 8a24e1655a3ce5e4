/**
 * The store's statements. Each change is one statement (atomic on its own, no transaction held
 * across round trips; an append's update and insert, a commit's update and the entries' delete
 * are data-modifying CTEs of one statement); every time is the server's clock (`now()`, epoch
 * milliseconds).
 */
import { PURGE_BATCH } from '../shared/purge.ts';

/** The server's clock in epoch milliseconds (`now()`: the statement's start, one value per statement). */
const NOW = `(extract(epoch from now()) * 1000)::bigint`;

/** Columns `get`/`list` read (not `state`: it can be megabytes and only `acquire` needs it). */
const SUMMARY = `conversation_id, orchestrator, status, seq, dispatch_count, result, suspended_at,
  owner, epoch, lease_expires_at, updated_at, ${NOW} AS now_ms`;

export interface Statements {
  readonly create: string;
  readonly acquire: string;
  readonly commitOne: string;
  readonly commitMany: string;
  readonly appendOne: string;
  readonly appendMany: string;
  readonly snapshot: string;
  readonly entries: string;
  readonly renew: string;
  readonly release: string;
  readonly get: string;
  readonly delete: string;
  readonly list: string;
  readonly stats: string;
  readonly purge: string;
}

export function statements(table: string): Statements {
  const t = `"${table}"`;
  const e = `"${table}_entries"`;
  /** The assignments of a commit from a row `i` of its input. */
  const commitSet = (i: string) => `
    status = ${i}.status, seq = ${i}.seq, dispatch_count = ${i}.dispatch_count, state = ${i}.state,
    result = ${i}.result, suspended_at = ${i}.suspended_at, base_seq = NULL,
    owner = CASE WHEN ${i}.status = 'running' THEN c.owner END,
    lease_expires_at = CASE WHEN ${i}.status = 'running' THEN ${NOW} + ${i}.lease_ms END,
    updated_at = ${NOW}, ended_at = CASE WHEN ${i}.status = 'ended' THEN ${NOW} END`;
  /** The compare-and-set: the caller's lease (owner and epoch) and the next seq. */
  const fence = (i: string) =>
    `c.conversation_id = ${i}.conversation_id AND c.owner = ${i}.owner AND c.epoch = ${i}.epoch AND c.seq = ${i}.seq - 1`;
  /** A whole commit deletes the entries of the conversations `upd` committed. */
  const dropEntries = `dropped AS (DELETE FROM ${e} x USING upd WHERE x.conversation_id = upd.conversation_id)`;
  /**
   * An append: the fenced update of the row (seq, count, lease; the base stays, `base_seq`
   * remembering where it is) and, in the same statement, the entry's insert for each row updated.
   */
  const appendTail = `
      cur AS (SELECT c.conversation_id, c.seq, c.owner, c.epoch FROM ${t} c JOIN i USING (conversation_id)),
      upd AS (
        UPDATE ${t} c SET status = 'running', seq = i.seq, dispatch_count = i.dispatch_count,
          result = NULL, suspended_at = NULL, base_seq = coalesce(c.base_seq, c.seq),
          lease_expires_at = ${NOW} + i.lease_ms, updated_at = ${NOW}, ended_at = NULL
        FROM i WHERE ${fence('i')}
        RETURNING c.conversation_id, c.seq, c.lease_expires_at, c.updated_at
      ),
      inserted AS (
        INSERT INTO ${e} (conversation_id, seq, entry)
        SELECT upd.conversation_id, upd.seq, i.entry FROM upd JOIN i USING (conversation_id)
      )
      SELECT i.conversation_id, cur.seq AS stored_seq, cur.owner AS stored_owner,
        cur.epoch AS stored_epoch, upd.updated_at AS committed_at, upd.lease_expires_at
      FROM i LEFT JOIN cur USING (conversation_id) LEFT JOIN upd USING (conversation_id)`;
  return {
    // Inserts with the lease (epoch 1; released at once unless running) unless the id is taken:
    // two racing creates, one row.
    create: `
      INSERT INTO ${t} (conversation_id, orchestrator, status, seq, dispatch_count, state, result,
        suspended_at, owner, epoch, lease_expires_at, updated_at, ended_at)
      VALUES ($1, $2, $3::text, $4, $5, $6, $7, $8,
        CASE WHEN $3::text = 'running' THEN $9 END, 1,
        CASE WHEN $3::text = 'running' THEN ${NOW} + $10::bigint END, ${NOW},
        CASE WHEN $3::text = 'ended' THEN ${NOW} END)
      ON CONFLICT (conversation_id) DO NOTHING
      RETURNING coalesce(lease_expires_at, updated_at) AS lease_expires_at`,
    // Locks the row, then takes the lease when no live one holds it (or `$4`, a holder known to
    // be dead, does), raising the epoch; answers the row as it was and the new lease, if taken.
    acquire: `
      WITH prev AS (SELECT * FROM ${t} WHERE conversation_id = $1 FOR UPDATE),
      upd AS (
        UPDATE ${t} c SET owner = $2, epoch = c.epoch + 1, lease_expires_at = ${NOW} + $3::bigint
        FROM prev WHERE c.conversation_id = prev.conversation_id AND prev.status <> 'ended'
          AND (prev.owner IS NULL OR prev.lease_expires_at <= ${NOW} OR prev.owner = $2
               OR prev.owner = $4::text)
        RETURNING c.epoch AS new_epoch, c.lease_expires_at AS new_expires_at
      )
      SELECT prev.*, upd.new_epoch, upd.new_expires_at, ${NOW} AS now_ms
      FROM prev LEFT JOIN upd ON true`,
    // One commit: the compare-and-set in the UPDATE's WHERE; `cur` (the statement's snapshot,
    // before the update) only explains a refusal.
    commitOne: `
      WITH i AS (
        SELECT $1::text AS conversation_id, $2::text AS status, $3::bigint AS seq,
          $4::bigint AS dispatch_count, $5::text AS state, $6::text AS result,
          $7::bigint AS suspended_at, $8::text AS owner, $9::bigint AS epoch, $10::bigint AS lease_ms
      ),
      cur AS (SELECT seq, owner, epoch FROM ${t} WHERE conversation_id = $1),
      upd AS (
        UPDATE ${t} c SET ${commitSet('i')} FROM i WHERE ${fence('i')}
        RETURNING c.conversation_id, c.lease_expires_at, c.updated_at
      ),
      ${dropEntries}
      SELECT cur.seq AS stored_seq, cur.owner AS stored_owner, cur.epoch AS stored_epoch,
        upd.updated_at AS committed_at, upd.lease_expires_at
      FROM (SELECT 1) one LEFT JOIN cur ON true LEFT JOIN upd ON true`,
    // Group commit: many conversations' commits in one statement, each row fenced on its own.
    commitMany: `
      WITH i AS (
        SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::text[],
          $6::text[], $7::bigint[], $8::text[], $9::bigint[], $10::bigint[])
        AS x(conversation_id, status, seq, dispatch_count, state, result, suspended_at, owner,
          epoch, lease_ms)
      ),
      cur AS (SELECT c.conversation_id, c.seq, c.owner, c.epoch FROM ${t} c JOIN i USING (conversation_id)),
      upd AS (
        UPDATE ${t} c SET ${commitSet('i')} FROM i WHERE ${fence('i')}
        RETURNING c.conversation_id, c.lease_expires_at, c.updated_at
      ),
      ${dropEntries}
      SELECT i.conversation_id, cur.seq AS stored_seq, cur.owner AS stored_owner,
        cur.epoch AS stored_epoch, upd.updated_at AS committed_at, upd.lease_expires_at
      FROM i LEFT JOIN cur USING (conversation_id) LEFT JOIN upd USING (conversation_id)`,
    // One append, fenced as a commit is.
    appendOne: `
      WITH i AS (
        SELECT $1::text AS conversation_id, $2::bigint AS seq, $3::bigint AS dispatch_count,
          $4::text AS entry, $5::text AS owner, $6::bigint AS epoch, $7::bigint AS lease_ms
      ),${appendTail}`,
    // Group commit of appends: many conversations' entries in one statement, each row fenced.
    appendMany: `
      WITH i AS (
        SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[],
          $6::bigint[], $7::bigint[])
        AS x(conversation_id, seq, dispatch_count, entry, owner, epoch, lease_ms)
      ),${appendTail}`,
    // A snapshot: the base replaced at a seq held as an entry, fenced by owner and epoch (the seq,
    // count and lease unchanged), and the entries it covers deleted, in one statement. `cur`
    // explains a refusal; `compacted` counts what was deleted.
    snapshot: `
      WITH i AS (
        SELECT $1::text AS conversation_id, $2::bigint AS seq, $3::text AS state,
          $4::text AS owner, $5::bigint AS epoch
      ),
      cur AS (SELECT seq, owner, epoch FROM ${t} WHERE conversation_id = $1),
      upd AS (
        UPDATE ${t} c SET state = i.state,
          base_seq = CASE WHEN i.seq = c.seq THEN NULL ELSE i.seq END
        FROM i WHERE c.conversation_id = i.conversation_id AND c.owner = i.owner
          AND c.epoch = i.epoch AND c.status = 'running'
          AND i.seq > coalesce(c.base_seq, c.seq) AND i.seq <= c.seq
        RETURNING c.conversation_id
      ),
      compacted AS (
        DELETE FROM ${e} x USING upd WHERE x.conversation_id = upd.conversation_id AND x.seq <= $2
        RETURNING 1
      )
      SELECT cur.seq AS stored_seq, cur.owner AS stored_owner, cur.epoch AS stored_epoch,
        (SELECT count(*) FROM upd) AS applied, (SELECT count(*) FROM compacted) AS compacted
      FROM (SELECT 1) one LEFT JOIN cur ON true`,
    // The entries after the base, read once acquire has raised the epoch: no other holder can
    // append then, and a statement of its own sees every append that committed before.
    entries: `
      SELECT entry FROM ${e} WHERE conversation_id = $1 AND seq > $2 AND seq <= $3 ORDER BY seq`,
    renew: `
      UPDATE ${t} SET lease_expires_at = ${NOW} + $4::bigint
      WHERE conversation_id = $1 AND owner = $2 AND epoch = $3 AND status = 'running'
      RETURNING lease_expires_at`,
    release: `
      UPDATE ${t} SET owner = NULL, lease_expires_at = NULL
      WHERE conversation_id = $1 AND owner = $2 AND epoch = $3`,
    get: `SELECT ${SUMMARY} FROM ${t} WHERE conversation_id = $1`,
    delete: `DELETE FROM ${t} WHERE conversation_id = $1`,
    list: `
      SELECT ${SUMMARY} FROM ${t}
      WHERE ($1::text IS NULL OR orchestrator = $1) AND ($2::text IS NULL OR status = $2)
        AND (NOT $3::boolean OR owner IS NULL OR lease_expires_at <= ${NOW})
        AND ($4::text IS NULL OR conversation_id > $4)
      ORDER BY conversation_id LIMIT $5`,
    stats: `
      SELECT orchestrator,
        count(*) FILTER (WHERE status = 'running') AS running,
        count(*) FILTER (WHERE status = 'suspended') AS suspended,
        min(suspended_at) FILTER (WHERE status = 'suspended') AS oldest_suspended_at
      FROM ${t} WHERE status IN ('running', 'suspended')
      GROUP BY orchestrator ORDER BY orchestrator`,
    purge: `
      DELETE FROM ${t} WHERE conversation_id IN (
        SELECT conversation_id FROM ${t}
        WHERE status = 'ended' AND ended_at <= ${NOW} - $1::bigint
        ORDER BY ended_at LIMIT ${PURGE_BATCH})`,
  };
}
