/**
 * Which dispatch events survive a long conversation. The SDK keeps 128 events per span and drops
 * the OLDEST past that, so a long conversation would silently lose its beginning. We keep the
 * first `head` and the last `tail` dispatches, count the rest, and write the kept ones when the
 * conversation ends, with their original timestamps. Per dispatch this is a few array writes.
 */
import type { Attributes } from '@opentelemetry/api';

export class DispatchEvents {
  readonly #head: number;
  readonly #capacity: number;
  // Parallel arrays: slot i holds one dispatch. Slots [0, head) are the first dispatches; slots
  // [head, capacity) are a ring of the latest ones.
  // Plain arrays grown by push: a short conversation allocates for what it has, not the cap.
  readonly #count: number[] = [];
  readonly #elapsed: number[] = [];
  readonly #duration: number[] = [];
  readonly #responder: number[] = [];
  readonly #terminate: boolean[] = [];
  readonly #reason: string[] = [];
  readonly #extra: (Attributes | undefined)[] = [];
  #total = 0;
  /** The ring slot the next dispatch past the capacity goes to. */
  #next: number;

  constructor(capacity: number) {
    this.#capacity = capacity;
    this.#head = Math.ceil(capacity / 2);
    this.#next = this.#head;
  }

  /** Dispatches seen. */
  get total(): number {
    return this.#total;
  }

  /** Dispatches not kept. */
  get dropped(): number {
    return Math.max(0, this.#total - this.#capacity);
  }

  add(
    count: number,
    elapsedMs: number,
    durationMs: number,
    responder: number,
    terminate: boolean,
    reason: string,
    extra: Attributes | undefined,
  ): void {
    const n = this.#total++;
    if (n < this.#capacity) {
      this.#count.push(count);
      this.#elapsed.push(elapsedMs);
      this.#duration.push(durationMs);
      this.#responder.push(responder);
      this.#terminate.push(terminate);
      this.#reason.push(reason);
      this.#extra.push(extra);
      return;
    }
    // The ring of the latest dispatches: the slot after the one written last, wrapping.
    if (this.#capacity === this.#head) return;
    const slot = this.#next;
    this.#next = slot + 1 === this.#capacity ? this.#head : slot + 1;
    this.#count[slot] = count;
    this.#elapsed[slot] = elapsedMs;
    this.#duration[slot] = durationMs;
    this.#responder[slot] = responder;
    this.#terminate[slot] = terminate;
    this.#reason[slot] = reason;
    this.#extra[slot] = extra;
  }

  /** The kept dispatches, in dispatch order. */
  *kept(): Generator<{
    count: number;
    elapsedMs: number;
    durationMs: number;
    responder: number;
    terminate: boolean;
    reason: string;
    extra: Attributes | undefined;
  }> {
    const stored = Math.min(this.#total, this.#capacity);
    const order: number[] = [];
    for (let i = 0; i < Math.min(stored, this.#head); i++) order.push(i);
    if (this.#total > this.#capacity) {
      const tail = this.#capacity - this.#head;
      const oldest = this.#head + ((this.#total - this.#head) % tail);
      for (let i = 0; i < tail; i++) order.push(this.#head + ((oldest - this.#head + i) % tail));
    } else {
      for (let i = this.#head; i < stored; i++) order.push(i);
    }
    for (const slot of order) {
      yield {
        count: this.#count[slot] as number,
        elapsedMs: this.#elapsed[slot] as number,
        durationMs: this.#duration[slot] as number,
        responder: this.#responder[slot] as number,
        terminate: this.#terminate[slot] === true,
        reason: this.#reason[slot] as string,
        extra: this.#extra[slot],
      };
    }
  }
}
