/**
 * What the Redis store sends its scripts and reads of their replies: a checkpoint's arguments,
 * replies as rows, commit outcomes and an acquire's entries.
 */
import type * as spi from '../../core/spi/store.ts';
import { checkpointOf, endingOf, liveHolder, storedOf } from '../shared/rows.ts';

/** A script's reply as ioredis answers it. */
export type Reply = string | number | null | Reply[];

/** The code of a Redis error reply: its first word (`NOSCRIPT`, `WRONGTYPE`, `ERR`). */
export function replyCode(error: unknown): string | undefined {
  return error instanceof Error ? /^[A-Z]+(?= |$)/.exec(error.message)?.[0] : undefined;
}

export function optional(value: string | number | undefined): string {
  return value === undefined ? '' : `=${value}`;
}

/** What the CREATE and COMMIT scripts write of a checkpoint, in their argument order. */
export function checkpointArgs(checkpoint: spi.Checkpoint): string[] {
  return [
    checkpoint.status,
    String(checkpoint.seq),
    String(checkpoint.dispatchCount),
    checkpoint.state,
    optional(checkpoint.result),
    optional(checkpoint.suspendedAt),
  ];
}

/** The fields of the GET and ACQUIRE scripts' checkpoint reply, in their order. */
const CHECKPOINT_FIELDS = [
  'orchestrator',
  'status',
  'seq',
  'dispatch_count',
  'state',
  'result',
  'suspended_at',
] as const;

/** The hash fields `get()` and `list()` read, under their column names, in their order. */
const STORED_FIELDS = [
  'orchestrator',
  'status',
  'seq',
  'dispatch_count',
  'result',
  'suspended_at',
  'owner',
  'lease_expires_at',
  'updated_at',
] as const;

/** A reply's fields as a row under `names` (a missing field is null). */
export function rowOf<N extends string>(
  conversationId: string,
  names: readonly N[],
  fields: Reply[],
): { readonly conversation_id: string } & Record<N, string | number | null> {
  const row: Record<string, unknown> = { conversation_id: conversationId };
  names.forEach((name, i) => {
    const value = fields[i];
    row[name] = value === undefined || Array.isArray(value) ? null : value;
  });
  return row as { readonly conversation_id: string } & Record<N, string | number | null>;
}

export function toCheckpoint(conversationId: string, fields: Reply[]): spi.Checkpoint {
  return checkpointOf(rowOf(conversationId, CHECKPOINT_FIELDS, fields));
}

export function toStored(
  conversationId: string,
  now: number,
  fields: Reply[],
): spi.StoredConversation | undefined {
  const row = rowOf(conversationId, STORED_FIELDS, fields);
  if (row.orchestrator === null) return undefined;
  return storedOf(
    row,
    liveHolder(row.owner, row.lease_expires_at, now),
    endingOf(row.status, row.result),
  );
}

/** What the COMMIT and APPEND scripts answer, as `commit()` does. */
export function commitOutcome(reply: Reply[], lease: spi.Lease): spi.CommitOutcome {
  if (reply[0] === 'ok') {
    return {
      ok: true,
      lease: { owner: lease.owner, epoch: lease.epoch, expiresAt: Number(reply[1]) },
    };
  }
  if (reply[0] === 'not_found') return { ok: false, reason: 'not_found' };
  return {
    ok: false,
    reason: reply[0] === 'fenced' ? 'fenced' : 'sequence',
    storedSeq: Number(reply[1]),
  };
}

export function byteLength(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/**
 * The entries an acquire answered: none when the base is whole (no baseSeq), else the list,
 * which must hold seqs baseSeq + 1 .. seq; a hole is said (as a string), never answered.
 */
export function entriesOf(
  what: string,
  seq: number,
  baseSeq: Reply,
  list: Reply,
): string[] | string | undefined {
  if (baseSeq === null) return undefined;
  const entries = Array.isArray(list) ? (list as string[]) : [];
  const expected = seq - Number(baseSeq);
  return entries.length === expected
    ? entries
    : `${what}: found ${entries.length} of the ${expected} entries after seq ${String(baseSeq)}`;
}
