/**
 * The metric families of the orchestrator: each one's name, help text, labels and buckets, and
 * which records of metric-records.ts it reads at scrape time. Registered all or nothing: a name
 * taken by another library must not leave half a set on the registry.
 */
import type { Series } from './collected-counter.ts';
import { CollectedCounter } from './collected-counter.ts';
import { CollectedHistogram } from './dispatch-histogram.ts';
import type { DispatchRecord, OrchestratorRecord } from './metric-records.ts';
import { assertFree, type PrometheusRegistry, registerCollector } from './registry.ts';
import {
  EXEMPLAR_TRACE_ID,
  LABEL_ORCHESTRATOR,
  LABEL_REASON,
  LABEL_RESPONDER,
  LABEL_STORE,
  METRIC_CHECKPOINT_DURATION,
  METRIC_CHECKPOINT_FAILURES,
  METRIC_CONVERSATION_DISPATCHES,
  METRIC_CONVERSATION_DURATION,
  METRIC_CONVERSATION_TOKENS,
  METRIC_CONVERSATIONS_ENDED,
  METRIC_CONVERSATIONS_IN_PROGRESS,
  METRIC_CONVERSATIONS_RESUMED,
  METRIC_CONVERSATIONS_STARTED,
  METRIC_DISPATCH_DURATION,
  METRIC_DISPATCHES,
  METRIC_LEASE_CONFLICTS,
  METRIC_LISTENER_ERRORS,
  METRIC_RESPONDER_DEADLINES,
  METRIC_RESPONDER_ERRORS,
  METRIC_RESPONDER_REINVOCATIONS,
  METRIC_TOKENS,
} from './semconv.ts';

/** The histograms' bucket lists (upper bounds), in their unit. */
export interface MetricBuckets {
  readonly dispatchDuration: readonly number[];
  readonly conversationDuration: readonly number[];
  readonly conversationDispatches: readonly number[];
  readonly conversationTokens: readonly number[];
}

const METRIC_NAMES = [
  METRIC_CONVERSATIONS_STARTED,
  METRIC_CONVERSATIONS_ENDED,
  METRIC_CONVERSATIONS_IN_PROGRESS,
  METRIC_CONVERSATION_DURATION,
  METRIC_CONVERSATION_DISPATCHES,
  METRIC_DISPATCHES,
  METRIC_DISPATCH_DURATION,
  METRIC_RESPONDER_ERRORS,
  METRIC_RESPONDER_DEADLINES,
  METRIC_LISTENER_ERRORS,
  METRIC_TOKENS,
  METRIC_CONVERSATION_TOKENS,
] as const;

/** The metrics of durable conversations: registered at the first conversation with a store. */
const DURABLE_METRIC_NAMES = [
  METRIC_RESPONDER_REINVOCATIONS,
  METRIC_CONVERSATIONS_RESUMED,
  METRIC_CHECKPOINT_DURATION,
  METRIC_CHECKPOINT_FAILURES,
  METRIC_LEASE_CONFLICTS,
] as const;

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

function histogram(
  name: string,
  help: string,
  labels: string[],
  bounds: readonly number[],
): CollectedHistogram {
  return new CollectedHistogram(name, help, labels, [...bounds], EXEMPLAR_TRACE_ID);
}

/**
 * Registers the orchestrator metrics on `registry`, read from `orchestrators` at each scrape.
 * Throws, registering nothing, when one of their names is taken.
 */
