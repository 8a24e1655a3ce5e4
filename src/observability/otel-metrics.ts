/**
 * The orchestrator metrics through the OpenTelemetry metrics API (`meterProvider`): the same
 * definitions (metric-definitions.ts), the same records (metric-records.ts). Counters and
 * gauges are observable instruments read from the records at each collection, exactly as the
 * prom-client collectors read them at a scrape, so they cost nothing per dispatch and the two
 * paths cannot disagree. Histograms are recorded as they happen (the API has no asynchronous
 * histogram), in the context of the conversation's span, so an SDK that samples exemplars
 * takes them from it. The GenAI conventions' agent, workflow and usage metrics come beside them.
 */
import {
  type Attributes,
  type BatchObservableResult,
  type Context,
  type Histogram,
  type Meter,
  type MeterProvider,
  type Observable,
  ValueType,
} from '@opentelemetry/api';
import { admitted } from './bounded-values.ts';
import type { Series } from './collected-counter.ts';
import {
  type BucketList,
  DURABLE_METRICS,
  GEN_AI_METRICS,
  type GenAiMetricDefinition,
  type MetricDefinition,
  ORCHESTRATOR_METRICS,
} from './metric-definitions.ts';
import type { MetricBuckets } from './metric-families.ts';
import type { DispatchRecord, OrchestratorRecord, TokenRecord } from './metric-records.ts';
import {
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_WORKFLOW_NAME,
  ERROR_TYPE_OTHER,
  GEN_AI_OPERATION_CHAT,
  GEN_AI_TOKEN_MODALITY_UNKNOWN,
  LABEL_MODEL,
  LABEL_RESPONDER,
  MODEL_NONE,
  OTEL_ATTR_GEN_AI_TOKEN_MODALITY,
  TRACER_NAME,
  TRACER_VERSION,
  TURN_POLICY_LABEL_VALUE,
} from './semconv.ts';

/** Distinct `error.type` values on the GenAI metrics; past it a new one is `_OTHER`. */
export const MAX_ERROR_TYPES = 20;

/** The bucket lists of the histograms, by the definitions' names for them. */
export type BucketLists = MetricBuckets & {
  readonly checkpoint: readonly number[];
  readonly checkpointSize: readonly number[];
  readonly inferenceCalls: readonly number[];
};

type Observed = Observable<Attributes>;

function valueType(definition: { readonly values: 'int' | 'double' }): ValueType {
  return definition.values === 'int' ? ValueType.INT : ValueType.DOUBLE;
}

function histogramOf(
  meter: Meter,
  definition: MetricDefinition | GenAiMetricDefinition,
  bounds: readonly number[],
): Histogram {
  return meter.createHistogram(definition.otel, {
    description: definition.help,
    unit: definition.unit,
    valueType: valueType(definition),
    advice: { explicitBucketBoundaries: [...bounds] },
  });
}

function observableOf(
  meter: Meter,
  definition: MetricDefinition | GenAiMetricDefinition,
): Observed {
  const options = {
    description: definition.help,
    unit: definition.unit,
    valueType: valueType(definition),
  };
  return definition.kind === 'gauge'
    ? meter.createObservableUpDownCounter(definition.otel, options)
    : meter.createObservableCounter(definition.otel, options);
}

/** An observable of each definition, by the same keys (made in their order). */
function observablesOf<K extends string>(
  meter: Meter,
  definitions: Readonly<Record<K, MetricDefinition | GenAiMetricDefinition>>,
): Readonly<Record<K, Observed>> {
  const observables = {} as Record<K, Observed>;
  for (const key in definitions) observables[key] = observableOf(meter, definitions[key]);
  return observables;
}

/** The instruments of one metric set on one meter provider. */
export class OtelMetrics {
  readonly meterProvider: MeterProvider;
  readonly #meter: Meter;
  readonly #orchestrators: ReadonlyMap<string, OrchestratorRecord>;
  readonly #buckets: BucketLists;
  readonly dispatchDuration: Histogram;
  readonly conversationDuration: Histogram;
  readonly conversationDispatches: Histogram;
  readonly conversationTokens: Histogram;
  /** The GenAI histograms, unless `genAi` is off. */
  readonly invokeAgentDuration: Histogram | undefined;
  readonly invokeWorkflowDuration: Histogram | undefined;
  readonly inferenceCalls: Histogram | undefined;
  /** Made at the first durable conversation, with the durable observables. */
  checkpointDuration: Histogram | undefined;
  checkpointSize: Histogram | undefined;
  snapshotDuration: Histogram | undefined;
  readonly #errorTypes = new Set<string>();

