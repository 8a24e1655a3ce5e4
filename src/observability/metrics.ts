/**
 * The Prometheus metrics of the orchestrator, one set per registry. Two telemetry instances given
 * the same registry share the set (prom-client throws when a name is registered twice).
 * Everything is counted in plain numbers and handed to prom-client at scrape time, through
 * collectors of prom-client's metric shape: exact, nearly free per dispatch, and no prom-client
 * import (see registry.ts).
 */
import type { DiagLogger } from '@opentelemetry/api';
import { endReasons } from '../core/spi/end-reasons.ts';
import { CollectedCounter, type Kept, type Series } from './collected-counter.ts';
import { CollectedHistogram, type HistogramSeries } from './dispatch-histogram.ts';
import { assertFree, type PrometheusRegistry, registerCollector } from './registry.ts';
import {
  EXEMPLAR_TRACE_ID,
  LABEL_CAUSE,
  LABEL_MODEL,
  LABEL_ORCHESTRATOR,
  LABEL_REASON,
  LABEL_RESPONDER,
  LABEL_STORE,
  LABEL_TOKEN_TYPE,
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
  MODEL_NONE,
  OVERFLOW_LABEL_VALUE,
  REASON_OTHER,
  TOKEN_TYPE_INPUT,
  TOKEN_TYPE_OUTPUT,
  TURN_POLICY_LABEL_VALUE,
} from './semconv.ts';

/** Sub-microsecond algorithmic agents to minute-long LLM calls, in seconds. */
export const DEFAULT_DISPATCH_DURATION_BUCKETS = [
  0.000001, 0.000005, 0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1,
  2.5, 5, 10, 30, 60,
] as const;
/** Milliseconds to ten minutes, in seconds. */
export const DEFAULT_CONVERSATION_DURATION_BUCKETS = [
  0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
] as const;
/** Tokens (input + output) per conversation: a short exchange to a runaway one. */
export const DEFAULT_CONVERSATION_TOKEN_BUCKETS = [
  100, 500, 1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000, 1000000, 2500000,
  5000000, 10000000,
] as const;
/** Dispatches per conversation. */
export const DEFAULT_CONVERSATION_DISPATCH_BUCKETS = [
  1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 100000, 1000000,
] as const;

/**
 * One checkpoint commit, in seconds: an in-memory store's microseconds to a remote database's
 * hundreds of milliseconds, up to the default `storeTimeoutMs` (5 s).
 */
export const DEFAULT_CHECKPOINT_DURATION_BUCKETS = [
  0.00001, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
  0.5, 1, 2.5, 5,
] as const;

/** Reasons the library itself produces: always their own label value. */
export const BUILT_IN_REASONS: ReadonlySet<string> = new Set(endReasons(() => true));

/** Reasons whose `orchestrator_conversations_ended_total` series start at 0. */
const INITIALIZED_REASONS = endReasons((r) => r.initialized);

export interface MetricBuckets {
  readonly dispatchDuration: readonly number[];
  readonly conversationDuration: readonly number[];
  readonly conversationDispatches: readonly number[];
  readonly conversationTokens: readonly number[];
}

function series(labels: Readonly<Record<string, string>>): Series {
  return { labels, count: 0 };
}

/**
 * One (orchestrator, responder). Its dispatches are counted beside the duration histogram, in
 * the same array (`duration.tallyAt`): the hot path touches one object per dispatch.
 */
export interface DispatchRecord extends Kept {
  readonly duration: HistogramSeries;
  /** Failed invocations; created at the first (a zero series per responder is not worth a scrape). */
  errors: Series | undefined;
  /** Conversations the dispatch deadline ended while this responder ran; created at the first. */
  deadlines: Series | undefined;
  /** Invocations run again after a crash (attempt > 1); created at the first. */
  reinvocations: Series | undefined;
}

function dispatchRecord(
  labels: Readonly<Record<string, string>>,
  duration: HistogramSeries,
): DispatchRecord {
  return {
    labels,
    duration,
    errors: undefined,
    deadlines: undefined,
    reinvocations: undefined,
    read: () => duration.tally,
    zero: () => {
      duration.counts[duration.tallyAt] = 0;
    },
  };
}

