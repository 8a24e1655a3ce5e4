/**
 * The Prometheus metrics of the orchestrator, one set per registry. Two telemetry instances given
 * the same registry share the set (prom-client throws when a name is registered twice).
 * Per-dispatch metrics are counted in plain numbers and handed to prom-client at scrape time;
 * per-conversation metrics go straight to prom-client (with exemplars when asked).
 */
import {
  Counter,
  Gauge,
  Histogram,
  type OpenMetricsContentType,
  type PrometheusContentType,
  type Registry,
} from 'prom-client';
import { CollectedHistogram, type HistogramSeries } from './dispatch-histogram.ts';
import {
  EXEMPLAR_TRACE_ID,
  LABEL_ORCHESTRATOR,
  LABEL_REASON,
  LABEL_RESPONDER,
  METRIC_CONVERSATION_DISPATCHES,
  METRIC_CONVERSATION_DURATION,
  METRIC_CONVERSATIONS_ENDED,
  METRIC_CONVERSATIONS_IN_PROGRESS,
  METRIC_CONVERSATIONS_STARTED,
  METRIC_DISPATCH_DURATION,
  METRIC_DISPATCHES,
  METRIC_LISTENER_ERRORS,
  METRIC_RESPONDER_ERRORS,
  REASON_OTHER,
} from './semconv.ts';

type AnyRegistry = Registry<PrometheusContentType> | Registry<OpenMetricsContentType>;

/** Sub-microsecond algorithmic agents to minute-long LLM calls, in seconds. */
export const DEFAULT_DISPATCH_DURATION_BUCKETS = [
  0.000001, 0.000005, 0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1,
  2.5, 5, 10, 30, 60,
] as const;
/** Milliseconds to ten minutes, in seconds. */
export const DEFAULT_CONVERSATION_DURATION_BUCKETS = [
  0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
] as const;
/** Dispatches per conversation. */
export const DEFAULT_CONVERSATION_DISPATCH_BUCKETS = [
  1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 100000, 1000000,
] as const;

/** Reasons the library itself produces: always their own label value. */
export const BUILT_IN_REASONS: ReadonlySet<string> = new Set([
  'converged',
  'consensus',
  'max_dispatches',
  'timeout',
  'stopped',
  'queue_exhausted',
  'aborted',
  'deadline',
  'error',
  'queue_overflow',
]);

/** Reasons whose `orchestrator_conversations_ended_total` series start at 0. */
const INITIALIZED_REASONS = [
  'converged',
  'max_dispatches',
  'timeout',
  'queue_exhausted',
  'aborted',
  'deadline',
  'error',
  'queue_overflow',
] as const;

export interface MetricBuckets {
  readonly dispatchDuration: readonly number[];
  readonly conversationDuration: readonly number[];
  readonly conversationDispatches: readonly number[];
}

/** Hot-path counters of one (orchestrator, responder). */
export interface DispatchRecord {
  dispatches: number;
  flushed: number;
  readonly labels: Readonly<Record<string, string>>;
  readonly duration: HistogramSeries;
}

export class OrchestratorMetrics {
  readonly exemplars: boolean;
  readonly buckets: MetricBuckets;
  readonly #started: Counter<string>;
  readonly #ended: Counter<string>;
  readonly #conversationDuration: Histogram<string>;
  readonly #conversationDispatches: Histogram<string>;
  readonly #responderErrors: Counter<string>;
  readonly #listenerErrors: Counter<string>;
  readonly #dispatchDuration: CollectedHistogram;
  readonly #records = new Map<string, Map<string, DispatchRecord>>();
  readonly #inProgress = new Map<string, number>();
  readonly #reasons = new Set<string>();
  readonly #initialized = new Set<string>();
  readonly #maxReasons: number;

