/**
 * Which dispatch events survive a long conversation. The SDK keeps 128 events per span and drops
 * the OLDEST past that, so a long conversation would silently lose its beginning. We keep the
 * first `head` and the last `tail` dispatches, count the rest, and write the kept ones when the
 * conversation ends, with their original timestamps. Per dispatch this is five writes into
 * storage that a telemetry reuses from one conversation to the next.
 */
import type { Attributes } from '@opentelemetry/api';
import type { DispatchInfo } from '../core/spi/observer.ts';
import type { TerminationDecision, UsageTotals } from '../core/spi/types.ts';

/** Numbers kept per dispatch: count, elapsed, duration, responder index. */
const STRIDE = 4;

export interface KeptDispatch {
  readonly count: number;
  readonly elapsedMs: number;
  readonly durationMs: number;
  readonly responder: number;
  readonly decision: TerminationDecision;
  readonly extra: Attributes | undefined;
  readonly usage: UsageTotals | undefined;
}

/**
 * Where kept dispatches live. Slot i holds one dispatch: slots [0, head) the first dispatches,
 * slots [head, capacity) a ring of the latest. Plain arrays (V8 keeps `numbers` as unboxed
 * doubles) that grow as dispatches come, so a short conversation takes what it uses.
 */
interface Storage {
  readonly numbers: number[];
  readonly decisions: TerminationDecision[];
  readonly extras: (Attributes | undefined)[];
}

/**
 * A telemetry's spare storage. A conversation takes one and gives it back when it ends, so a
 * steady stream of conversations allocates none, as a hand-written loop reuses one buffer:
 * allocating and growing it per conversation made the collector the plugin's largest cost in
 * 100-dispatch conversations. At most `max` spares are kept.
 */
export class StoragePool {
  readonly #spare: Storage[] = [];
  constructor(readonly max = 64) {}

  take(): Storage {
    return this.#spare.pop() ?? { numbers: [], decisions: [], extras: [] };
  }

  give(storage: Storage, used: number): void {
    // Extras are the user's attributes (state, content): a spare must not keep them alive.
    if (storage.extras.length > 0) storage.extras.fill(undefined, 0, used);
    if (this.#spare.length < this.max) this.#spare.push(storage);
  }
}

export class DispatchEvents {
  readonly #head: number;
  readonly #capacity: number;
  readonly #withExtras: boolean;
  readonly #pool: StoragePool | undefined;
  /** Undefined once released: nothing is written into storage another conversation now uses. */
  #storage: Storage | undefined;
  // The storage's arrays, one hop nearer the hot path.
  readonly #numbers: number[];
  readonly #decisions: TerminationDecision[];
  /**
   * Each kept dispatch's tokens, made when the conversation's first usage report arrives (the
   * slots written before it had none): a conversation where nothing reports pays one check.
   */
  #usages: (UsageTotals | undefined)[] | undefined;
  #total = 0;
  /**
   * The slot the next dispatch goes to: slots fill in order, then the ring [head, capacity) turns
   * (once it has, the cursor is also the oldest ring slot); -1 when no slot takes it any more (a
   * capacity with no ring, or released storage).
   */
  #cursor = 0;
  /** Where the cursor goes after the last slot: the ring's start, or -1 without a ring. */
  readonly #wrapTo: number;

  /**
   * `withExtras`: keep per-dispatch attributes (state attributes, content). `pool`: where the
   * storage comes from and goes back to (`release()`).
   */
  constructor(capacity: number, withExtras: boolean, pool?: StoragePool) {
    this.#capacity = capacity;
    this.#head = Math.ceil(capacity / 2);
    this.#wrapTo = this.#head < capacity ? this.#head : -1;
    this.#withExtras = withExtras;
    this.#pool = pool;
    const storage = pool?.take() ?? { numbers: [], decisions: [], extras: [] };
    this.#storage = storage;
    this.#numbers = storage.numbers;
    this.#decisions = storage.decisions;
    this.#usages = undefined;
  }

