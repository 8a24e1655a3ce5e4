/**
 * What the checks of the conformance kit share: the context each check gets, and small builders
 * for checkpoints, owners and ids. Independent of any test framework (node:assert only).
 */
import { randomBytes } from 'node:crypto';
import type { Checkpoint, ConversationStore, IncrementalStore } from '../core/spi/store.ts';

/** What a check's store is made with (the factory may ignore what it cannot honour). */
export interface StoreFactoryOptions {
  /**
   * The retention of ended conversations the store must apply, in milliseconds. Only the
   * retention check passes it (1,000 ms); other checks pass `{}`.
   */
  readonly retentionMs?: number | undefined;
  /**
   * The largest snapshot or whole checkpoint an incremental store must accept, in UTF-8 bytes.
   * Only the size checks pass it (`SNAPSHOT_LIMIT`, 32 MiB), so that they need not write a
   * store's default (256 MiB on this package's stores); other checks pass `{}`.
   */
  readonly maxSnapshotBytes?: number | undefined;
}

/** Makes a fresh store for one check (closed by the kit when the check ends). */
export type ConversationStoreFactory = (
  options: StoreFactoryOptions,
) => ConversationStore | Promise<ConversationStore>;

/** A long lease: no check expects it to run out. */
export const LONG_LEASE_MS = 60_000;

export interface CheckContext {
  /** The store under test, made for this check. */
  readonly store: ConversationStore;
  /** A fresh store with other options (closed by the kit too). */
  readonly makeStore: (options: StoreFactoryOptions) => Promise<ConversationStore>;
  /** A conversation id unique to this run of the kit, ending with `label`. */
  readonly id: (label: string) => string;
  /** An orchestrator name unique to this run of the kit. */
  readonly orchestrator: (label: string) => string;
  /**
   * A lease owner of the documented form `{host}/{pid}/{token}` on a host that is not this one,
   * so no store can tell its holder is gone: its leases end only by release or expiry.
   */
  readonly owner: (label: string) => string;
}

export interface Check {
  readonly name: string;
  readonly run: (context: CheckContext) => Promise<void>;
  /** Options the check's store is made with. */
  readonly storeOptions?: StoreFactoryOptions;
  /**
   * The check is of an incremental store (`append` and `snapshot`): skipped, saying so, for a
   * store without them.
   */
  readonly incremental?: true;
}

/** What the size checks ask an incremental store's factory for (`maxSnapshotBytes`). */
export const SNAPSHOT_LIMIT = 32 * 1024 * 1024;

/** A store's `append` and `snapshot`, when it has both (an incremental store). */
export function incremental(store: ConversationStore): IncrementalStore | undefined {
  return typeof store.append === 'function' && typeof store.snapshot === 'function'
    ? (store as IncrementalStore)
    : undefined;
}

/**
 * The largest whole checkpoint the store accepts: `maxSnapshotBytes` on an incremental store
 * (defaulting to `maxCheckpointBytes`, as the interface says), `maxCheckpointBytes` otherwise.
 */
export function wholeCheckpointLimit(store: ConversationStore): number {
  return incremental(store) === undefined
    ? store.maxCheckpointBytes
    : (store.maxSnapshotBytes ?? store.maxCheckpointBytes);
}

export function runPrefix(): string {
  return `ckit-${randomBytes(4).toString('hex')}`;
}

/** A checkpoint of `id` at `seq` with a state that says so. */
export function checkpoint(
  id: string,
  orchestrator: string,
  seq: number,
  fields: Partial<Omit<Checkpoint, 'conversationId' | 'seq'>> = {},
): Checkpoint {
  return {
    conversationId: id,
    orchestrator,
    status: 'running',
    seq,
    dispatchCount: seq - 1,
    state: JSON.stringify({ seq }),
    ...fields,
  };
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The object without its `undefined` properties (a store may or may not spell them out). */
export function defined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** A string of exactly `bytes` UTF-8 bytes, JSON text, with two-byte characters in it. */
export function jsonOfBytes(bytes: number): string {
  const inner = bytes - 2;
  if (inner < 0) throw new RangeError(`cannot make JSON text of ${bytes} bytes`);
  const twoByte = Math.floor(inner / 4);
  return `"${'é'.repeat(twoByte)}${'x'.repeat(inner - 2 * twoByte)}"`;
}
