/**
 * What the scrape-time metrics share: one read of a slow source (a store, a BullMQ queue) for every
 * metric of a scrape, bounded, and a collector whose values come from it. A read under way is
 * shared however long it takes; a settled one for `minIntervalMs`; a failed or late one (past
 * `timeoutMs`) answers `undefined`, and the next scrape reads again.
 */
import { type CollectedValue, type Collector, collected } from './registry.ts';

export class ScrapeRead<T> {
  #reading: Promise<T | undefined> | undefined;
  #readAt = Number.NEGATIVE_INFINITY;
  #inFlight = false;

  constructor(
    private readonly query: () => Promise<T>,
    private readonly timeoutMs: number,
    private readonly minIntervalMs: number,
    /** Told of each read that failed or did not answer in time. */
    private readonly onFailure: () => void = () => {},
  ) {}

  /** The reading of this scrape, shared by its metrics. */
  read(): Promise<T | undefined> {
    const now = performance.now();
    if (
      this.#reading !== undefined &&
      (this.#inFlight || now - this.#readAt < this.minIntervalMs)
    ) {
      return this.#reading;
    }
    this.#readAt = now;
    this.#inFlight = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = Symbol('late');
    const reading = Promise.race([
      Promise.resolve().then(this.query),
      new Promise<typeof late>((resolve) => {
        timer = setTimeout(() => resolve(late), this.timeoutMs);
        timer.unref?.();
      }),
    ]).then(
      (value) => {
        clearTimeout(timer);
        this.#inFlight = false;
        if (value !== late) return value as T;
        this.#failed();
        return undefined;
      },
      () => {
        clearTimeout(timer);
        this.#inFlight = false;
        this.#failed();
        return undefined;
      },
    );
    this.#reading = reading;
    return reading;
  }

  #failed(): void {
    // The next scrape reads again rather than sharing a failure.
    this.#readAt = Number.NEGATIVE_INFINITY;
    this.onFailure();
  }
}

/** A gauge or counter whose values are computed at scrape time (from a `ScrapeRead`, usually). */
export class ScrapeCollector implements Collector {
  readonly aggregator = 'sum' as const;
  constructor(
    public name: string,
    readonly help: string,
    readonly type: 'gauge' | 'counter',
    private readonly values: () => CollectedValue[] | Promise<CollectedValue[]>,
  ) {}

  async get() {
    return collected(this, await this.values());
  }

  reset(): void {}
}
