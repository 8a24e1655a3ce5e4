/**
 * What the checks of the conformance kit share: the context each check gets, and small builders
 * for checkpoints, owners and ids. Independent of any test framework (node:assert only).
 */
import { randomBytes } from 'node:crypto';
import type { Checkpoint, ConversationStore } from '../core/spi/store.ts';

/** What a check's store is made with (the factory may ignore what it cannot honour). */
export interface StoreFactoryOptions {
  /**
   * The retention of ended conversations the store must apply, in milliseconds. Only the
   * retention check passes it (1,000 ms); other checks pass `{}`.
   */
  readonly retentionMs?: number | undefined;
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