  constructor(
    meterProvider: MeterProvider,
    buckets: BucketLists,
    orchestrators: ReadonlyMap<string, OrchestratorRecord>,
    genAi: boolean,
  ) {
    this.meterProvider = meterProvider;
    this.#meter = meterProvider.getMeter(TRACER_NAME, TRACER_VERSION);
    this.#orchestrators = orchestrators;
    this.#buckets = buckets;
    const M = ORCHESTRATOR_METRICS;
    const h = (d: MetricDefinition) =>
      histogramOf(this.#meter, d, buckets[d.buckets as BucketList]);
    this.dispatchDuration = h(M.dispatchDuration);
    this.conversationDuration = h(M.conversationDuration);
    this.conversationDispatches = h(M.conversationDispatches);
    this.conversationTokens = h(M.conversationTokens);
    const G = GEN_AI_METRICS;
    this.invokeAgentDuration = genAi
      ? histogramOf(this.#meter, G.invokeAgentDuration, buckets.dispatchDuration)
      : undefined;
    this.invokeWorkflowDuration = genAi
      ? histogramOf(this.#meter, G.invokeWorkflowDuration, buckets.conversationDuration)
      : undefined;
    this.inferenceCalls = genAi
      ? histogramOf(this.#meter, G.invokeAgentInferenceCalls, buckets.inferenceCalls)
      : undefined;
    this.#observeOrchestrators(genAi);
  }

  #observeOrchestrators(genAi: boolean): void {
    const M = ORCHESTRATOR_METRICS;
    const own = observablesOf(this.#meter, {
      started: M.conversationsStarted,
      ended: M.conversationsEnded,
      inProgress: M.conversationsInProgress,
      dispatches: M.dispatches,
      errors: M.responderErrors,
      deadlines: M.responderDeadlines,
      listenerErrors: M.listenerErrors,
      tokens: M.tokens,
    });
    const { started, ended, inProgress, dispatches, errors, deadlines, listenerErrors, tokens } =
      own;
    const G = GEN_AI_METRICS;
    const usage = genAi
      ? observablesOf(this.#meter, {
          input: G.usageInputTokens,
          output: G.usageOutputTokens,
          cacheRead: G.usageCacheReadInputTokens,
          reasoning: G.usageReasoningOutputTokens,
        })
      : undefined;
    const observables = Object.values<Observed>(own);
    if (usage !== undefined) observables.push(...Object.values<Observed>(usage));
    const orchestrators = this.#orchestrators;
    const series = (result: BatchObservableResult, into: Observed, s: Series | undefined) => {
      if (s !== undefined) result.observe(into, s.count, s.labels);
    };
    this.#meter.addBatchObservableCallback((result) => {
      for (const record of orchestrators.values()) {
        series(result, started, record.started);
        series(result, inProgress, record.inProgress);
        series(result, listenerErrors, record.listenerErrors);
        for (const end of record.ends.values()) series(result, ended, end);
        for (const r of record.responders.values()) {
          result.observe(dispatches, r.read(), r.labels);
          series(result, errors, r.errors);
          series(result, deadlines, r.deadlines);
        }
        for (const t of record.tokens.values()) {
          series(result, tokens, t.input);
          series(result, tokens, t.output);
          if (usage === undefined) continue;
          const attributes = usageAttributes(record, t);
          result.observe(usage.input, t.input.count, attributes);
          result.observe(usage.output, t.output.count, attributes);
          // The kinds that are part of the others: only once some report had them.
          if (t.cacheRead.count > 0) result.observe(usage.cacheRead, t.cacheRead.count, attributes);
          if (t.reasoning.count > 0) result.observe(usage.reasoning, t.reasoning.count, attributes);
        }
      }
    }, observables);
  }

  /** The instruments of durable conversations, made at the first conversation with a store. */
  durable(): void {
    if (this.checkpointDuration !== undefined) return;
    const D = DURABLE_METRICS;
    this.checkpointDuration = histogramOf(
      this.#meter,
      D.checkpointDuration,
      this.#buckets.checkpoint,
    );
    this.checkpointSize = histogramOf(this.#meter, D.checkpointSize, this.#buckets.checkpointSize);
    this.snapshotDuration = histogramOf(this.#meter, D.snapshotDuration, this.#buckets.checkpoint);
    const own = observablesOf(this.#meter, {
      reinvocations: D.responderReinvocations,
      resumed: D.conversationsResumed,
      failures: D.checkpointFailures,
      snapshotFailures: D.snapshotFailures,
      conflicts: D.leaseConflicts,
    });
    const { reinvocations, resumed, failures, snapshotFailures, conflicts } = own;
    const orchestrators = this.#orchestrators;
    this.#meter.addBatchObservableCallback((result) => {
      const series = (into: Observed, s: Series | undefined) => {
        if (s !== undefined) result.observe(into, s.count, s.labels);
      };
      for (const record of orchestrators.values()) {
        for (const r of record.responders.values()) series(reinvocations, r.reinvocations);
        for (const s of record.resumed.values()) series(resumed, s);
        for (const c of record.checkpoints.values()) {
          series(failures, c.failures);
          series(snapshotFailures, c.snapshotFailures);
        }
        series(conflicts, record.leaseConflicts);
      }
    }, Object.values<Observed>(own));
  }

  /** `error.type` as the GenAI metrics carry it: past `MAX_ERROR_TYPES` values, `_OTHER`. */
  errorType(type: string): string {
    return admitted(this.#errorTypes, type, MAX_ERROR_TYPES) ? type : ERROR_TYPE_OTHER;
  }

  /**
   * A dispatch (a successful invocation) counted: its duration, and with the GenAI metrics the
   * invocation's (the same interval) and its inference calls.
   */
  dispatched(
    record: OrchestratorRecord,
    responder: DispatchRecord,
    seconds: number,
    calls: number,
    context: Context,
  ): void {
    if (seconds >= 0 && seconds < Number.POSITIVE_INFINITY) {
      this.dispatchDuration.record(seconds, responder.duration.labels, context);
    }
    if (this.invokeAgentDuration !== undefined) {
      this.invocationEnded(record, responder, seconds, calls, undefined, context);
    }
  }

  /**
   * One responder invocation ended: `gen_ai.invoke_agent.duration`, and its inference calls
   * when it reported usage (`calls` > 0). `errorType` when it failed.
   */
  invocationEnded(
    record: OrchestratorRecord,
    responder: DispatchRecord,
    seconds: number,
    calls: number,
    errorType: string | undefined,
    context: Context,
  ): void {
    const duration = this.invokeAgentDuration;
    if (duration === undefined) return;
    responder.genAi ??= {
      [ATTR_GEN_AI_AGENT_NAME]: responder.labels[LABEL_RESPONDER] as string,
      [ATTR_GEN_AI_WORKFLOW_NAME]: record.name,
    };
    const attributes =
      errorType === undefined
        ? responder.genAi
        : failedAttributes(responder, responder.genAi, this.errorType(errorType));
    if (seconds >= 0 && seconds < Number.POSITIVE_INFINITY) {
      duration.record(seconds, attributes, context);
    }
    if (calls > 0) this.inferenceCalls?.record(calls, responder.genAi, context);
  }

  /** A conversation segment ended: `gen_ai.invoke_workflow.duration` (its span's duration). */
  segmentEnded(
    record: OrchestratorRecord,
    seconds: number,
    errorType: string | undefined,
    context: Context,
  ): void {
    const duration = this.invokeWorkflowDuration;
    if (duration === undefined || !(seconds >= 0 && seconds < Number.POSITIVE_INFINITY)) return;
    record.genAi ??= { [ATTR_GEN_AI_WORKFLOW_NAME]: record.name };
    const attributes =
      errorType === undefined
        ? record.genAi
        : failedAttributes(record, record.genAi, this.errorType(errorType));
    duration.record(seconds, attributes, context);
  }
}

