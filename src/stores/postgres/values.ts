/**
 * What the PostgreSQL store sends and reads back: a commit's and an append's parameters, their
 * outcome from the statement's row, rows as `get`/`list` answer them, and failures in words.
 */
import type * as spi from '../../core/spi/store.ts';
import {
  type ConversationRow,
  checkpointColumns,
  endingOf,
  liveHolder,
  storedOf,
} from '../shared/rows.ts';
import { isNewerSchemaError } from '../shared/store-error.ts';
import type { PostgresPool } from './options.ts';

export function commitValues(
  checkpoint: spi.Checkpoint,
  lease: spi.Lease,
  leaseMs: number,
): unknown[] {
  return [
    checkpoint.conversationId,
    ...checkpointColumns(checkpoint),
    lease.owner,
    lease.epoch,
    Math.ceil(leaseMs),
  ];
}

export function appendValues(
  entry: spi.CheckpointEntry,
  lease: spi.Lease,
  leaseMs: number,
): unknown[] {
  return [
    entry.conversationId,
    entry.seq,
    entry.dispatchCount,
    entry.entry,
    lease.owner,
    lease.epoch,
    Math.ceil(leaseMs),
  ];
}

export function commitOutcome(
  row: Record<string, unknown>,
  lease: spi.Lease,
  status: spi.ConversationStatus,
): spi.CommitOutcome {
  if (row.committed_at !== null && row.committed_at !== undefined) {
    const running = status === 'running';
    return {
      ok: true,
      lease: {
        owner: lease.owner,
        epoch: lease.epoch,
        expiresAt: Number(running ? row.lease_expires_at : row.committed_at),
      },
    };
  }
  if (row.stored_seq === null || row.stored_seq === undefined)
    return { ok: false, reason: 'not_found' };
  const storedSeq = Number(row.stored_seq);
  const fenced = row.stored_owner !== lease.owner || Number(row.stored_epoch) !== lease.epoch;
  return { ok: false, reason: fenced ? 'fenced' : 'sequence', storedSeq };
}

/** A row as `pg` answers it (the statements select the shared columns). */
export function asRow(row: Record<string, unknown>): ConversationRow {
  return row as unknown as ConversationRow;
}

export function toStored(row: Record<string, unknown>): spi.StoredConversation {
  const holder = liveHolder(
    row.owner as string | null,
    row.lease_expires_at as string | null,
    Number(row.now_ms),
  );
  return storedOf(asRow(row), holder, endingOf(row.status as string, row.result as string | null));
}

/** A client error's `code`: PostgreSQL's SQLSTATE (`40P01`: a deadlock) or Node's (`ECONNREFUSED`). */
export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** What failed, in words: timeouts and refusals named, PostgreSQL's own code kept. */
export function describeFailure(cause: unknown, timeoutMs: number): string {
  if (!(cause instanceof Error)) return String(cause);
  const e = cause as Error & { code?: string };
  // pg's own timeouts carry no code: only their messages tell them.
  if (e.message === 'Query read timeout')
    return `no answer within queryTimeoutMs (${timeoutMs} ms)`;
  if (/timeout exceeded when trying to connect|connection timeout/i.test(e.message)) {
    return `could not connect within connectTimeoutMs (${e.message})`;
  }
  if (isNewerSchemaError(e)) return e.message;
  const code = errorCode(e);
  return `${e.message}${code === undefined ? '' : ` (${code})`}`;
}

export function describePool(pool: PostgresPool): string {
  const o = (pool as { options?: { host?: unknown; port?: unknown; database?: unknown } }).options;
  if (o !== undefined && typeof o.host === 'string') {
    return `pool to ${o.host}:${String(o.port ?? 5432)}/${String(o.database ?? '')}`;
  }
  return 'given pool';
}
