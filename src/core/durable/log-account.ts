/**
 * The store session's account of what an incremental store holds of its conversation: the base
 * (whole checkpoint or snapshot) and the entries after it, counted to know when a snapshot is due
 * and how large the conversation is, and the snapshot that makes a new base, written behind the
 * loop (one at a time, never awaited by it).
 */
import { performance } from 'node:perf_hooks';
import type { CommitObservers } from '../loop/durability.ts';
import type { Checkpoint, Lease } from '../spi/store.ts';
import { bounded } from './checkpoint.ts';
import { type LogState, snapshotRetryAt } from './commit-plan.ts';
import type { DurableConfig, StoredLog } from './config.ts';
import { snapshotFailure } from './session-errors.ts';

export class LogAccount {
  #baseBytes = 0;
  #baseSeq = 0;
  #baseDispatch = 0;
  #logBytes = 0;
  /** Set while a snapshot is in flight (one at a time, never awaited by the loop). */
  #snapshotting = false;
  /** After a snapshot failed: the log bytes before the next is tried. */
  #snapshotRetryAt = 0;

  /** `stored`: what the store held when the segment acquired it (none: a new conversation). */
  constructor(stored: StoredLog | undefined) {
    if (stored !== undefined) {
      this.#baseBytes = stored.baseBytes;
      this.#baseSeq = stored.baseSeq;
      this.#baseDispatch = stored.baseDispatch;
      this.#logBytes = stored.logBytes;
    }
  }

  /** Bytes the store holds: the base and the entries after it. */
  get storedBytes(): number {
    return this.#baseBytes + this.#logBytes;
  }

  /** The log as a snapshot decision reads it, with an entry of `entryBytes` at `dispatchCount`. */
  withEntry(entryBytes: number, dispatchCount: number): LogState {
    return {
      snapshotting: this.#snapshotting,
      baseBytes: this.#baseBytes,
      logBytes: this.#logBytes + entryBytes,
      retryAt: this.#snapshotRetryAt,
      dispatches: dispatchCount - this.#baseDispatch,
    };
  }

  /** The conversation's creation landed: its first state (`bytes`) is the base, at seq 1. */
  created(bytes: number): void {
    this.#baseSeq = 1;
    this.#baseBytes = bytes;
  }

  /** A whole commit landed: it is the new base, no entries after it. */
  wholeLanded(bytes: number, seq: number, dispatchCount: number): void {
    this.#baseBytes = bytes;
    this.#baseSeq = seq;
    this.#baseDispatch = dispatchCount;
    this.#logBytes = 0;
  }

  /** An entry of `bytes` landed after the base. */
  entryLanded(bytes: number): void {
    this.#logBytes += bytes;
  }

  /**
   * Writes `snapshot` (the whole state at a seq the store holds as an entry) behind the loop:
   * the store makes it the base and drops the entries it covers. A failure changes nothing (the
   * entries stay); the next is tried once the log has grown by another quarter.
   */
  snapshot(
    durable: DurableConfig,
    snapshot: Checkpoint,
    bytes: number,
    lease: Lease,
    observers: () => CommitObservers,
  ): void {
    const store = durable.store;
    const covered = this.#logBytes;
    const started = performance.now();
    const heard = (error?: unknown): void => {
      const observations = observers();
      if (!observations.wantsWrites) return;
      const durationMs = performance.now() - started;
      observations.written(
        error === undefined
          ? { kind: 'snapshot', bytes, durationMs }
          : { kind: 'snapshot', bytes, durationMs, error },
      );
    };
    this.#snapshotting = true;
    bounded(
      () => (store.snapshot as NonNullable<typeof store.snapshot>).call(store, snapshot, lease),
      durable.storeTimeoutMs,
      `snapshot (seq ${snapshot.seq})`,
    )
      .then(
        (outcome) => {
          if (
            typeof outcome === 'object' &&
            outcome !== null &&
            outcome.ok === true &&
            snapshot.seq > this.#baseSeq
          ) {
            this.#baseBytes = bytes;
            this.#baseSeq = snapshot.seq;
            this.#baseDispatch = snapshot.dispatchCount;
            this.#logBytes = Math.max(0, this.#logBytes - covered);
            this.#snapshotRetryAt = 0;
            heard();
          } else if (outcome?.ok !== true) {
            this.#snapshotRetryAt = snapshotRetryAt(covered);
            // Stale: a later base (a whole commit, another snapshot) is stored already; nothing
            // was written and nothing is wrong. Fenced, not found or no outcome: a failure.
            if (outcome?.reason !== 'stale') heard(snapshotFailure(outcome));
          } else heard();
        },
        (error: unknown) => {
          this.#snapshotRetryAt = snapshotRetryAt(covered);
          heard(error ?? new Error('the snapshot failed'));
        },
      )
      .finally(() => {
        this.#snapshotting = false;
      });
  }
}
