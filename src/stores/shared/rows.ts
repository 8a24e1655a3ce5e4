/**
 * A stored conversation read back: the columns every store keeps (the SQL stores' names; Redis's
 * hash fields are mapped to them), numbers as numbers or as the strings `pg` and Redis answer.
 */
import type { Checkpoint, ConversationStatus, StoredConversation } from '../../core/spi/store.ts';

type Column = string | number | null;

/** What `get()` and `list()` read of a conversation. */
export interface StoredRow {
  readonly conversation_id: string;
  readonly orchestrator: Column;
  readonly status: Column;
  readonly seq: Column;
  readonly dispatch_count: Column;
  readonly suspended_at: Column;
  readonly updated_at: Column;
}

/** What `acquire()` reads of a conversation: its checkpoint. */
export interface CheckpointRow extends Omit<StoredRow, 'updated_at'> {
  readonly state: Column;
  readonly result: Column;
}

/** Both: what `get()` reads and what `acquire()` reads. */
export type ConversationRow = CheckpointRow & StoredRow;

/** The holder of a live lease, as `StoredConversation` shows it. */
export interface Holder {
  readonly owner: string;
  readonly leaseExpiresAt: number;
}

/** What a checkpoint and a stored conversation both say of a row, first in both. */
function conversationOf(row: Omit<StoredRow, 'updated_at' | 'suspended_at'>) {
  return {
    conversationId: row.conversation_id,
    orchestrator: row.orchestrator as string,
    status: row.status as ConversationStatus,
    dispatchCount: Number(row.dispatch_count),
    seq: Number(row.seq),
  };
}

/**
 * What the SQL stores write of a checkpoint, in column order: status, seq, dispatch_count,
 * state, result, suspended_at (absent ones as NULL).
 */
export function checkpointColumns(checkpoint: Checkpoint): (string | number | null)[] {
  return [
    checkpoint.status,
    checkpoint.seq,
    checkpoint.dispatchCount,
    checkpoint.state,
    checkpoint.result ?? null,
    checkpoint.suspendedAt ?? null,
  ];
}

/** The row's checkpoint. */
export function checkpointOf(row: CheckpointRow): Checkpoint {
  return {
    ...conversationOf(row),
    state: row.state as string,
    ...(row.result === null ? {} : { result: row.result as string }),
    ...(row.suspended_at === null ? {} : { suspendedAt: Number(row.suspended_at) }),
  };
}

/**
 * The row as `get()` and `list()` answer it: `holder` when its lease is live, `result` (the
 * parsed ending) when there is one.
 */
export function storedOf(
  row: StoredRow,
  holder: Holder | undefined,
  result?: unknown,
): StoredConversation {
  return {
    ...conversationOf(row),
    updatedAt: Number(row.updated_at),
    ...(row.suspended_at === null ? {} : { suspendedAt: Number(row.suspended_at) }),
    ...(holder === undefined ? {} : holder),
    ...(result === undefined ? {} : { result }),
  };
}

/**
 * The lease's holder when the lease is live at `now`: held, not expired, and (`alive`) its holder
 * not known to be gone.
 */
export function liveHolder(
  owner: Column | undefined,
  expiresAt: Column | undefined,
  now: number,
  alive: (owner: string) => boolean = () => true,
): Holder | undefined {
  if (typeof owner !== 'string' || expiresAt === null || expiresAt === undefined) return undefined;
  const leaseExpiresAt = Number(expiresAt);
  return leaseExpiresAt > now && alive(owner) ? { owner, leaseExpiresAt } : undefined;
}

/** The stored ending of an ended conversation's row, parsed; `undefined` for any other. */
export function endingOf(status: Column, result: Column | undefined): unknown {
  return status === 'ended' && typeof result === 'string'
    ? (JSON.parse(result) as unknown)
    : undefined;
}
