/**
 * The prom-client registry as the plugin sees it: by its shape, not `instanceof`. The plugin
 * never loads prom-client itself: every metric is a scrape-time collector (an object with `name`,
 * `help`, `type`, `get()` and `reset()`, which prom-client's registry formats like its own), so a
 * traces-only user needs no prom-client, and a registry from a second copy of prom-client (a
 * nested node_modules, a bundled copy) works like any other.
 */
import { fail } from '../core/shared/validate.ts';
import { hasMethods } from './shape.ts';

/**
 * What the plugin needs of a prom-client `Registry` (any 15.x copy, either content type).
 * Structural, so `.d.ts` users without prom-client installed never resolve its types.
 */
export interface PrometheusRegistry {
  /** `Registry.PROMETHEUS_CONTENT_TYPE` or `Registry.OPENMETRICS_CONTENT_TYPE`. */
  readonly contentType: string;
  // `never`: prom-client's typings list only its own metric classes, the plugin registers
  // collectors of the same shape (see `registerCollector`).
  /** Adds a metric (the plugin's collectors); throws when its name is taken. */
  registerMetric(metric: never): void;
  /** The metric registered under `name`, or `undefined`. */
  getSingleMetric(name: string): unknown;
  /** The exposition of every metric, in `contentType`. */
  metrics(): Promise<string>;
}

/** The structured values a collector hands to prom-client (its `MetricObjectWithValues`). */
export interface CollectedValue {
  value: number;
  labels: Readonly<Record<string, string | number>>;
  sharedLabels?: Readonly<Record<string, string>>;
  metricName?: string;
  exemplar?: { labelSet: Record<string, string>; value: number; timestamp: number };
}

export interface CollectedMetric {
  name: string;
  help: string;
  type: 'counter' | 'gauge' | 'histogram';
  aggregator: 'sum';
  values: CollectedValue[];
}

/** A scrape-time metric, as prom-client's registry calls it. */
export interface Collector {
  /** Writable: prom-client renames counters (drops `_total`) on OpenMetrics registries. */
  name: string;
  readonly help: string;
  readonly type: CollectedMetric['type'];
  readonly aggregator: 'sum';
  /** The values now; a promise for those read elsewhere (a store), which prom-client awaits. */
  get(): CollectedMetric | Promise<CollectedMetric>;
  reset(): void;
}

const OPENMETRICS = 'application/openmetrics-text';

/** What `collector.get()` answers: its identity and `values`. */
export function collected(
  collector: Omit<Collector, 'get'>,
  values: CollectedValue[],
): CollectedMetric {
  return {
    name: collector.name,
    help: collector.help,
    type: collector.type,
    aggregator: collector.aggregator,
    values,
  };
}

/** Validates `registry` by shape; the error says what was expected and what came. */
export function asRegistry(registry: unknown): PrometheusRegistry {
  if (
    !hasMethods(registry, ['registerMetric', 'getSingleMetric', 'metrics']) ||
    typeof (registry as Partial<PrometheusRegistry>).contentType !== 'string'
  ) {
    fail(
      'registry',
      'a prom-client Registry (registerMetric(), getSingleMetric(), metrics() and a contentType)',
      registry,
    );
  }
  return registry as PrometheusRegistry;
}

export function speaksOpenMetrics(registry: PrometheusRegistry): boolean {
  return registry.contentType.startsWith(OPENMETRICS);
}

/** Registers a collector; prom-client throws when the name is taken. */
export function registerCollector(registry: PrometheusRegistry, collector: Collector): void {
  (registry.registerMetric as (metric: Collector) => void).call(registry, collector);
}

/** Throws before anything is registered when one of `names` is taken on `registry`. */
export function assertFree(registry: PrometheusRegistry, names: readonly string[]): void {
  for (const name of names) {
    if (registry.getSingleMetric(name) !== undefined) {
      throw new TypeError(
        `Could not register the orchestrator metrics: a metric named \`${name}\` is already registered on this registry (another library uses the name)`,
      );
    }
  }
}
