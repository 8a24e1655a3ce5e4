/**
 * Which dispatch events survive a long conversation. The SDK keeps 128 events per span and drops
 * the OLDEST past that, so a long conversation would silently lose its beginning. We keep the
 * first `head` and the last `tail` dispatches, count the rest, and write the kept ones when the
 * conversation ends, with their original timestamps. Per dispatch this is five writes into
 * preallocated storage.
 */
import type { Attributes } from '@opentelemetry/api';
import type { DispatchInfo } from '../core/observer.ts';
import type { TerminationDecision } from '../core/types.ts';

/** Numbers kept per dispatch: count, elapsed, duration, responder index. */
const STRIDE = 4;

export interface KeptDispatch {
  readonly count: number;
  readonly elapsedMs: number;
  readonly durationMs: number;
  readonly responder: number;
  readonly decision: TerminationDecision;
  readonly extra: Attributes | undefined;
}

export class DispatchEvents {
  readonly #head: number;
  readonly #capacity: number;
  // Slot i holds one dispatch: slots [0, head) the first dispatches, slots [head, capacity) a ring
  // of the latest. A plain array (V8 keeps it as unboxed doubles) that grows as dispatches come,
  // so a short conversation allocates for what it has; a Float64Array per conversation cost more
  // in allocation and GC (array buffers are swept separately) than the writes it saves.
  readonly #numbers: number[] = [];
  #decisions: TerminationDecision[] = [];
  readonly #extras: (Attributes | undefined)[] | undefined;
  #total = 0;
  /** The ring slot the next dispatch past the capacity goes to. */
  #next: number;

  /** `withExtras`: keep per-dispatch attributes (state attributes, content). */
  constructor(capacity: number, withExtras: boolean) {
    this.#capacity = capacity;
    this.#head = Math.ceil(capacity / 2);
    this.#next = this.#head;
    this.#extras = withExtras ? [] : undefined;
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
    const n = this.#total++;
    let slot: number;
    if (n < this.#capacity) {
      slot = n;
    } else {
      if (this.#capacity === this.#head) return;
      slot = this.#next;
      this.#next = slot + 1 === this.#capacity ? this.#head : slot + 1;
    }
    const numbers = this.#numbers;
    const at = slot * STRIDE;
    numbers[at] = info.dispatchCount;
    numbers[at + 1] = info.elapsedMs;
    numbers[at + 2] = info.durationMs;
    numbers[at + 3] = info.responderIndex;
    this.#decisions[slot] = info.decision;
    if (this.#extras !== undefined) this.#extras[slot] = extra;
  }

  /**
   * The kept dispatches, in dispatch order. With `limit` below what is kept (room left on the
   * span for events written after them, such as the exception), the middle ones give way: the
   * first `ceil(limit / 2)` and the last `floor(limit / 2)` are yielded.
   */
  *kept(limit = Number.POSITIVE_INFINITY): Generator<KeptDispatch> {
    const out: KeptDispatch[] = [];
    this.forEachKept(limit, (count, elapsedMs, durationMs, responder, decision, extra) => {
      out.push({ count, elapsedMs, durationMs, responder, decision, extra });
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
    ) => void,
  ): number {
    const stored = Math.min(this.#total, this.#capacity);
    const wrapped = this.#total > this.#capacity;
    const tail = this.#capacity - this.#head;
    const headStored = Math.min(stored, this.#head);
    const n = Math.min(stored, limit);
    // Past `limit`, the first `first` and the last `n - first` of the stored order are written.
    const first = stored > limit ? Math.ceil(limit / 2) : n;
    const skip = stored - n;
    const numbers = this.#numbers;
    const decisions = this.#decisions;
    const extras = this.#extras;
    for (let k = 0; k < n; k++) {
      const i = k < first ? k : k + skip;
      let slot: number;
      if (i < headStored) slot = i;
      else if (wrapped) slot = this.#head + ((this.#next - this.#head + (i - this.#head)) % tail);
      else slot = i;
      const at = slot * STRIDE;
      write(
        numbers[at] as number,
        numbers[at + 1] as number,
        numbers[at + 2] as number,
        numbers[at + 3] as number,
        decisions[slot] as TerminationDecision,
        extras?.[slot],
      );
    }
    return n;
  }
}