/** Counts one dispatch of `record` (for callers without a duration). */
export function countDispatch(record: DispatchRecord): void {
  const counts = record.duration.counts;
  const at = record.duration.tallyAt;
  counts[at] = (counts[at] as number) + 1;
}

/** Conversations of one (orchestrator, reason label) that ended: `count` is the conversations. */
interface EndRecord extends Series {
  /** Created at the first conversation that ends with this reason. */
  duration: HistogramSeries | undefined;
  dispatches: HistogramSeries | undefined;
  /** Created at the first conversation with this reason that reported tokens. */
  tokens: HistogramSeries | undefined;
}

/** Tokens of one (orchestrator, responder, model): the two `type` series. */
interface TokenRecord {
  readonly input: Series;
  readonly output: Series;
}

/** Everything counted for one orchestrator; looked up once per conversation. */
export interface OrchestratorRecord {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly started: Series;
  /** The gauge: `count` is the conversations running now. */
  readonly inProgress: Series;
  readonly listenerErrors: Series;
  /** By reason label: at most the built-in reasons, `maxReasons` user reasons and `other`. */
  readonly ends: Map<string, EndRecord>;
  /** By responder label: at most `maxResponders` of them and the overflow value. */
  readonly responders: Map<string, DispatchRecord>;
  /** The slots of a responder-name array (an orchestrator's), by array identity. */
  readonly byNames: WeakMap<readonly string[], ResponderSlots>;
  /** By `responder\u0000model` label values: created at the first report. */
  readonly tokens: Map<string, TokenRecord>;
  /** Set by `release`: the record no longer reaches the registry. */
  released: boolean;
  /** Durable conversations: resumes by cause (created at the first). */
  readonly resumed: Map<string, Series>;
  /** Durable conversations: commits by store label (created at the first). */
  readonly checkpoints: Map<string, CheckpointRecord>;
  /** Durable conversations: refused commits and renewals (created at the first). */
  leaseConflicts: Series | undefined;
}

/** The commits of one (orchestrator, store). */
export interface CheckpointRecord {
  readonly duration: HistogramSeries;
  readonly failures: Series;
}

/** The metrics of durable conversations: registered at the first conversation with a store. */
const DURABLE_METRIC_NAMES = [
  METRIC_RESPONDER_REINVOCATIONS,
  METRIC_CONVERSATIONS_RESUMED,
  METRIC_CHECKPOINT_DURATION,
  METRIC_CHECKPOINT_FAILURES,
  METRIC_LEASE_CONFLICTS,
] as const;

/**
 * The records of an orchestrator's responders, by index, filled when a responder first
 * dispatches (or fails): a responder that never dispatches has no series. Shared by every
 * conversation of the orchestrator, so the first dispatch fills the slot for all of them.
 */
export interface ResponderSlots {
  readonly names: readonly string[];
  readonly records: (DispatchRecord | undefined)[];
  /** `records[i].duration`: what the hot path indexes. */
  readonly durations: (HistogramSeries | undefined)[];
}

/** The settings a metric set was made with; a second telemetry on the registry is compared. */
interface MetricSettings {
  readonly buckets: MetricBuckets;
  readonly exemplars: boolean;
  readonly maxReasons: number;
  readonly maxOrchestrators: number;
  readonly maxResponders: number;
  readonly maxModels: number;
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

/**
 * Every metric is a plain number here, handed to prom-client at scrape time: exact, and ~1 ns
 * instead of prom-client's ~0.3 µs per `inc`/`observe`.
 */
export class OrchestratorMetrics {
  readonly settings: MetricSettings;
  readonly exemplars: boolean;
  readonly #dispatchDuration: CollectedHistogram;
  readonly #conversationDuration: CollectedHistogram;
  readonly #conversationDispatches: CollectedHistogram;
  readonly #conversationTokens: CollectedHistogram;
  /** Model label values in use on the registry: at most `maxModels`. */
  readonly #models = new Set<string>();
  readonly #orchestrators = new Map<string, OrchestratorRecord>();
  readonly #reasons = new Set<string>();
  readonly #maxReasons: number;
  readonly #logger: DiagLogger;
  /** Each cap is said once per registry, when it is first reached. */
  readonly #warned = new Set<'orchestrators' | 'responders' | 'reasons' | 'models' | 'durable'>();
  /**
   * The checkpoint histogram, once the durable metrics are registered (at the first durable
   * conversation); `null` when their names were taken on the registry (said once).
   */
  #checkpointDuration: CollectedHistogram | null | undefined;

