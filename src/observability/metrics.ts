/**
 * The metrics of the orchestrator, one set per registry (or, without one, per meter provider).
 * Two telemetry instances given the same registry share the set (prom-client throws when a name
 * is registered twice). Everything is counted in plain numbers and handed to prom-client at
 * scrape time, through collectors of prom-client's metric shape: exact, nearly free per
 * dispatch, and no prom-client import (see registry.ts); the OpenTelemetry path reads the same
 * numbers at each collection and records its histograms beside them (otel-metrics.ts). The
 * definitions (names, units, help, labels, buckets) are in metric-definitions.ts (the default
 * bucket bounds in metric-buckets.ts), the prom-client families in metric-families.ts, the
 * records counted into in metric-records.ts; this file records.
 */
import type { Context, DiagLogger, MeterProvider } from '@opentelemetry/api';
import { endReasons } from '../core/spi/end-reasons.ts';
import type { Usage } from '../core/spi/types.ts';
import { admitted } from './bounded-values.ts';
import type { CollectedHistogram } from './dispatch-histogram.ts';
import {
  DEFAULT_CHECKPOINT_DURATION_BUCKETS,
  DEFAULT_CHECKPOINT_SIZE_BUCKETS,
} from './metric-buckets.ts';
import { DEFAULT_INFERENCE_CALL_BUCKETS } from './metric-definitions.ts';
import {
  type DurableHistograms,
  type MetricBuckets,
  registerDurableFamilies,
  registerOrchestratorFamilies,
} from './metric-families.ts';
import {
  type CheckpointRecord,
  checkpointRecord,
  type DispatchRecord,
  dispatchRecord,
  type EndRecord,
  endRecord,
  type OrchestratorRecord,
  orchestratorRecord,
  type ResponderSlots,
  responderSlots,
  series,
  tokenRecord,
} from './metric-records.ts';
import { OtelMetrics } from './otel-metrics.ts';
import type { PrometheusRegistry } from './registry.ts';
import {
  LABEL_CAUSE,
  LABEL_CHECKPOINT_KIND,
  LABEL_MODEL,
  LABEL_ORCHESTRATOR,
  LABEL_RESPONDER,
  LABEL_STORE,
  METRIC_DISPATCH_DURATION,
  MODEL_NONE,
  OVERFLOW_LABEL_VALUE,
  REASON_OTHER,
  TURN_POLICY_LABEL_VALUE,
} from './semconv.ts';

/** Reasons the library itself produces: always their own label value. */
export const BUILT_IN_REASONS: ReadonlySet<string> = new Set(endReasons(() => true));

/** Reasons whose `orchestrator_conversations_ended_total` series start at 0. */
const INITIALIZED_REASONS = endReasons((r) => r.initialized);

type Warning =
  | 'orchestrators'
  | 'responders'
  | 'reasons'
  | 'models'
  | 'durable'
  | 'exemplars'
  | 'meterProvider';

