/** A durable orchestrator's store settings, and the stored conversation a segment continues. */

import { fail, positiveNumber, timerDelay } from '../shared/validate.ts';
import type { Checkpoint, ConversationStore, Durability, Lease } from '../spi/store.ts';
import type { Message } from '../spi/types.ts';
import { type CheckpointCodec, jsonCodec } from './checkpoint.ts';

/** A durable orchestrator's store and how it commits (undefined without a store). */
export interface DurableConfig {
  readonly store: ConversationStore;
  readonly durability: Durability;
  readonly leaseMs: number;
  readonly storeTimeoutMs: number;
  readonly codec: CheckpointCodec;
  readonly maxCheckpointBytes: number;
}

/** A stored conversation a run continues (resume, recover, cancel): its lease, as acquired. */
export interface Segment<C> {
  readonly owner: string;
  readonly lease: Lease;
  readonly checkpoint: Checkpoint;
  readonly takenOver: boolean;
  /** The person's answer (`resume(id, { input })`). */
  readonly input?: Message<C> | undefined;
  /** Set by `cancel()`: the segment ends the conversation as aborted, running nothing. */
  readonly cancel?: { readonly reason: unknown } | undefined;
}

/** The orchestrator's durable options, as given (checked by `durableConfig()`). */
export interface DurableOptions {
  readonly store?: ConversationStore | undefined;
  readonly durability?: Durability | undefined;
  readonly leaseMs?: number | undefined;
  readonly storeTimeoutMs?: number | undefined;
  readonly codec?: CheckpointCodec | undefined;
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
  const { store, durability, leaseMs, storeTimeoutMs, codec } = options;
  if (store === undefined) {
    if (durability !== undefined) fail('durability', 'set only with a `store`', durability);
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
  return {
    store,
    durability: mode,
    leaseMs: lease,
    storeTimeoutMs: timeoutMs,
    codec: chosen,
    maxCheckpointBytes: typeof max === 'number' && max > 0 ? max : Number.POSITIVE_INFINITY,
  };
}
