/**
 * Store calls of the store session (session.ts) that need none of its state, given what they
 * read: whether a commit whose answer was lost landed (`landed`), and the abort mark written on
 * what the store holds (`acquiredAsCommitted`, then `writeAbortMark`), and the acquire both
 * resume and the read-back make (`acquireChecked`).
 */
import type { AcquireOutcome, ConversationStatus, Lease } from '../spi/store.ts';
import { bounded, checkedOutcome } from './checkpoint.ts';
import type { DurableConfig } from './config.ts';
import { abortMarkedEntry, checkedEntry } from './incremental.ts';

/**
 * Whether the store holds the commit of `seq` (its status at its seq): a commit whose answer was
 * lost may have been applied. `false` when the store cannot tell within `storeTimeoutMs`.
 */
export async function landed(
  durable: DurableConfig,
  conversationId: string,
  seq: number,
  status: ConversationStatus,
  owner: string | undefined,
): Promise<boolean> {
  try {
    const stored = await bounded(
      () => durable.store.get(conversationId),
      durable.storeTimeoutMs,
      'get',
    );
    return (
      typeof stored === 'object' &&
      stored !== null &&
      stored.seq === seq &&
      stored.status === status &&
      (owner === undefined || stored.owner === owner)
    );
  } catch {
    return false;
  }
}

/**
 * The store's acquire of `conversationId` by `owner` for `leaseMs`, within `storeTimeoutMs`, its
 * answer checked (resume's acquire and the abort mark's read-back alike).
 */
export async function acquireChecked(
  durable: DurableConfig,
  conversationId: string,
  owner: string,
): Promise<AcquireOutcome> {
  const store = durable.store;
  return checkedOutcome(
    store,
    'acquire',
    await bounded(
      () => store.acquire(conversationId, owner, durable.leaseMs),
      durable.storeTimeoutMs,
      'acquire',
    ),
  );
}

/** An acquire that found the conversation running, its lease taken. */
export type Acquired = Extract<AcquireOutcome, { status: 'acquired' }>;

/**
 * The conversation read back with an acquire by this very `owner` (what the next holder would
 * read). Rejects when the store does not hold it as running at `seq`, untaken since (the
 * session's last commit), or when the call fails.
 */
export async function acquiredAsCommitted(
  durable: DurableConfig,
  conversationId: string,
  owner: string,
  seq: number,
): Promise<Acquired> {
  const outcome = await acquireChecked(durable, conversationId, owner);
  if (
    outcome.status !== 'acquired' ||
    outcome.takenOver ||
    outcome.checkpoint.seq !== seq ||
    outcome.checkpoint.status !== 'running'
  ) {
    throw new Error('the store does not hold the conversation as this segment committed it');
  }
  return outcome;
}

/**
 * Writes the commit `acquired` read again, marked as cut by an abort (`AbortMark`), at the next
 * seq: committed whole, or, when the store holds entries after its base, appended as an entry
 * that folds nothing. Resolves with the seq and the lease it landed with; rejects when the store
 * refuses it or a call fails.
 */
export async function writeAbortMark(
  durable: DurableConfig,
  conversationId: string,
  acquired: Acquired,
): Promise<{ readonly seq: number; readonly lease: Lease }> {
  const store = durable.store;
  const codec = durable.codec;
  const entries = acquired.entries ?? [];
  const seq = acquired.checkpoint.seq + 1;
  const stored = acquired.checkpoint;
  const committed =
    entries.length > 0 && store.append !== undefined
      ? await bounded(
          () =>
            (store.append as NonNullable<typeof store.append>).call(
              store,
              {
                conversationId,
                seq,
                dispatchCount: stored.dispatchCount,
                entry: codec.encode(
                  abortMarkedEntry(
                    checkedEntry(
                      codec.decode(entries[entries.length - 1] as string),
                      entries.length,
                    ),
                  ),
                ),
              },
              acquired.lease,
              durable.leaseMs,
            ),
          durable.storeTimeoutMs,
          `append (seq ${seq})`,
        )
      : await bounded(
          () =>
            store.commit(
              {
                ...stored,
                seq,
                state: codec.encode({
                  ...(codec.decode(stored.state) as object),
                  interrupted: 'abort',
                }),
              },
              acquired.lease,
              durable.leaseMs,
            ),
          durable.storeTimeoutMs,
          `commit (seq ${seq})`,
        );
  const outcome = checkedOutcome(store, entries.length > 0 ? 'append' : 'commit', committed);
  if (!outcome.ok) throw new Error(`the mark's commit was refused (${outcome.reason})`);
  return { seq, lease: outcome.lease };
}
