/**
 * A counter or gauge whose values live in plain numbers on the hot path and are read at scrape
 * time: exact, ~1 ns per count instead of prom-client's ~0.2 µs per `inc`, and no prom-client
 * class needed (the registry formats the structured values of `get()` like its own metrics').
 */
import {
  type CollectedMetric,
  type CollectedValue,
  type Collector,
  collected,
} from './registry.ts';

/** One series: its labels and where its value is read from. */
export interface Series {
  readonly labels: Readonly<Record<string, string>>;
  /** A counter's count (reset by `registry.resetMetrics()`). */
  count: number;
}

/** Where a counter's value lives when it is not a `Series` of its own. */
export interface Kept {
  readonly labels: Readonly<Record<string, string>>;
  read(): number;
  zero(): void;
}

export class CollectedCounter<T extends Series | Kept = Series> implements Collector {
  readonly aggregator = 'sum' as const;

  /** `series()` lists the series to expose, in order, at each scrape. */
  constructor(
    public name: string,
    readonly help: string,
    readonly type: 'counter' | 'gauge',
    private readonly series: () => Iterable<T>,
  ) {}

  get(): CollectedMetric {
    const values: CollectedValue[] = [];
    for (const s of this.series()) {
      values.push({ value: 'read' in s ? s.read() : s.count, labels: s.labels });
    }
    return collected(this, values);
  }

  /** A counter starts again from 0; a gauge is read afresh at the next scrape anyway. */
  reset(): void {
    if (this.type !== 'counter') return;
    for (const s of this.series()) {
      if ('zero' in s) s.zero();
      else s.count = 0;
    }
  }
}
