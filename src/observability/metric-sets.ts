/**
 * Which metric set a telemetry records into: one per registry, or, without one, one per meter
 * provider. Telemetries given the same registry (or provider) share the set, whose settings are
 * the first one's; a provider records one set (two would report every series twice).
 */
import type { DiagLogger, MeterProvider } from '@opentelemetry/api';
import type { MetricBuckets } from './metric-families.ts';
import { type MetricSettings, OrchestratorMetrics } from './metrics.ts';
import type { PrometheusRegistry } from './registry.ts';

const byRegistry = new WeakMap<PrometheusRegistry, OrchestratorMetrics>();
const byMeterProvider = new WeakMap<MeterProvider, OrchestratorMetrics>();

/** Where a telemetry's metrics go: a registry, a meter provider, or both. */
export interface MetricSinks {
  readonly registry: PrometheusRegistry | undefined;
  readonly meterProvider: MeterProvider | undefined;
  /** The GenAI metrics on the OpenTelemetry path. */
  readonly genAi: boolean;
}

/**
 * The metric set of `sinks`, created on first use: the registry's (with the meter provider
 * attached when one is given), or, without a registry, the meter provider's. A second telemetry
 * on the same registry (or provider) shares it: other buckets are an error (one histogram cannot
 * have two bucket lists), other `maxReasons` or `exemplars` a warning (the first telemetry's
 * settings stay in force).
 */
export function metricsOf(
  sinks: MetricSinks,
  settings: MetricSettings,
  logger: DiagLogger,
): OrchestratorMetrics {
  const { registry, meterProvider } = sinks;
  let metrics: OrchestratorMetrics | undefined;
  if (registry !== undefined) {
    const existing = byRegistry.get(registry);
    if (existing?.isRegisteredOn(registry)) metrics = existing;
  } else if (meterProvider !== undefined) {
    metrics = byMeterProvider.get(meterProvider);
  }
  if (metrics !== undefined) compareSettings(metrics, settings, logger);
  else {
    metrics = new OrchestratorMetrics(registry, settings, logger);
    if (registry !== undefined) byRegistry.set(registry, metrics);
  }
  if (meterProvider !== undefined) {
    const owner = byMeterProvider.get(meterProvider);
    if (owner === undefined || owner === metrics) {
      metrics.attachMeterProvider(meterProvider, sinks.genAi);
      byMeterProvider.set(meterProvider, metrics);
    } else {
      // Two sets of records on one provider would report every series twice.
      logger.warn(
        "conversation-orchestrator: this MeterProvider already records the metrics of another registry (or of telemetries without one); this telemetry's metrics are not recorded through it (give the telemetries of one MeterProvider the same registry, or none)",
      );
    }
  }
  return metrics;
}

/** The metric set of `registry` alone (see `metricsOf`). */
export function metricsFor(
  registry: PrometheusRegistry,
  settings: MetricSettings,
  logger: DiagLogger,
): OrchestratorMetrics {
  return metricsOf({ registry, meterProvider: undefined, genAi: false }, settings, logger);
}

function compareSettings(
  existing: OrchestratorMetrics,
  settings: MetricSettings,
  logger: DiagLogger,
): void {
  if (!sameBuckets(existing.settings.buckets, settings.buckets)) {
    throw new TypeError(
      'The orchestrator metrics are already registered on this registry with other buckets; give every telemetry on one registry the same buckets',
    );
  }
  const was = existing.settings;
  if (was.maxReasons !== settings.maxReasons || was.exemplars !== settings.exemplars) {
    logger.warn(
      `conversation-orchestrator: the orchestrator metrics on this registry were set up by an earlier telemetry with maxReasons ${was.maxReasons} and exemplars ${was.exemplars ? 'on' : 'off'}; this telemetry asked for maxReasons ${settings.maxReasons} and exemplars ${settings.exemplars ? 'on' : 'off'}, and shares the earlier settings`,
    );
  }
  if (
    was.maxOrchestrators !== settings.maxOrchestrators ||
    was.maxResponders !== settings.maxResponders ||
    was.maxModels !== settings.maxModels
  ) {
    logger.warn(
      `conversation-orchestrator: the orchestrator metrics on this registry were set up by an earlier telemetry with maxOrchestrators ${was.maxOrchestrators}, maxResponders ${was.maxResponders} and maxModels ${was.maxModels}; this telemetry asked for ${settings.maxOrchestrators}, ${settings.maxResponders} and ${settings.maxModels}, and shares the earlier caps`,
    );
  }
}

function sameBuckets(a: MetricBuckets, b: MetricBuckets): boolean {
  const eq = (x: readonly number[], y: readonly number[]) =>
    x.length === y.length && x.every((v, i) => v === y[i]);
  return (
    eq(a.dispatchDuration, b.dispatchDuration) &&
    eq(a.conversationDuration, b.conversationDuration) &&
    eq(a.conversationDispatches, b.conversationDispatches) &&
    eq(a.conversationTokens, b.conversationTokens)
  );
}
