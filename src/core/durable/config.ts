/** A durable orchestrator's store settings, and the stored conversation a segment continues. */

import { fail, positiveInteger, positiveNumber, timerDelay } from '../shared/validate.ts';
import type { Checkpoint, ConversationStore, Durability, Lease } from '../spi/store.ts';
import type { Message } from '../spi/types.ts';
import { type AbortMark, type CheckpointCodec, jsonCodec } from './checkpoint.ts';
import type { CheckpointPlan } from './incremental.ts';

/**
 * How a long conversation is checkpointed on a store that takes entries (the memory, SQLite,
 * PostgreSQL and Redis stores do): a commit writes what the dispatches since the previous commit
 * added, and a snapshot of the whole state is written now and then (docs/durability.md).
 */
export interface CheckpointOptions {
  /**
   * Commit entries where the store takes them; `false` commits the whole state every time.
   * @default true
   */
  readonly incremental?: boolean | undefined;
  /**
   * A snapshot once this many dispatches were committed as entries since the last one.
   * @default 10000
   */
  readonly snapshotEveryDispatches?: number | undefined;
  /**
   * A snapshot once the entries since the last one hold this many bytes (whichever comes first).
   * @default 4 times the bytes of the last snapshot, at least 1 MiB (a snapshot then costs a
   * fixed share of what is written whatever the conversation's length, and a resume reads about
   * the state's size)
   */
  readonly snapshotEveryBytes?: number | undefined;
  /**
   * The largest a conversation may grow in the store: its last snapshot (or whole checkpoint)
   * plus the entries after it, in UTF-8 bytes. Past it the conversation fails with a
   * `CheckpointError` naming this option and both sizes, its state handed back.
   * @default 268435456 (256 MiB), or the store's `maxSnapshotBytes` when that is less
   */
  readonly maxConversationBytes?: number | undefined;
}

/** A state below this many bytes is committed whole: an entry would cost as much. */
export const WHOLE_BELOW_BYTES = 16 * 1024;

const DEFAULT_MAX_CONVERSATION_BYTES = 256 * 1024 * 1024;

/** A durable orchestrator's store and how it commits (undefined without a store). */
export interface DurableConfig {
  readonly store: ConversationStore;
  readonly durability: Durability;
  readonly leaseMs: number;
  readonly storeTimeoutMs: number;
  readonly codec: CheckpointCodec;
  readonly maxCheckpointBytes: number;
  /** Entries and snapshots, or whole checkpoints only. */
  readonly plan: CheckpointPlan;
}

/** A stored conversation a run continues (resume, recover, cancel): its lease, as acquired. */
export interface Segment<C> {
  readonly owner: string;
  readonly lease: Lease;
  readonly checkpoint: Checkpoint;
  readonly takenOver: boolean;
  /** The stored state's abort mark (`AbortMark`): the segment before was cut by an abort. */
  readonly interrupted?: AbortMark | undefined;
  /** The person's answer (`resume(id, { input })`). */
  readonly input?: Message<C> | undefined;
  /** Set by `cancel()`: the segment ends the conversation as aborted, running nothing. */
  readonly cancel?: { readonly reason: unknown } | undefined;
  /** What the store holds of it: its base and the entries after it (for when to snapshot). */
  readonly stored: StoredLog;
}

/** What the store holds of a conversation, as its session counts it. */
export interface StoredLog {
  /** UTF-8 bytes of the base's state (snapshot or whole checkpoint). */
  readonly baseBytes: number;
  /** The base's seq. */
  readonly baseSeq: number;
  /** The base's dispatch count. */
  readonly baseDispatch: number;
  /** UTF-8 bytes of the entries after it. */
  readonly logBytes: number;
  /** How many entries follow it (folded onto it on resume). */
  readonly entries: number;
}

/** The orchestrator's durable options, as given (checked by `durableConfig()`). */
export interface DurableOptions {
  readonly store?: ConversationStore | undefined;
  readonly durability?: Durability | undefined;
  readonly leaseMs?: number | undefined;
  readonly storeTimeoutMs?: number | undefined;
  readonly codec?: CheckpointCodec | undefined;
  readonly checkpoints?: CheckpointOptions | undefined;
}

const STORE_METHODS = [
  'create',
  'acquire',
  'commit',
  'renew',
  'release',
  'get',
  'delete',
  'list',
] as const;