  /** Whether this set is still what `registry` holds (`registry.clear()` empties it). */
  isRegisteredOn(registry: PrometheusRegistry): boolean {
    return registry.getSingleMetric(METRIC_DISPATCH_DURATION) === this.#dispatchDuration;
  }

  /** The registry the set is on (a sampler on it filters the exemplars: `exemplarFilterOf`). */
  readonly registry: PrometheusRegistry;

  constructor(registry: PrometheusRegistry, settings: MetricSettings, logger: DiagLogger) {
    this.registry = registry;
    this.settings = settings;
    this.#logger = logger;
    this.exemplars = settings.exemplars;
    this.#maxReasons = settings.maxReasons;
    const { buckets } = settings;
    const orchestrators = this.#orchestrators;
    const each = <T>(pick: (o: OrchestratorRecord) => Iterable<T>) =>
      function* (): Generator<T> {
        for (const o of orchestrators.values()) yield* pick(o);
      };
    const histogram = (name: string, help: string, labels: string[], bounds: readonly number[]) =>
      new CollectedHistogram(name, help, labels, [...bounds], EXEMPLAR_TRACE_ID);
    this.#conversationDuration = histogram(
      METRIC_CONVERSATION_DURATION,
      'Elapsed time of a conversation at its end, by reason.',
      [LABEL_ORCHESTRATOR, LABEL_REASON],
      buckets.conversationDuration,
    );
    this.#conversationDispatches = histogram(
      METRIC_CONVERSATION_DISPATCHES,
      'Dispatches of a conversation at its end, by reason.',
      [LABEL_ORCHESTRATOR, LABEL_REASON],
      buckets.conversationDispatches,
    );
    this.#conversationTokens = histogram(
      METRIC_CONVERSATION_TOKENS,
      'Tokens (input + output) of a conversation that reported any, at its end, by reason.',
      [LABEL_ORCHESTRATOR, LABEL_REASON],
      buckets.conversationTokens,
    );
    this.#dispatchDuration = histogram(
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
      this.#conversationDuration,
      this.#conversationDispatches,
      new CollectedCounter(
        METRIC_DISPATCHES,
        'Successful dispatches (one responder answer each).',
        'counter',
        each((o) => o.responders.values()),
      ),
      this.#dispatchDuration,
      new CollectedCounter(
        METRIC_RESPONDER_ERRORS,
        'Responder invocations that threw or rejected.',
        'counter',
        each(function* (o) {
          for (const r of o.responders.values()) if (r.errors !== undefined) yield r.errors;
        }),
      ),
      new CollectedCounter(
        METRIC_RESPONDER_DEADLINES,
        'Conversations ended by the dispatch deadline (dispatchTimeoutMs) while this responder had not answered.',
        'counter',
        each(function* (o) {
          for (const r of o.responders.values()) if (r.deadlines !== undefined) yield r.deadlines;
        }),
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
      this.#conversationTokens,
    ];
    // All or nothing: a name taken by another library must not leave half the set registered.
    assertFree(registry, METRIC_NAMES);
    for (const collector of collectors) {
      if (collector instanceof CollectedHistogram) collector.register(registry);
      else registerCollector(registry, collector);
    }
  }

  /**
   * The record of an orchestrator, created at its first conversation. The series the alert rules
   * divide by start at 0 then: rates and ratios see a zero rather than no data (Prometheus's advice
   * for known label values). Responder series wait for the responder's first dispatch. Past
   * `maxOrchestrators` distinct names, a new one is counted under the overflow value.
   */
  orchestrator(name: string): OrchestratorRecord {
    const record = this.#orchestrators.get(name);
    if (record !== undefined) return record;
    const overflow = this.#orchestrators.has(OVERFLOW_LABEL_VALUE) ? 1 : 0;
    if (this.#orchestrators.size - overflow < this.settings.maxOrchestrators) {
      return this.#newOrchestrator(name);
    }
    this.#warnOnce(
      'orchestrators',
      `conversation-orchestrator: more than maxOrchestrators (${this.settings.maxOrchestrators}) distinct orchestrator names on this registry; conversations of the others are counted under orchestrator="${OVERFLOW_LABEL_VALUE}" (release a tenant's series with telemetry.releaseOrchestrator(name))`,
    );
    return (
      this.#orchestrators.get(OVERFLOW_LABEL_VALUE) ?? this.#newOrchestrator(OVERFLOW_LABEL_VALUE)
    );
  }

  #newOrchestrator(name: string): OrchestratorRecord {
    const labels = { [LABEL_ORCHESTRATOR]: name };
    const record: OrchestratorRecord = {
      name,
      labels,
      started: series(labels),
      inProgress: series(labels),
      listenerErrors: series(labels),
      ends: new Map(),
      responders: new Map(),
      byNames: new WeakMap(),
      tokens: new Map(),
      released: false,
      resumed: new Map(),
      checkpoints: new Map(),
      leaseConflicts: undefined,
    };
    this.#orchestrators.set(name, record);
    for (const reason of INITIALIZED_REASONS) this.#end(record, reason);
    return record;
  }

  /**
   * Lets go of every series of orchestrator `name` (a tenant that left): they leave the next
   * scrape, and the name's place under `maxOrchestrators` is free again. Conversations of it
   * still running keep counting into the released record, which no scrape reads.
   * @returns whether there was anything to release
   */
  release(name: string): boolean {
    const record = this.#orchestrators.get(name);
    if (record === undefined) return false;
    this.#orchestrators.delete(name);
    record.released = true;
    for (const responder of record.responders.values()) {
      this.#dispatchDuration.remove(responder.duration);
    }
    for (const end of record.ends.values()) {
      if (end.duration !== undefined) this.#conversationDuration.remove(end.duration);
      if (end.dispatches !== undefined) this.#conversationDispatches.remove(end.dispatches);
      if (end.tokens !== undefined) this.#conversationTokens.remove(end.tokens);
    }
    for (const checkpoint of record.checkpoints.values()) {
      this.#checkpointDuration?.remove(checkpoint.duration);
    }
    return true;
  }

  /**
   * Registers the metrics of durable conversations on the registry, at the first conversation
   * with a store (a process without one exposes none of them).
   * @returns whether they are registered (false: a name was taken by another library, said once)
   */
  durable(): boolean {
    if (this.#checkpointDuration !== undefined) return this.#checkpointDuration !== null;
    const orchestrators = this.#orchestrators;
    const each = <T>(pick: (o: OrchestratorRecord) => Iterable<T>) =>
      function* (): Generator<T> {
        for (const o of orchestrators.values()) yield* pick(o);
      };
    const duration = new CollectedHistogram(
      METRIC_CHECKPOINT_DURATION,
      'Duration of one checkpoint commit (the store call), by store.',
      [LABEL_ORCHESTRATOR, LABEL_STORE],
      [...DEFAULT_CHECKPOINT_DURATION_BUCKETS],
      EXEMPLAR_TRACE_ID,
    );
    try {
      assertFree(this.registry, DURABLE_METRIC_NAMES);
      registerCollector(
        this.registry,
        new CollectedCounter(
          METRIC_RESPONDER_REINVOCATIONS,
          'Responder invocations run again after a crash (attempt > 1): the call in flight when a worker died.',
          'counter',
          each(function* (o) {
            for (const r of o.responders.values()) {
              if (r.reinvocations !== undefined) yield r.reinvocations;
            }
          }),
        ),
      );
      registerCollector(
        this.registry,
        new CollectedCounter(
          METRIC_CONVERSATIONS_RESUMED,
          'Conversations resumed, by cause (crash, suspend, handoff).',
          'counter',
          each((o) => o.resumed.values()),
        ),
      );
      duration.register(this.registry);
      registerCollector(
        this.registry,
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
        this.registry,
        new CollectedCounter(
          METRIC_LEASE_CONFLICTS,
          'Commits or lease renewals refused because another process holds the conversation.',
          'counter',
          each(function* (o) {
            if (o.leaseConflicts !== undefined) yield o.leaseConflicts;
          }),
        ),
      );
      this.#checkpointDuration = duration;
      return true;
    } catch (error) {
      this.#checkpointDuration = null;
      this.#warnOnce(
        'durable',
        `conversation-orchestrator: the metrics of durable conversations could not be registered (${error instanceof Error ? error.message : String(error)}); they are not recorded on this registry`,
      );
      return false;
    }
  }

  /** A durable conversation resumed (`cause`: crash, suspend or handoff; a cancel is not one). */
  resumed(orchestrator: OrchestratorRecord, cause: string): void {
    let record = orchestrator.resumed.get(cause);
    if (record === undefined) {
      record = series({ [LABEL_ORCHESTRATOR]: orchestrator.name, [LABEL_CAUSE]: cause });
      orchestrator.resumed.set(cause, record);
    }
    record.count++;
  }

  /** One commit attempt to store `store`: its duration, and whether it failed. */
  checkpointed(
    orchestrator: OrchestratorRecord,
    store: string,
    seconds: number,
    failed: boolean,
  ): void {
    const histogram = this.#checkpointDuration;
    if (histogram === undefined || histogram === null) return;
    let record = orchestrator.checkpoints.get(store);
    if (record === undefined) {
      const labels = { [LABEL_ORCHESTRATOR]: orchestrator.name, [LABEL_STORE]: store };
      record = { duration: histogram.series(labels), failures: series(labels) };
      orchestrator.checkpoints.set(store, record);
    }
    record.duration.observe(seconds);
    if (failed) record.failures.count++;
  }

  /** A refused commit or renewal. */
  leaseConflict(orchestrator: OrchestratorRecord): void {
    orchestrator.leaseConflicts ??= series(orchestrator.labels);
    orchestrator.leaseConflicts.count++;
  }

  /** An invocation run again after a crash. */
  reinvoked(record: DispatchRecord): void {
    record.reinvocations ??= series(record.labels);
    record.reinvocations.count++;
  }

  /** Dispatches of a durable conversation, counted when the commit that stored them landed. */
  dispatchesCommitted(record: DispatchRecord, count: number): void {
    const counts = record.duration.counts;
    const at = record.duration.tallyAt;
    counts[at] = (counts[at] as number) + count;
  }

  /** The (lazily filled) records of an orchestrator's responders, in the order given. */
  slots(orchestrator: OrchestratorRecord, responders: readonly string[]): ResponderSlots {
    let slots = orchestrator.byNames.get(responders);
    if (slots === undefined) {
      // Packed arrays of `undefined` (not holes): V8 keeps the hot path's loads fast.
      slots = {
        names: responders,
        records: Array.from({ length: responders.length }, () => undefined),
        durations: Array.from({ length: responders.length }, () => undefined),
      };
      orchestrator.byNames.set(responders, slots);
    }
    return slots;
  }

  /** The record of responder `index`, created at its first use (a dispatch or a failure). */
  slot(orchestrator: OrchestratorRecord, slots: ResponderSlots, index: number): DispatchRecord {
    const existing = slots.records[index];
    if (existing !== undefined) return existing;
    const record = this.responder(orchestrator, slots.names[index] as string);
    slots.records[index] = record;
    slots.durations[index] = record.duration;
    return record;
  }

  /** The record of `responder`'s label: past `maxResponders`, the overflow value's. */
  responder(orchestrator: OrchestratorRecord, responder: string): DispatchRecord {
    let label = responder;
    let record = orchestrator.responders.get(label);
    if (record !== undefined) return record;
    const overflow = orchestrator.responders.has(OVERFLOW_LABEL_VALUE) ? 1 : 0;
    if (orchestrator.responders.size - overflow >= this.settings.maxResponders) {
      this.#warnOnce(
        'responders',
        `conversation-orchestrator: more than maxResponders (${this.settings.maxResponders}) responders dispatched for orchestrator \`${orchestrator.name}\`; the others are counted under responder="${OVERFLOW_LABEL_VALUE}" (said once per registry)`,
      );
      label = OVERFLOW_LABEL_VALUE;
      record = orchestrator.responders.get(label);
      if (record !== undefined) return record;
    }
    const labels = { [LABEL_ORCHESTRATOR]: orchestrator.name, [LABEL_RESPONDER]: label };
    record = dispatchRecord(labels, this.#dispatchDuration.series(labels));
    orchestrator.responders.set(label, record);
    return record;
  }

  /**
   * Counts tokens reported by responder `index` of `slots` (-1: the turn policy), exactly, as
   * they are reported: those of invocations that then fail or are skipped were spent too.
   */
  tokensReported(
    orchestrator: OrchestratorRecord,
    slots: ResponderSlots,
    index: number,
    model: string | undefined,
    input: number,
    output: number,
  ): void {
    const responder =
      index < 0
        ? TURN_POLICY_LABEL_VALUE
        : (this.slot(orchestrator, slots, index).labels[LABEL_RESPONDER] as string);
    const modelLabel = this.#modelLabel(model);
    const key = `${responder}\u0000${modelLabel}`;
    let record = orchestrator.tokens.get(key);
    if (record === undefined) {
      const labels = {
        [LABEL_ORCHESTRATOR]: orchestrator.name,
        [LABEL_RESPONDER]: responder,
        [LABEL_MODEL]: modelLabel,
      };
      record = {
        input: series({ ...labels, [LABEL_TOKEN_TYPE]: TOKEN_TYPE_INPUT }),
        output: series({ ...labels, [LABEL_TOKEN_TYPE]: TOKEN_TYPE_OUTPUT }),
      };
      orchestrator.tokens.set(key, record);
    }
    record.input.count += input;
    record.output.count += output;
  }

  /** Bounded model label values: past `maxModels` distinct models, the overflow value. */
  #modelLabel(model: string | undefined): string {
    if (model === undefined || model === '') return MODEL_NONE;
    if (this.#models.has(model)) return model;
    if (this.#models.size >= this.settings.maxModels) {
      this.#warnOnce(
        'models',
        `conversation-orchestrator: more than maxModels (${this.settings.maxModels}) distinct models on this registry; tokens of the others are counted under model="${OVERFLOW_LABEL_VALUE}" (said once)`,
      );
      return OVERFLOW_LABEL_VALUE;
    }
    this.#models.add(model);
    return model;
  }

  /** Tokens of a conversation that reported any, at its end (after `conversationEnded`). */
  conversationTokens(
    orchestrator: OrchestratorRecord,
    reason: string,
    tokens: number,
    traceId: string | undefined,
    endTimeSeconds: number,
  ): void {
    const end = this.#end(orchestrator, reason);
    if (end.tokens === undefined) end.tokens = this.#conversationTokens.series(end.labels);
    const b = end.tokens.observe(tokens);
    if (this.exemplars && traceId !== undefined && b >= 0) {
      end.tokens.exemplar(b, traceId, tokens, endTimeSeconds);
    }
  }

  #warnOnce(
    cap: 'orchestrators' | 'responders' | 'reasons' | 'models' | 'durable',
    message: string,
  ): void {
    if (this.#warned.has(cap)) return;
    this.#warned.add(cap);
    try {
      this.#logger.warn(message);
    } catch {
      // A logger that throws must not break the count.
    }
  }

  /** A conversation began and is in progress until `conversationEnded`. */
  conversationStarted(orchestrator: OrchestratorRecord): void {
    orchestrator.started.count++;
    orchestrator.inProgress.count++;
  }

  /**
   * A later segment of a durable conversation began in this process: in progress here until
   * `segmentEnded` or `conversationEnded`; the conversation was counted as started once, by its
   * first segment.
   */
  segmentStarted(orchestrator: OrchestratorRecord): void {
    orchestrator.inProgress.count++;
  }

  /** A segment ended without ending its conversation (it suspended or was handed off). */
  segmentEnded(orchestrator: OrchestratorRecord): void {
    orchestrator.inProgress.count--;
  }

  /** The end of a conversation that `conversationStarted` counted. */
  conversationEnded(
    orchestrator: OrchestratorRecord,
    reason: string,
    elapsedSeconds: number,
    dispatches: number,
    traceId: string | undefined,
    endTimeSeconds: number,
  ): void {
    orchestrator.inProgress.count--;
    this.countEnd(orchestrator, reason, elapsedSeconds, dispatches, traceId, endTimeSeconds);
  }

  /**
   * Counts an end (reason, duration, dispatches) without the in-progress gauge: for the plain
   * listener, which never sees a start or a failure. `endTimeSeconds` stamps the exemplars.
   */
  countEnd(
    orchestrator: OrchestratorRecord,
    reason: string,
    elapsedSeconds: number,
    dispatches: number,
    traceId: string | undefined,
    endTimeSeconds: number,
  ): void {
    const end = this.#end(orchestrator, reason);
    end.count++;
    if (end.duration === undefined) end.duration = this.#conversationDuration.series(end.labels);
    if (end.dispatches === undefined)
      end.dispatches = this.#conversationDispatches.series(end.labels);
    const d = end.duration.observe(elapsedSeconds);
    const n = end.dispatches.observe(dispatches);
    if (this.exemplars && traceId !== undefined) {
      // Per conversation, not per dispatch: keep the latest.
      if (d >= 0) end.duration.exemplar(d, traceId, elapsedSeconds, endTimeSeconds);
      if (n >= 0) end.dispatches.exemplar(n, traceId, dispatches, endTimeSeconds);
    }
  }

  /**
   * The exemplars of an end that `countEnd` counted without them, once a sampler kept its trace.
   */
  keptEndExemplars(
    orchestrator: OrchestratorRecord,
    reason: string,
    elapsedSeconds: number,
    dispatches: number,
    tokens: number | undefined,
    traceId: string,
    endTimeSeconds: number,
  ): void {
    if (!this.exemplars) return;
    const end = this.#end(orchestrator, reason);
    end.duration?.keptExemplar(elapsedSeconds, traceId, endTimeSeconds);
    end.dispatches?.keptExemplar(dispatches, traceId, endTimeSeconds);
    if (tokens !== undefined) end.tokens?.keptExemplar(tokens, traceId, endTimeSeconds);
  }

  /** The end record of `reason`'s label; past the cap, reasons share `other` and leave no key. */
  #end(orchestrator: OrchestratorRecord, reason: string): EndRecord {
    const label = this.reasonLabel(reason);
    let end = orchestrator.ends.get(label);
    if (end === undefined) {
      end = {
        ...series({ [LABEL_ORCHESTRATOR]: orchestrator.name, [LABEL_REASON]: label }),
        duration: undefined,
        dispatches: undefined,
        tokens: undefined,
      };
      orchestrator.ends.set(label, end);
    }
    return end;
  }

  responderFailed(record: DispatchRecord): void {
    if (record.errors === undefined) record.errors = series(record.labels);
    record.errors.count++;
  }

  deadlinePassed(record: DispatchRecord): void {
    if (record.deadlines === undefined) record.deadlines = series(record.labels);
    record.deadlines.count++;
  }

  listenerFailed(orchestrator: OrchestratorRecord): void {
    orchestrator.listenerErrors.count++;
  }

  /** Bounded label values: past `maxReasons` distinct user reasons, a new one becomes `other`. */
  reasonLabel(reason: string): string {
    if (BUILT_IN_REASONS.has(reason) || this.#reasons.has(reason)) return reason;
    if (this.#reasons.size >= this.#maxReasons) {
      this.#warnOnce(
        'reasons',
        `conversation-orchestrator: more than maxReasons (${this.#maxReasons}) distinct user-named reasons on this registry; the others are counted as reason="${REASON_OTHER}" (said once)`,
      );
      return REASON_OTHER;
    }
    this.#reasons.add(reason);
    return reason;
  }
}

const byRegistry = new WeakMap<PrometheusRegistry, OrchestratorMetrics>();

/**
 * The metric set of `registry`, created on first use. A second telemetry on the same registry
 * shares it: other buckets are an error (one histogram cannot have two bucket lists), other
 * `maxReasons` or `exemplars` a warning (the first telemetry's settings stay in force).
 */
export function metricsFor(
  registry: PrometheusRegistry,
  settings: MetricSettings,
  logger: DiagLogger,
): OrchestratorMetrics {
  const existing = byRegistry.get(registry);
  if (existing?.isRegisteredOn(registry)) {
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
    return existing;
  }
  const metrics = new OrchestratorMetrics(registry, settings, logger);
  byRegistry.set(registry, metrics);
  return metrics;
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
