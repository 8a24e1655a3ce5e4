/**
 * What the scrape-time metrics share: one read of a slow source (a store, a BullMQ queue) for every
 * metric of a scrape, bounded, and a collector whose values come from it. A scrape waits at most
 * `timeoutMs` for its read; a read that answered is shared for `minIntervalMs`; a failed or late
 * one answers `undefined` (and says why: `error` or `timeout`), and the next scrape reads again.
 * One read of the source at a time: a scrape finding the last read still unanswered (past an
 * earlier scrape's timeout) waits for that one, again at most `timeoutMs`, rather than sending
 * another behind it, so a source that does not answer holds one read, not one per scrape.
 */
import { type CollectedValue, type Collector, collected } from './registry.ts';

/** Why a scrape-time read answered nothing: it failed (`error`) or was still unanswered (`timeout`). */
export type ScrapeReadFailure = 'timeout' | 'error';

type Settled<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly error: unknown };

export class ScrapeRead<T> {
  /** The answer of the current scrape's window, shared by its metrics. */
  #window: Promise<T | undefined> | undefined;
  #windowOpen = false;
  #windowOk = false;
  #windowAt = Number.NEGATIVE_INFINITY;
  /** The source's call in flight, until it settles (it may outlive the windows that waited). */
  #query: Promise<Settled<T>> | undefined;

  constructor(
    private readonly query: () => Promise<T>,
    private readonly timeoutMs: number,
    private readonly minIntervalMs: number,
    /** Told of each scrape whose read failed (with the source's error) or did not answer in time. */
    private readonly onFailure: (reason: ScrapeReadFailure, error?: unknown) => void = () => {},
  ) {}

  /** Whether a call to the source is in flight (answered or not, within a window or past it). */
  get pending(): boolean {
    return this.#query !== undefined;
  }

  /** The reading of this scrape, shared by its metrics. */
  read(): Promise<T | undefined> {
    const now = performance.now();
    if (
      this.#window !== undefined &&
      (this.#windowOpen || (this.#windowOk && now - this.#windowAt < this.minIntervalMs))
    ) {
      return this.#window;
    }
    this.#windowAt = now;
    this.#windowOpen = true;
    this.#windowOk = false;
    if (this.#query === undefined) {
      const query: Promise<Settled<T>> = Promise.resolve()
        .then(this.query)
        .then(
          (value) => ({ ok: true as const, value }),
          (error: unknown) => ({ ok: false as const, error }),
        )
        .finally(() => {
          if (this.#query === query) this.#query = undefined;
        });
      this.#query = query;
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const window = Promise.race([
      this.#query,
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), this.timeoutMs);
        timer.unref?.();
      }),
    ]).then((settled) => {
      clearTimeout(timer);
      this.#windowOpen = false;
      if (settled?.ok === true) {
        this.#windowOk = true;
        return settled.value;
      }
      if (settled === undefined) this.onFailure('timeout');
      else this.onFailure('error', settled.error);
      return undefined;
    });
    this.#window = window;
    return window;
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