/** The settings a metric set was made with; a second telemetry on the registry is compared. */
export interface MetricSettings {
  readonly buckets: MetricBuckets;
  readonly exemplars: boolean;
  readonly maxReasons: number;
  readonly maxOrchestrators: number;
  readonly maxResponders: number;
  readonly maxModels: number;
}

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
  readonly #warned = new Set<Warning>();
  /**
   * The durable histograms, once the durable metrics are registered (at the first durable
   * conversation); `null` when their names were taken on the registry (said once).
   */
  #durable: DurableHistograms | null | undefined;

  /** Whether this set is still what `registry` holds (`registry.clear()` empties it). */
  isRegisteredOn(registry: PrometheusRegistry): boolean {
    return registry.getSingleMetric(METRIC_DISPATCH_DURATION) === this.#dispatchDuration;
  }

  /**
   * The registry the set is on (a sampler on it filters the exemplars: `exemplarFilterOf`);
   * undefined on the OpenTelemetry path alone.
   */
  readonly registry: PrometheusRegistry | undefined;

  /** The OpenTelemetry instruments, once a meter provider is attached (`attachMeterProvider`). */
  otel: OtelMetrics | undefined;

  constructor(
    registry: PrometheusRegistry | undefined,
    settings: MetricSettings,
    logger: DiagLogger,
  ) {
    this.registry = registry;
    this.settings = settings;
    this.#logger = logger;
    this.exemplars = settings.exemplars;
    this.#maxReasons = settings.maxReasons;
    // All or nothing: a name taken by another library must not leave half the set registered.
    const histograms = registerOrchestratorFamilies(
      registry,
      settings.buckets,
      this.#orchestrators,
    );
    this.#dispatchDuration = histograms.dispatchDuration;
    this.#conversationDuration = histograms.conversationDuration;
    this.#conversationDispatches = histograms.conversationDispatches;
    this.#conversationTokens = histograms.conversationTokens;
  }

  /**
   * Records the set through the OpenTelemetry metrics API of `provider` too (once: a set reads
   * its records into one provider; another is refused with a warning). `genAi`: the GenAI
   * conventions' metrics beside the orchestrator's.
   */
  attachMeterProvider(provider: MeterProvider, genAi: boolean): void {
    if (this.otel !== undefined) {
      if (this.otel.meterProvider !== provider) {
        this.#warnOnce(
          'meterProvider',
          "conversation-orchestrator: the metrics on this registry are already recorded through another MeterProvider; this telemetry's meterProvider is not used (give every telemetry on one registry the same meterProvider)",
        );
      }
      return;
    }
    this.otel = new OtelMetrics(
      provider,
      {
        ...this.settings.buckets,
        checkpoint: DEFAULT_CHECKPOINT_DURATION_BUCKETS,
        checkpointSize: DEFAULT_CHECKPOINT_SIZE_BUCKETS,
        inferenceCalls: DEFAULT_INFERENCE_CALL_BUCKETS,
      },
      this.#orchestrators,
      genAi,
    );
    if (this.#durable !== undefined && this.#durable !== null) this.otel.durable();
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
    const record = orchestratorRecord(name);
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
    const durable = this.#durable;
    if (durable !== undefined && durable !== null) {
      for (const checkpoint of record.checkpoints.values()) {
        durable.checkpointDuration.remove(checkpoint.duration);
        for (const size of checkpoint.sizes.values()) durable.checkpointSize.remove(size);
        if (checkpoint.snapshotDuration !== undefined) {
          durable.snapshotDuration.remove(checkpoint.snapshotDuration);
        }
      }
    }
    return true;
  }

  /**
   * Registers the metrics of durable conversations on the registry, at the first conversation
   * with a store (a process without one exposes none of them).
   * @returns whether they are registered (false: a name was taken by another library, said once)
   */
  durable(): boolean {
    if (this.#durable !== undefined) return this.#durable !== null;
    try {
      this.#durable = registerDurableFamilies(
        this.registry,
        DEFAULT_CHECKPOINT_DURATION_BUCKETS,
        DEFAULT_CHECKPOINT_SIZE_BUCKETS,
        this.#orchestrators,
      );
      this.otel?.durable();
      return true;
    } catch (error) {
      this.#durable = null;
      this.#warnOnce(
        'durable',
        `conversation-orchestrator: the metrics of durable conversations could not be registered (${error instanceof Error ? error.message : String(error)}); they are not recorded on this registry`,
      );
      return false;
    }
  }

  /** A durable conversation resumed (`cause`: crash, abort, suspend or handoff; a cancel is not one). */
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
    const record = this.#checkpoints(orchestrator, store);
    if (record === undefined) return;
    if (record.duration.observe(seconds) >= 0) {
      this.otel?.checkpointDuration?.record(seconds, record.duration.labels);
    }
    if (failed) record.failures.count++;
  }

  /**
   * One checkpoint write to store `store` that landed (a whole state, an entry, a snapshot) or a
   * snapshot that failed: its bytes (landed writes only) and, for a snapshot, its duration.
   */
  checkpointWritten(
    orchestrator: OrchestratorRecord,
    store: string,
    kind: string,
    bytes: number,
    seconds: number,
    failed: boolean,
  ): void {
    const record = this.#checkpoints(orchestrator, store);
    if (record === undefined) return;
    const durable = this.#durable as DurableHistograms;
    const otel = this.otel;
    if (kind === 'snapshot') {
      record.snapshotDuration ??= durable.snapshotDuration.series(record.failures.labels);
      if (record.snapshotDuration.observe(seconds) >= 0) {
        otel?.snapshotDuration?.record(seconds, record.snapshotDuration.labels);
      }
      if (failed) {
        record.snapshotFailures ??= series(record.failures.labels);
        record.snapshotFailures.count++;
        return;
      }
    }
    let size = record.sizes.get(kind);
    if (size === undefined) {
      size = durable.checkpointSize.series({
        ...record.failures.labels,
        [LABEL_CHECKPOINT_KIND]: kind,
      });
      record.sizes.set(kind, size);
    }
    if (size.observe(bytes) >= 0) otel?.checkpointSize?.record(bytes, size.labels);
  }

  /** The commit records of (orchestrator, store), once the durable metrics are registered. */
  #checkpoints(orchestrator: OrchestratorRecord, store: string): CheckpointRecord | undefined {
    const durable = this.#durable;
    if (durable === undefined || durable === null) return undefined;
    let record = orchestrator.checkpoints.get(store);
    if (record === undefined) {
      const labels = { [LABEL_ORCHESTRATOR]: orchestrator.name, [LABEL_STORE]: store };
      record = checkpointRecord(labels, durable.checkpointDuration.series(labels));
      orchestrator.checkpoints.set(store, record);
    }
    return record;
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
      slots = responderSlots(responders);
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
    usage: Usage,
    provider: string,
  ): void {
    const responder =
      index < 0
        ? TURN_POLICY_LABEL_VALUE
        : (this.slot(orchestrator, slots, index).labels[LABEL_RESPONDER] as string);
    const modelLabel = this.#modelLabel(usage.model);
    const key = `${responder}\u0000${modelLabel}`;
    let record = orchestrator.tokens.get(key);
    if (record === undefined) {
      const labels = {
        [LABEL_ORCHESTRATOR]: orchestrator.name,
        [LABEL_RESPONDER]: responder,
        [LABEL_MODEL]: modelLabel,
      };
      record = tokenRecord(labels, provider);
      orchestrator.tokens.set(key, record);
    }
    record.input.count += usage.inputTokens ?? 0;
    record.output.count += usage.outputTokens ?? 0;
    record.cacheRead.count += usage.cacheReadInputTokens ?? 0;
    record.reasoning.count += usage.reasoningOutputTokens ?? 0;
  }

  /** Bounded model label values: past `maxModels` distinct models, the overflow value. */
  #modelLabel(model: string | undefined): string {
    if (model === undefined || model === '') return MODEL_NONE;
    if (admitted(this.#models, model, this.settings.maxModels)) return model;
    this.#warnOnce(
      'models',
      `conversation-orchestrator: more than maxModels (${this.settings.maxModels}) distinct models on this registry; tokens of the others are counted under model="${OVERFLOW_LABEL_VALUE}" (said once)`,
    );
    return OVERFLOW_LABEL_VALUE;
  }

  /** Tokens of a conversation that reported any, at its end (after `countEnd`). */
  conversationTokens(
    orchestrator: OrchestratorRecord,
    reason: string,
    tokens: number,
    context?: Context,
  ): void {
    const end = this.#end(orchestrator, reason);
    if (end.tokens === undefined) end.tokens = this.#conversationTokens.series(end.labels);
    if (end.tokens.observe(tokens) >= 0) {
      this.otel?.conversationTokens.record(tokens, end.tokens.labels, context);
    }
  }

  /**
   * Exemplars are on but no export tracker is on the registry: none are written (nothing knows
   * which traces were delivered); said once.
   */
  exemplarsWithheld(): void {
    this.#warnOnce(
      'exemplars',
      'conversation-orchestrator: no exemplars on this registry: they point only at traces the exporter delivered, and no export tracker says which were; wrap the exporter with createExportTracker({ exporter, registry })',
    );
  }

  #warnOnce(cap: Warning, message: string): void {
    if (this.#warned.has(cap)) return;
    this.#warned.add(cap);
    try {
      this.#logger.warn(message);
    } catch {
      // A logger that throws must not break the count.
    }
  }

  /** A conversation began and is in progress until its `segmentEnded`. */
  conversationStarted(orchestrator: OrchestratorRecord): void {
    orchestrator.started.count++;
    orchestrator.inProgress.count++;
  }

  /**
   * A later segment of a durable conversation began in this process: in progress here until
   * `segmentEnded`; the conversation was counted as started once, by its
   * first segment.
   */
  segmentStarted(orchestrator: OrchestratorRecord): void {
    orchestrator.inProgress.count++;
  }

  /**
   * A segment ended: no longer in progress here. When it ended its conversation, `countEnd`
   * counts the ending too; one that suspended or was handed off ends where it ends.
   */
  segmentEnded(orchestrator: OrchestratorRecord): void {
    orchestrator.inProgress.count--;
  }

  /**
   * Counts an end (reason, duration, dispatches) without the in-progress gauge (`segmentEnded`
   * takes the conversation out of it; the plain listener, which never sees a start or a failure,
   * keeps none). Its exemplars are `keptEndExemplars`', once the trace is delivered.
   */
  countEnd(
    orchestrator: OrchestratorRecord,
    reason: string,
    elapsedSeconds: number,
    dispatches: number,
    context?: Context,
  ): void {
    const end = this.#end(orchestrator, reason);
    end.count++;
    if (end.duration === undefined) end.duration = this.#conversationDuration.series(end.labels);
    if (end.dispatches === undefined)
      end.dispatches = this.#conversationDispatches.series(end.labels);
    const durationAt = end.duration.observe(elapsedSeconds);
    const dispatchesAt = end.dispatches.observe(dispatches);
    const otel = this.otel;
    if (otel === undefined) return;
    // The same values, the same labels (one object), in the conversation span's context.
    if (durationAt >= 0) otel.conversationDuration.record(elapsedSeconds, end.labels, context);
    if (dispatchesAt >= 0) otel.conversationDispatches.record(dispatches, end.labels, context);
  }

  /**
   * The exemplars of an end that `countEnd` counted without them, once its trace was delivered.
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
      end = endRecord(orchestrator.name, label);
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
    if (BUILT_IN_REASONS.has(reason) || admitted(this.#reasons, reason, this.#maxReasons)) {
      return reason;
    }
    this.#warnOnce(
      'reasons',
      `conversation-orchestrator: more than maxReasons (${this.#maxReasons}) distinct user-named reasons on this registry; the others are counted as reason="${REASON_OTHER}" (said once)`,
    );
    return REASON_OTHER;
  }
}