/** A record the GenAI duration metrics take their attributes from: a responder's, an orchestrator's. */
interface GenAiAttributed {
  genAiFailed: Map<string, Attributes> | undefined;
}

/** `attributes` with `error.type` `type`: made at the first failure of that type, kept on `record`. */
function failedAttributes(
  record: GenAiAttributed,
  attributes: Attributes,
  type: string,
): Attributes {
  record.genAiFailed ??= new Map();
  let failed = record.genAiFailed.get(type);
  if (failed === undefined) {
    failed = { ...attributes, [ATTR_ERROR_TYPE]: type };
    record.genAiFailed.set(type, failed);
  }
  return failed;
}

/**
 * The GenAI usage counters' attributes of a token record: what the conventions require
 * (operation, provider, modality) and the model when a report named one; the responder and
 * orchestrator as `gen_ai.agent.name` (not for the turn policy) and `gen_ai.workflow.name`.
 */
function usageAttributes(record: OrchestratorRecord, tokens: TokenRecord): Attributes {
  if (tokens.genAi !== undefined) return tokens.genAi;
  const labels = tokens.input.labels;
  const attributes: Attributes = {
    [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_CHAT,
    [ATTR_GEN_AI_PROVIDER_NAME]: tokens.provider,
    [OTEL_ATTR_GEN_AI_TOKEN_MODALITY]: GEN_AI_TOKEN_MODALITY_UNKNOWN,
    [ATTR_GEN_AI_WORKFLOW_NAME]: record.name,
  };
  const model = labels[LABEL_MODEL];
  if (model !== undefined && model !== MODEL_NONE) attributes[ATTR_GEN_AI_REQUEST_MODEL] = model;
  const responder = labels[LABEL_RESPONDER];
  if (responder !== undefined && responder !== TURN_POLICY_LABEL_VALUE) {
    attributes[ATTR_GEN_AI_AGENT_NAME] = responder;
  }
  tokens.genAi = attributes;
  return attributes;
}