  /** A usage report arrived: from now on each dispatch's tokens are kept with it. */
  usageSeen(): void {
    if (this.#usages === undefined && this.#storage !== undefined) this.#usages = [];
  }

  /** Gives the storage back to the pool; the kept dispatches are gone after this. */
  release(): void {
    const storage = this.#storage;
    if (storage === undefined) return;
    this.#storage = undefined;
    this.#usages = undefined;
    this.#cursor = -1;
    this.#pool?.give(storage, Math.min(this.#total, this.#capacity));
  }

  /** Dispatches seen. */
  get total(): number {
    return this.#total;
  }

  /** Dispatches not kept. */
  get dropped(): number {
    return Math.max(0, this.#total - this.#capacity);
  }

  add(info: DispatchInfo<unknown, unknown>, extra?: Attributes): void {
    const slot = this.#cursor;
    if (slot < 0) {
      // Released storage counts nothing more; a capacity without a ring counts what it drops.
      if (this.#storage !== undefined) this.#total++;
      return;
    }
    this.#total++;
    const next = slot + 1;
    this.#cursor = next < this.#capacity ? next : this.#wrapTo;
    const numbers = this.#numbers;
    const at = slot * STRIDE;
    numbers[at] = info.dispatchCount;
    numbers[at + 1] = info.elapsedMs;
    numbers[at + 2] = info.durationMs;
    numbers[at + 3] = info.responderIndex;
    this.#decisions[slot] = info.decision;
    if (this.#withExtras) (this.#storage as Storage).extras[slot] = extra;
    const usages = this.#usages;
    if (usages !== undefined) usages[slot] = info.usage;
  }

  /**
   * The kept dispatches, in dispatch order. With `limit` below what is kept (room left on the
   * span for events written after them, such as the exception), the middle ones give way: the
   * first `ceil(limit / 2)` and the last `floor(limit / 2)` are yielded.
   */
  *kept(limit = Number.POSITIVE_INFINITY): Generator<KeptDispatch> {
    const out: KeptDispatch[] = [];
    this.forEachKept(limit, (count, elapsedMs, durationMs, responder, decision, extra, usage) => {
      out.push({ count, elapsedMs, durationMs, responder, decision, extra, usage });
    });
    yield* out;
  }

  /**
   * Calls `write` for each kept dispatch, in dispatch order, as `kept()` yields them: the end of
   * a conversation writes up to 128 span events, and a generator with one object per event
   * costs more there than the events themselves.
   * @returns how many were written
   */
  forEachKept(
    limit: number,
    write: (
      count: number,
      elapsedMs: number,
      durationMs: number,
      responder: number,
      decision: TerminationDecision,
      extra: Attributes | undefined,
      usage: UsageTotals | undefined,
    ) => void,
  ): number {
    const storage = this.#storage;
    if (storage === undefined) return 0;
    const stored = Math.min(this.#total, this.#capacity);
    const wrapped = this.#total > this.#capacity;
    const tail = this.#capacity - this.#head;
    const headStored = Math.min(stored, this.#head);
    const n = Math.min(stored, limit);
    // Past `limit`, the first `first` and the last `n - first` of the stored order are written.
    const first = stored > limit ? Math.ceil(limit / 2) : n;
    const skip = stored - n;
    const numbers = storage.numbers;
    const decisions = storage.decisions;
    const extras = this.#withExtras ? storage.extras : undefined;
    const usages = this.#usages;
    for (let k = 0; k < n; k++) {
      const i = k < first ? k : k + skip;
      let slot: number;
      if (i < headStored) slot = i;
      else if (wrapped) slot = this.#head + ((this.#cursor - this.#head + (i - this.#head)) % tail);
      else slot = i;
      const at = slot * STRIDE;
      write(
        numbers[at] as number,
        numbers[at + 1] as number,
        numbers[at + 2] as number,
        numbers[at + 3] as number,
        decisions[slot] as TerminationDecision,
        extras?.[slot],
        usages?.[slot],
      );
    }
    return n;
  }
}