/** The durable options, checked; `undefined` without a store (and then none of them may be set). */
export function durableConfig(options: DurableOptions): DurableConfig | undefined {
  const { store, durability, leaseMs, storeTimeoutMs, codec, checkpoints } = options;
  if (store === undefined) {
    if (durability !== undefined) fail('durability', 'set only with a `store`', durability);
    if (checkpoints !== undefined) fail('checkpoints', 'set only with a `store`', checkpoints);
    return undefined;
  }
  if (typeof store !== 'object' || store === null) {
    fail('store', 'a ConversationStore (createMemoryStore() …)', store);
  }
  for (const method of STORE_METHODS) {
    if (typeof store[method] !== 'function') {
      fail(
        `store.${method}`,
        'a function (the store must implement ConversationStore)',
        store[method],
      );
    }
  }
  const mode = durability ?? 'sync';
  if (mode !== 'sync' && mode !== 'async' && mode !== 'exit') {
    fail('durability', "'sync', 'async' or 'exit'", durability);
  }
  const lease = positiveNumber('leaseMs', leaseMs ?? 10_000);
  if (lease < 100 || lease > 600_000)
    fail('leaseMs', 'between 100 and 600000 milliseconds', leaseMs);
  // A renewal starts at most leaseMs / 3 after the last one landed: bounded by half the lease,
  // it lands before the lease expires (docs/durability.md, Fencing and leases).
  const timeoutMs = timerDelay('storeTimeoutMs', storeTimeoutMs ?? Math.min(5_000, lease / 2));
  if (timeoutMs > lease / 2) {
    fail(
      'storeTimeoutMs',
      `at most half of \`leaseMs\` (${lease} / 2 = ${lease / 2} ms, so that a lease renewal lands before the lease expires)`,
      storeTimeoutMs,
    );
  }
  const chosen = codec ?? jsonCodec;
  if (
    typeof chosen !== 'object' ||
    chosen === null ||
    typeof chosen.encode !== 'function' ||
    typeof chosen.decode !== 'function'
  ) {
    fail('codec', 'an object with `encode(value)` and `decode(text)` functions', codec);
  }
  const max = store.maxCheckpointBytes;
  const maxCheckpointBytes = typeof max === 'number' && max > 0 ? max : Number.POSITIVE_INFINITY;
  return {
    store,
    durability: mode,
    leaseMs: lease,
    storeTimeoutMs: timeoutMs,
    codec: chosen,
    maxCheckpointBytes,
    plan: checkpointPlan(store, checkpoints, maxCheckpointBytes),
  };
}

/** The `checkpoints` option, checked, for `store`. */
function checkpointPlan(
  store: ConversationStore,
  options: CheckpointOptions | undefined,
  maxCheckpointBytes: number,
): CheckpointPlan {
  if (options !== undefined && (typeof options !== 'object' || options === null)) {
    fail('checkpoints', 'an object', options);
  }
  const { incremental, snapshotEveryDispatches, snapshotEveryBytes, maxConversationBytes } =
    options ?? {};
  if (incremental !== undefined && typeof incremental !== 'boolean') {
    fail('checkpoints.incremental', 'a boolean', incremental);
  }
  const takesEntries = typeof store.append === 'function' && typeof store.snapshot === 'function';
  const snapshotMax = store.maxSnapshotBytes;
  const maxSnapshotBytes = takesEntries
    ? typeof snapshotMax === 'number' && snapshotMax > 0
      ? snapshotMax
      : maxCheckpointBytes
    : maxCheckpointBytes;
  const conversationMax =
    maxConversationBytes === undefined
      ? Math.min(DEFAULT_MAX_CONVERSATION_BYTES, maxSnapshotBytes)
      : positiveInteger('checkpoints.maxConversationBytes', maxConversationBytes);
  // Its snapshot must fit the store: a conversation the store cannot snapshot could not resume.
  if (conversationMax > maxSnapshotBytes) {
    fail(
      'checkpoints.maxConversationBytes',
      `at most the store's ${takesEntries ? 'maxSnapshotBytes' : 'maxCheckpointBytes'} (${maxSnapshotBytes})`,
      maxConversationBytes,
    );
  }
  return {
    incremental: takesEntries && incremental !== false,
    wholeBelowBytes: WHOLE_BELOW_BYTES,
    snapshotEveryDispatches:
      snapshotEveryDispatches === undefined
        ? 10_000
        : positiveInteger('checkpoints.snapshotEveryDispatches', snapshotEveryDispatches),
    snapshotEveryBytes:
      snapshotEveryBytes === undefined
        ? undefined
        : positiveInteger('checkpoints.snapshotEveryBytes', snapshotEveryBytes),
    maxConversationBytes: conversationMax,
    conversationBounded: maxConversationBytes !== undefined,
    maxSnapshotBytes,
  };
}
