/**
 * A FIFO ring buffer. `Array#shift` is O(n) once an array leaves V8's fast path; the queue of a
 * long conversation must stay O(1) per message and give memory back when it drains.
 */
export class MessageQueue<T> {
  #items: (T | undefined)[];
  #head = 0;
  #length = 0;
  #mask: number;

  constructor(initialCapacity = 4) {
    this.#items = new Array(initialCapacity);
    this.#mask = initialCapacity - 1;
  }

  get length(): number {
    return this.#length;
  }

  push(item: T): void {
    if (this.#length > this.#mask) this.#grow();
    this.#items[(this.#head + this.#length) & this.#mask] = item;
    this.#length++;
  }

  /** Removes and returns the head. Call only when `length > 0`. */
  shift(): T {
    const item = this.#items[this.#head] as T;
    this.#items[this.#head] = undefined;
    this.#head = (this.#head + 1) & this.#mask;
    this.#length--;
    return item;
  }

  /** The items, head first (for checkpoints). */
  toArray(): T[] {
    const items: T[] = new Array(this.#length);
    for (let i = 0; i < this.#length; i++)
      items[i] = this.#items[(this.#head + i) & this.#mask] as T;
    return items;
  }

  #grow(): void {
    const capacity = this.#items.length * 2;
    const next = new Array<T | undefined>(capacity);
    for (let i = 0; i < this.#length; i++) next[i] = this.#items[(this.#head + i) & this.#mask];
    this.#items = next;
    this.#head = 0;
    this.#mask = capacity - 1;
  }
}

/** The last `size` items, oldest first. */
export class History<T> {
  readonly #items: T[] = [];
  readonly #size: number;
  #next = 0;

  constructor(size: number) {
    this.#size = size;
  }

  push(item: T): void {
    if (this.#items.length < this.#size) this.#items.push(item);
    else {
      this.#items[this.#next] = item;
      this.#next = (this.#next + 1) % this.#size;
    }
  }

  toArray(): T[] {
    if (this.#items.length < this.#size) return this.#items.slice();
    return this.#items.slice(this.#next).concat(this.#items.slice(0, this.#next));
  }
}