export function registerOrchestratorFamilies(
  registry: PrometheusRegistry,
  buckets: MetricBuckets,
  orchestrators: ReadonlyMap<string, OrchestratorRecord>,
): OrchestratorHistograms {
  const each = eachOf(orchestrators);
  const conversationDuration = histogram(
    METRIC_CONVERSATION_DURATION,
    'Elapsed time of a conversation at its end, by reason.',
    [LABEL_ORCHESTRATOR, LABEL_REASON],
    buckets.conversationDuration,
  );
  const conversationDispatches = histogram(
    METRIC_CONVERSATION_DISPATCHES,
    'Dispatches of a conversation at its end, by reason.',
    [LABEL_ORCHESTRATOR, LABEL_REASON],
    buckets.conversationDispatches,
  );
  const conversationTokens = histogram(
    METRIC_CONVERSATION_TOKENS,
    'Tokens (input + output) of a conversation that reported any, at its end, by reason.',
    [LABEL_ORCHESTRATOR, LABEL_REASON],
    buckets.conversationTokens,
  );
  const dispatchDuration = histogram(
    METRIC_DISPATCH_DURATION,
    'Duration of one dispatch: the responder answer plus the orchestrator work around it.',
    [LABEL_ORCHESTRATOR, LABEL_RESPONDER],
    buckets.dispatchDuration,
  );
  const collectors = [
    new CollectedCounter(
      METRIC_CONVERSATIONS_STARTED,
      'Conversations started.',
      'counter',
      each((o) => [o.started]),
    ),
    new CollectedCounter(
      METRIC_CONVERSATIONS_ENDED,
      'Conversations ended, by reason (converged, max_dispatches, timeout, queue_exhausted, aborted, deadline, error, ...).',
      'counter',
      each((o) => o.ends.values()),
    ),
    new CollectedCounter(
      METRIC_CONVERSATIONS_IN_PROGRESS,
      'Conversations running now.',
      'gauge',
      each((o) => [o.inProgress]),
    ),
    conversationDuration,
    conversationDispatches,
    new CollectedCounter(
      METRIC_DISPATCHES,
      'Successful dispatches (one responder answer each).',
      'counter',
      each((o) => o.responders.values()),
    ),
    dispatchDuration,
    new CollectedCounter(
      METRIC_RESPONDER_ERRORS,
      'Responder invocations that threw or rejected.',
      'counter',
      eachResponder(each, (r) => r.errors),
    ),
    new CollectedCounter(
      METRIC_RESPONDER_DEADLINES,
      'Conversations ended by the dispatch deadline (dispatchTimeoutMs) while this responder had not answered.',
      'counter',
      eachResponder(each, (r) => r.deadlines),
    ),
    new CollectedCounter(
      METRIC_LISTENER_ERRORS,
      'Listener calls that threw or rejected.',
      'counter',
      each((o) => [o.listenerErrors]),
    ),
    new CollectedCounter(
      METRIC_TOKENS,
      'Tokens reported (context.reportUsage), by responder, model and type (input, output); failed and skipped invocations included.',
      'counter',
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
  return { dispatchDuration, conversationDuration, conversationDispatches, conversationTokens };
}

/**
 * Registers the metrics of durable conversations on `registry`, read from `orchestrators`.
 * `checkpointBuckets` bound the checkpoint histogram, which is returned. Throws when one of their
 * names is taken (checked before any is registered).
 */
export function registerDurableFamilies(
  registry: PrometheusRegistry,
  checkpointBuckets: readonly number[],
  orchestrators: ReadonlyMap<string, OrchestratorRecord>,
): CollectedHistogram {
  const each = eachOf(orchestrators);
  const duration = histogram(
    METRIC_CHECKPOINT_DURATION,
    'Duration of one checkpoint commit (the store call), by store.',
    [LABEL_ORCHESTRATOR, LABEL_STORE],
    checkpointBuckets,
  );
  assertFree(registry, DURABLE_METRIC_NAMES);
  registerCollector(
    registry,
    new CollectedCounter(
      METRIC_RESPONDER_REINVOCATIONS,
      'Responder invocations run again after a crash (attempt > 1): the call in flight when a worker died.',
      'counter',
      eachResponder(each, (r) => r.reinvocations),
    ),
  );
  registerCollector(
    registry,
    new CollectedCounter(
      METRIC_CONVERSATIONS_RESUMED,
      'Conversations resumed, by cause (crash, suspend, handoff).',
      'counter',
      each((o) => o.resumed.values()),
    ),
  );
  duration.register(registry);
  registerCollector(
    registry,
    new CollectedCounter(
      METRIC_CHECKPOINT_FAILURES,
      'Checkpoint commits that failed (the store threw or did not answer in time), by store.',
      'counter',
      each(function* (o) {
        for (const c of o.checkpoints.values()) yield c.failures;
      }),
    ),
  );
  registerCollector(
    registry,
    new CollectedCounter(
      METRIC_LEASE_CONFLICTS,
      'Commits or lease renewals refused because another process holds the conversation.',
      'counter',
      each(function* (o) {
        if (o.leaseConflicts !== undefined) yield o.leaseConflicts;
      }),
    ),
  );
  return duration;
}
