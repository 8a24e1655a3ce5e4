/**
 * The metric families of the orchestrator on a prom-client registry: each one's name, help text,
 * labels and buckets come from the definition table (metric-definitions.ts), and which records of
 * metric-records.ts it reads at scrape time is said here. Registered all or nothing: a name taken
 * by another library must not leave half a set on the registry. Without a registry (the
 * OpenTelemetry path alone) the histograms are made all the same: the records live in them.
 */
import type { Series } from './collected-counter.ts';
import { CollectedCounter } from './collected-counter.ts';
import { CollectedHistogram } from './dispatch-histogram.ts';
import {
  DURABLE_METRICS,
  type MetricDefinition,
  ORCHESTRATOR_METRICS,
} from './metric-definitions.ts';
import type { DispatchRecord, OrchestratorRecord } from './metric-records.ts';
import { assertFree, type PrometheusRegistry, registerCollector } from './registry.ts';
import { EXEMPLAR_TRACE_ID } from './semconv.ts';

/** The histograms' bucket lists (upper bounds), in their unit. */
export interface MetricBuckets {
  readonly dispatchDuration: readonly number[];
  readonly conversationDuration: readonly number[];
  readonly conversationDispatches: readonly number[];
  readonly conversationTokens: readonly number[];
}

const METRIC_NAMES = Object.values(ORCHESTRATOR_METRICS).map((d) => d.prometheus);

/** The metrics of durable conversations: registered at the first conversation with a store. */
const DURABLE_METRIC_NAMES = Object.values(DURABLE_METRICS).map((d) => d.prometheus);

/** The histograms of durable conversations (the counters read records only). */
export interface DurableHistograms {
  readonly checkpointDuration: CollectedHistogram;
  readonly checkpointSize: CollectedHistogram;
  readonly snapshotDuration: CollectedHistogram;
}

/** The histograms the recording methods write series of (the counters read records only). */
export interface OrchestratorHistograms {
  readonly dispatchDuration: CollectedHistogram;
  readonly conversationDuration: CollectedHistogram;
  readonly conversationDispatches: CollectedHistogram;
  readonly conversationTokens: CollectedHistogram;
}

/** What a family's collector lists at a scrape: a pick of every orchestrator's records, in order. */
type Each = <T>(pick: (o: OrchestratorRecord) => Iterable<T>) => () => Generator<T>;

function eachOf(orchestrators: ReadonlyMap<string, OrchestratorRecord>): Each {
  return <T>(pick: (o: OrchestratorRecord) => Iterable<T>) =>
    function* (): Generator<T> {
      for (const o of orchestrators.values()) yield* pick(o);
    };
}

/** Every responder's series `pick` gives, where it was created. */
function eachResponder(
  each: Each,
  pick: (r: DispatchRecord) => Series | undefined,
): () => Generator<Series> {
  return each(function* (o) {
    for (const r of o.responders.values()) {
      const s = pick(r);
      if (s !== undefined) yield s;
    }
  });
}

function histogram(definition: MetricDefinition, bounds: readonly number[]): CollectedHistogram {
  return new CollectedHistogram(
    definition.prometheus,
    definition.help,
    [...definition.labels],
    [...bounds],
    EXEMPLAR_TRACE_ID,
  );
}

/** A counter or gauge of `definition`, listing `series` at each scrape. */
function counter<T extends Series | DispatchRecord>(
  definition: MetricDefinition,
  series: () => Iterable<T>,
): CollectedCounter<T> {
  return new CollectedCounter(
    definition.prometheus,
    definition.help,
    definition.kind === 'gauge' ? 'gauge' : 'counter',
    series,
  );
}

/**
 * The orchestrator metrics, read from `orchestrators` at each scrape, registered on `registry`
 * when one is given. Throws, registering nothing, when one of their names is taken.
 */
