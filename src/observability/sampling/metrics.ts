/**
 * The sampler's metrics on a prom-client registry: decisions by decision and rule, spans lost to
 * its bounds, and what it holds now. Plain numbers read at scrape time, like the telemetry's. Two
 * samplers on one registry share the set (their counts add up).
 */
import { CollectedCounter, type Series } from '../collected-counter.ts';
import { assertFree, type PrometheusRegistry, registerCollector } from '../registry.ts';
import {
  LABEL_DECISION,
  LABEL_LIMIT,
  LABEL_RULE,
  METRIC_SAMPLER_BUFFERED_SPANS,
  METRIC_SAMPLER_DECISIONS,
  METRIC_SAMPLER_PENDING_TRACES,
  METRIC_SAMPLER_SPANS_LOST,
  SAMPLER_LIMIT_TOTAL,
  SAMPLER_LIMIT_TRACE,
} from '../semconv.ts';

/** The (decision, rule) pairs whose series start at 0: the sampler's table of what it decides. */
export type SamplerDecisions = readonly (readonly [decision: string, rule: string])[];

const NAMES = [
  METRIC_SAMPLER_DECISIONS,
  METRIC_SAMPLER_SPANS_LOST,
  METRIC_SAMPLER_BUFFERED_SPANS,
  METRIC_SAMPLER_PENDING_TRACES,
] as const;

/** What a sampler holds now, read at scrape time. */
export interface SamplerLoad {
  readonly bufferedSpans: number;
  readonly pendingTraces: number;
}

export class SamplerMetrics {
  readonly #decisions = new Map<string, Series>();
  readonly #lost = new Map<string, Series>();
  readonly #samplers = new Set<SamplerLoad>();
  readonly #first: CollectedCounter;

  constructor(registry: PrometheusRegistry, decisions: SamplerDecisions) {
    for (const [decision, rule] of decisions) {
      this.#decisions.set(`${decision} ${rule}`, {
        labels: { [LABEL_DECISION]: decision, [LABEL_RULE]: rule },
        count: 0,
      });
    }
    for (const limit of [SAMPLER_LIMIT_TRACE, SAMPLER_LIMIT_TOTAL]) {
      this.#lost.set(limit, { labels: { [LABEL_LIMIT]: limit }, count: 0 });
    }
    const samplers = this.#samplers;
    const gauge = (read: (s: SamplerLoad) => number) => () => {
      let sum = 0;
      for (const s of samplers) sum += read(s);
      return [{ labels: {}, count: sum }];
    };
    this.#first = new CollectedCounter(
      METRIC_SAMPLER_DECISIONS,
      'Traces the conversation sampler decided, by decision (keep, drop) and the rule that made it.',
      'counter',
      () => this.#decisions.values(),
    );
    const collectors = [
      this.#first,
      new CollectedCounter(
        METRIC_SAMPLER_SPANS_LOST,
        'Spans the conversation sampler could not buffer (limit: trace or total) and never exported.',
        'counter',
        () => this.#lost.values(),
      ),
      new CollectedCounter(
        METRIC_SAMPLER_BUFFERED_SPANS,
        'Spans buffered now, waiting for their conversation to be decided.',
        'gauge',
        gauge((s) => s.bufferedSpans),
      ),
      new CollectedCounter(
        METRIC_SAMPLER_PENDING_TRACES,
        'Traces waiting for their conversation to be decided now.',
        'gauge',
        gauge((s) => s.pendingTraces),
      ),
    ];
    assertFree(registry, NAMES);
    for (const c of collectors) registerCollector(registry, c);
  }

  isRegisteredOn(registry: PrometheusRegistry): boolean {
    return registry.getSingleMetric(METRIC_SAMPLER_DECISIONS) === this.#first;
  }

  /** A sampler whose load the gauges add up. */
  watch(sampler: SamplerLoad): void {
    this.#samplers.add(sampler);
  }

  decided(decision: string, rule: string): void {
    const series = this.#decisions.get(`${decision} ${rule}`);
    if (series !== undefined) series.count++;
  }

  lost(limit: string): void {
    const series = this.#lost.get(limit);
    if (series !== undefined) series.count++;
  }
}

const byRegistry = new WeakMap<PrometheusRegistry, SamplerMetrics>();

/**
 * The sampler metrics of `registry`, registered at the first sampler given it, with a series at 0
 * for each of its `decisions`.
 */
export function samplerMetricsFor(
  registry: PrometheusRegistry,
  decisions: SamplerDecisions,
): SamplerMetrics {
  const existing = byRegistry.get(registry);
  if (existing?.isRegisteredOn(registry)) return existing;
  const metrics = new SamplerMetrics(registry, decisions);
  byRegistry.set(registry, metrics);
  return metrics;
}
