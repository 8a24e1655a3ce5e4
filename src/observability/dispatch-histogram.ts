/**
 * A histogram that is counted on the hot path with plain numbers and handed to prom-client only
 * at scrape time. prom-client's own `observe()` costs ~0.35 µs (0.77 µs with an exemplar): ten
 * times a whole dispatch of a fast agent. This one costs a bucket search and three additions.
 * It registers into a prom-client `Registry` like any metric and formats as a standard histogram
 * (with OpenMetrics exemplars when the registry speaks OpenMetrics).
 */
import type { OpenMetricsContentType, PrometheusContentType, Registry } from 'prom-client';

type AnyRegistry = Registry<PrometheusContentType> | Registry<OpenMetricsContentType>;

/** One labelled series, written by the hot path. */
export class HistogramSeries {
  /** Per-bucket counts (not cumulative); the last slot is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  /** Latest exemplar per bucket: trace id, value, timestamp (seconds). */
  readonly exemplarTrace: (string | undefined)[];
  readonly exemplarValue: Float64Array;
  readonly exemplarTime: Float64Array;

  constructor(
    readonly labels: Readonly<Record<string, string>>,
    private readonly bounds: readonly number[],
  ) {
    this.counts = new Float64Array(bounds.length + 1);
    this.exemplarTrace = new Array(bounds.length + 1).fill(undefined);
    this.exemplarValue = new Float64Array(bounds.length + 1);
    this.exemplarTime = new Float64Array(bounds.length + 1);
  }

  /** Index of the first bucket whose upper bound is >= value. */
  bucket(value: number): number {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > (bounds[i] as number)) i++;
    return i;
  }

  observe(value: number): number {
    const b = this.bucket(value);
    this.counts[b] = (this.counts[b] as number) + 1;
    this.sum += value;
    this.count++;
    return b;
  }

  reset(): void {
    this.counts.fill(0);
    this.sum = 0;
    this.count = 0;
    this.exemplarTrace.fill(undefined);
  }
}

interface ExportedValue {
  value: number;
  labels: Record<string, string | number>;
  metricName: string;
  exemplar?: { labelSet: Record<string, string>; value: number; timestamp: number };
}

export class CollectedHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #series = new Map<string, HistogramSeries>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
    readonly upperBounds: readonly number[],
    private readonly exemplarLabel: string,
  ) {}

  /** The series for these label values (created on first use; keep the reference). */
  series(labels: Readonly<Record<string, string>>): HistogramSeries {
    const key = this.labelNames.map((n) => labels[n]).join('\u0000');
    let series = this.#series.get(key);
    if (series === undefined) {
      series = new HistogramSeries(labels, this.upperBounds);
      this.#series.set(key, series);
    }
    return series;
  }

  register(registry: AnyRegistry): void {
    // prom-client accepts any object with `name`, `get()` and `reset()`; its typings list only its
    // own classes.
    registry.registerMetric(this as unknown as Parameters<Registry['registerMetric']>[0]);
  }

  get(): { name: string; help: string; type: string; aggregator: string; values: ExportedValue[] } {
    const values: ExportedValue[] = [];
    const bucketName = `${this.name}_bucket`;
    for (const s of this.#series.values()) {
      let cumulative = 0;
      for (let i = 0; i <= this.upperBounds.length; i++) {
        cumulative += s.counts[i] as number;
        const value: ExportedValue = {
          value: cumulative,
          labels: {
            ...s.labels,
            le: i < this.upperBounds.length ? (this.upperBounds[i] as number) : '+Inf',
          },
          metricName: bucketName,
        };
        const trace = s.exemplarTrace[i];
        if (trace !== undefined) {
          value.exemplar = {
            labelSet: { [this.exemplarLabel]: trace },
            value: s.exemplarValue[i] as number,
            timestamp: s.exemplarTime[i] as number,
          };
        }
        values.push(value);
      }
      values.push({ value: s.sum, labels: { ...s.labels }, metricName: `${this.name}_sum` });
      values.push({ value: s.count, labels: { ...s.labels }, metricName: `${this.name}_count` });
    }
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values,
    };
  }

  reset(): void {
    for (const s of this.#series.values()) s.reset();
  }
}