export function registerOrchestratorFamilies(
  registry: PrometheusRegistry | undefined,
  buckets: MetricBuckets,
  orchestrators: ReadonlyMap<string, OrchestratorRecord>,
): OrchestratorHistograms {
  const each = eachOf(orchestrators);
  const M = ORCHESTRATOR_METRICS;
  const conversationDuration = histogram(M.conversationDuration, buckets.conversationDuration);
  const conversationDispatches = histogram(
    M.conversationDispatches,
    buckets.conversationDispatches,
  );
  const conversationTokens = histogram(M.conversationTokens, buckets.conversationTokens);
  const dispatchDuration = histogram(M.dispatchDuration, buckets.dispatchDuration);
  const histograms = {
    dispatchDuration,
    conversationDuration,
    conversationDispatches,
    conversationTokens,
  };
  if (registry === undefined) return histograms;
  const collectors = [
    counter(
      M.conversationsStarted,
      each((o) => [o.started]),
    ),
    counter(
      M.conversationsEnded,
      each((o) => o.ends.values()),
    ),
    counter(
      M.conversationsInProgress,
      each((o) => [o.inProgress]),
    ),
    conversationDuration,
    conversationDispatches,
    counter(
      M.dispatches,
      each((o) => o.responders.values()),
    ),
    dispatchDuration,
    counter(
      M.responderErrors,
      eachResponder(each, (r) => r.errors),
    ),
    counter(
      M.responderDeadlines,
      eachResponder(each, (r) => r.deadlines),
    ),
    counter(
      M.listenerErrors,
      each((o) => [o.listenerErrors]),
    ),
    counter(
      M.tokens,
      each(function* (o) {
        for (const t of o.tokens.values()) {
          yield t.input;
          yield t.output;
        }
      }),
    ),
    conversationTokens,
  ];
  assertFree(registry, METRIC_NAMES);
  for (const collector of collectors) {
    if (collector instanceof CollectedHistogram) collector.register(registry);
    else registerCollector(registry, collector);
  }
  return histograms;
}

/**
 * The metrics of durable conversations, read from `orchestrators`, registered on `registry` when
 * one is given. `checkpointBuckets` bound the duration histograms, `sizeBuckets` the size one;
 * the histograms are returned. Throws when one of their names is taken (checked before any is
 * registered).
 */
export function registerDurableFamilies(
  registry: PrometheusRegistry | undefined,
  checkpointBuckets: readonly number[],
  sizeBuckets: readonly number[],
  orchestrators: ReadonlyMap<string, OrchestratorRecord>,
): DurableHistograms {
  const each = eachOf(orchestrators);
  const D = DURABLE_METRICS;
  const duration = histogram(D.checkpointDuration, checkpointBuckets);
  const histograms: DurableHistograms = {
    checkpointDuration: duration,
    checkpointSize: histogram(D.checkpointSize, sizeBuckets),
    snapshotDuration: histogram(D.snapshotDuration, checkpointBuckets),
  };
  if (registry === undefined) return histograms;
  assertFree(registry, DURABLE_METRIC_NAMES);
  registerCollector(
    registry,
    counter(
      D.responderReinvocations,
      eachResponder(each, (r) => r.reinvocations),
    ),
  );
  registerCollector(
    registry,
    counter(
      D.conversationsResumed,
      each((o) => o.resumed.values()),
    ),
  );
  duration.register(registry);
  registerCollector(
    registry,
    counter(
      D.checkpointFailures,
      each(function* (o) {
        for (const c of o.checkpoints.values()) yield c.failures;
      }),
    ),
  );
  histograms.checkpointSize.register(registry);
  histograms.snapshotDuration.register(registry);
  registerCollector(
    registry,
    counter(
      D.snapshotFailures,
      each(function* (o) {
        for (const c of o.checkpoints.values()) {
          if (c.snapshotFailures !== undefined) yield c.snapshotFailures;
        }
      }),
    ),
  );
  registerCollector(
    registry,
    counter(
      D.leaseConflicts,
      each(function* (o) {
        if (o.leaseConflicts !== undefined) yield o.leaseConflicts;
      }),
    ),
  );
  return histograms;
}