  constructor(
    registry: AnyRegistry,
    buckets: MetricBuckets,
    exemplars: boolean,
    maxReasons: number,
  ) {
    this.exemplars = exemplars;
    this.buckets = buckets;
    this.#maxReasons = maxReasons;
    const registers = [registry];
    const records = this.#records;
    const inProgress = this.#inProgress;
    this.#started = new Counter({
      name: METRIC_CONVERSATIONS_STARTED,
      help: 'Conversations started.',
      labelNames: [LABEL_ORCHESTRATOR],
      registers,
    });
    this.#ended = new Counter({
      name: METRIC_CONVERSATIONS_ENDED,
      help: 'Conversations ended, by reason (converged, max_dispatches, timeout, queue_exhausted, aborted, deadline, error, ...).',
      labelNames: [LABEL_ORCHESTRATOR, LABEL_REASON],
      registers,
    });
    new Gauge({
      name: METRIC_CONVERSATIONS_IN_PROGRESS,
      help: 'Conversations running now.',
      labelNames: [LABEL_ORCHESTRATOR],
      registers,
      collect() {
        for (const [orchestrator, n] of inProgress)
          this.set({ [LABEL_ORCHESTRATOR]: orchestrator }, n);
      },
    });
    this.#conversationDuration = new Histogram({
      name: METRIC_CONVERSATION_DURATION,
      help: 'Elapsed time of a conversation at its end, by reason.',
      labelNames: [LABEL_ORCHESTRATOR, LABEL_REASON],
      buckets: [...buckets.conversationDuration],
      enableExemplars: exemplars,
      registers,
    });
    this.#conversationDispatches = new Histogram({
      name: METRIC_CONVERSATION_DISPATCHES,
      help: 'Dispatches of a conversation at its end, by reason.',
      labelNames: [LABEL_ORCHESTRATOR, LABEL_REASON],
      buckets: [...buckets.conversationDispatches],
      enableExemplars: exemplars,
      registers,
    });
    new Counter({
      name: METRIC_DISPATCHES,
      help: 'Successful dispatches (one responder answer each).',
      labelNames: [LABEL_ORCHESTRATOR, LABEL_RESPONDER],
      registers,
      // Counted on the hot path in plain numbers; handed over at scrape time, exactly.
      collect() {
        for (const byResponder of records.values()) {
          for (const r of byResponder.values()) {
            if (r.dispatches > r.flushed) {
              this.inc(r.labels, r.dispatches - r.flushed);
              r.flushed = r.dispatches;
            }
          }
        }
      },
    });
    this.#dispatchDuration = new CollectedHistogram(
      METRIC_DISPATCH_DURATION,
      'Duration of one dispatch: the responder answer plus the orchestrator work around it.',
      [LABEL_ORCHESTRATOR, LABEL_RESPONDER],
      [...buckets.dispatchDuration],
      EXEMPLAR_TRACE_ID,
    );
    this.#dispatchDuration.register(registry);
    this.#responderErrors = new Counter({
      name: METRIC_RESPONDER_ERRORS,
      help: 'Responder invocations that threw or rejected.',
      labelNames: [LABEL_ORCHESTRATOR, LABEL_RESPONDER],
      registers,
    });
    this.#listenerErrors = new Counter({
      name: METRIC_LISTENER_ERRORS,
      help: 'Listener calls that threw or rejected.',
      labelNames: [LABEL_ORCHESTRATOR],
      registers,
    });
  }

  /** The hot-path records of an orchestrator's responders, in the order given. */
  records(orchestrator: string, responders: readonly string[]): DispatchRecord[] {
    let byResponder = this.#records.get(orchestrator);
    if (byResponder === undefined) {
      byResponder = new Map();
      this.#records.set(orchestrator, byResponder);
    }
    const known = byResponder;
    return responders.map((responder) => {
      let record = known.get(responder);
      if (record === undefined) {
        const labels = { [LABEL_ORCHESTRATOR]: orchestrator, [LABEL_RESPONDER]: responder };
        record = {
          dispatches: 0,
          flushed: 0,
          labels,
          duration: this.#dispatchDuration.series(labels),
        };
        known.set(responder, record);
      }
      return record;
    });
  }

  conversationStarted(orchestrator: string): void {
    if (!this.#initialized.has(orchestrator)) this.#initialize(orchestrator);
    this.#started.inc({ [LABEL_ORCHESTRATOR]: orchestrator });
    this.#inProgress.set(orchestrator, (this.#inProgress.get(orchestrator) ?? 0) + 1);
  }

  conversationEnded(
    orchestrator: string,
    reason: string,
    elapsedSeconds: number,
    dispatches: number,
    traceId: string | undefined,
  ): void {
    this.#inProgress.set(orchestrator, (this.#inProgress.get(orchestrator) ?? 1) - 1);
    const labels = { [LABEL_ORCHESTRATOR]: orchestrator, [LABEL_REASON]: this.reasonLabel(reason) };
    this.#ended.inc(labels);
    if (this.exemplars) {
      // With exemplars on, prom-client 15.1.3 takes only the object form of observe(), and
      // `labels(...).observe()` ignores exemplars: pass everything at once. An empty exemplar
      // label set (no sampled trace) records no exemplar.
      const exemplarLabels: Record<string, string> =
        traceId === undefined ? {} : { [EXEMPLAR_TRACE_ID]: traceId };
      this.#conversationDuration.observe({ labels, value: elapsedSeconds, exemplarLabels });
      this.#conversationDispatches.observe({ labels, value: dispatches, exemplarLabels });
    } else {
      this.#conversationDuration.observe(labels, elapsedSeconds);
      this.#conversationDispatches.observe(labels, dispatches);
    }
  }

  /**
   * Series the alert rules divide by exist from an orchestrator's first conversation, at 0:
   * rates and ratios see a zero rather than no data (Prometheus's advice for known label values).
   * Responder errors are left out: 20 responders would add 20 zero series to every scrape.
   */
  #initialize(orchestrator: string): void {
    this.#initialized.add(orchestrator);
    const o = { [LABEL_ORCHESTRATOR]: orchestrator };
    this.#listenerErrors.inc(o, 0);
    for (const reason of INITIALIZED_REASONS) this.#ended.inc({ ...o, [LABEL_REASON]: reason }, 0);
  }

  responderFailed(orchestrator: string, responder: string): void {
    this.#responderErrors.inc({ [LABEL_ORCHESTRATOR]: orchestrator, [LABEL_RESPONDER]: responder });
  }

  listenerFailed(orchestrator: string): void {
    this.#listenerErrors.inc({ [LABEL_ORCHESTRATOR]: orchestrator });
  }

  /** Bounded label values: past `maxReasons` distinct user reasons, a new one becomes `other`. */
  reasonLabel(reason: string): string {
    if (BUILT_IN_REASONS.has(reason) || this.#reasons.has(reason)) return reason;
    if (this.#reasons.size >= this.#maxReasons) return REASON_OTHER;
    this.#reasons.add(reason);
    return reason;
  }
}

const byRegistry = new WeakMap<AnyRegistry, OrchestratorMetrics>();

/** The metric set of `registry`, created on first use. */
export function metricsFor(
  registry: AnyRegistry,
  buckets: MetricBuckets,
  exemplars: boolean,
  maxReasons: number,
): OrchestratorMetrics {
  const existing = byRegistry.get(registry);
  if (existing !== undefined) {
    if (!sameBuckets(existing.buckets, buckets)) {
      throw new TypeError(
        'The orchestrator metrics are already registered on this registry with other buckets; give every telemetry on one registry the same buckets',
      );
    }
    return existing;
  }
  let metrics: OrchestratorMetrics;
  try {
    metrics = new OrchestratorMetrics(registry, buckets, exemplars, maxReasons);
  } catch (error) {
    throw new TypeError(
      `Could not register the orchestrator metrics: ${(error as Error).message} (another library registered that name on this registry)`,
      { cause: error },
    );
  }
  byRegistry.set(registry, metrics);
  return metrics;
}

function sameBuckets(a: MetricBuckets, b: MetricBuckets): boolean {
  const eq = (x: readonly number[], y: readonly number[]) =>
    x.length === y.length && x.every((v, i) => v === y[i]);
  return (
    eq(a.dispatchDuration, b.dispatchDuration) &&
    eq(a.conversationDuration, b.conversationDuration) &&
    eq(a.conversationDispatches, b.conversationDispatches)
  );
}
