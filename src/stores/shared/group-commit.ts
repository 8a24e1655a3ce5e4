/**
 * Group commit: what the callers queue in one turn of the event loop (until a `setImmediate`)
 * is handed to the store at once, to be written in one transaction or one statement. Each item
 * still settles with its own outcome.
 */
import type { Checkpoint, CommitOutcome, Lease } from '../../core/spi/store.ts';

/** How a queued item's caller is answered. */
export interface Settles<T> {
  readonly resolve: (outcome: T) => void;
  readonly reject: (error: Error) => void;
}

/** A `commit()` waiting for its group. */
export interface QueuedCommit extends Settles<CommitOutcome> {
  readonly checkpoint: Checkpoint;
  readonly lease: Lease;
  readonly leaseMs: number;
}

/** An item as the caller gives it, before the queue adds how it is answered. */
export type Unsettled<I> = I extends unknown ? Omit<I, keyof Settles<unknown>> : never;

/** The items of one event-loop turn, handed to `flush` together. */
export class TurnQueue<I> {
  #items: I[] = [];
  #scheduled = false;
  readonly #flush: (items: I[]) => void;

  /** `flush` gets each turn's items (never none) and settles every one of them. */
  constructor(flush: (items: I[]) => void) {
    this.#flush = flush;
  }

  /** How many items wait. */
  get size(): number {
    return this.#items.length;
  }

  /** Queues items for the end of this turn (the next `setImmediate`). */
  push(...items: I[]): void {
    this.#items.push(...items);
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /** Hands what waits to `flush` now (`close()` does, not to leave any behind). */
  flush(): void {
    this.#scheduled = false;
    const items = this.#items;
    if (items.length === 0) return;
    this.#items = [];
    this.#flush(items);
  }
}

/**
 * The outcome of `item` once its group has been written (`T`: what the item's kind answers; a
 * queue may hold several kinds).
 */
export function queued<T, I extends Settles<never>>(
  queue: TurnQueue<I>,
  item: Unsettled<I>,
): Promise<T> {
  return new Promise<T>((resolve, reject) =>
    queue.push({ ...item, resolve, reject } as unknown as I),
  );
}
