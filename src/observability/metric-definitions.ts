/**
 * One table of the orchestrator's metrics, read by both paths: the prom-client collectors
 * (metric-families.ts) and the OpenTelemetry instruments (otel-metrics.ts) take their names,
 * help text, units, label names and bucket lists from here, so the two cannot drift. A label's
 * name is the attribute's name on the OpenTelemetry path: one set of PromQL queries reads both.
 */
import {
  GEN_AI_METRIC_INVOKE_AGENT_DURATION,
  GEN_AI_METRIC_INVOKE_AGENT_INFERENCE_CALLS,
  GEN_AI_METRIC_INVOKE_WORKFLOW_DURATION,
  GEN_AI_METRIC_USAGE_CACHE_READ_INPUT_TOKENS,
  GEN_AI_METRIC_USAGE_INPUT_TOKENS,
  GEN_AI_METRIC_USAGE_OUTPUT_TOKENS,
  GEN_AI_METRIC_USAGE_REASONING_OUTPUT_TOKENS,
  LABEL_CAUSE,
  LABEL_CHECKPOINT_KIND,
  LABEL_MODEL,
  LABEL_ORCHESTRATOR,
  LABEL_REASON,
  LABEL_RESPONDER,
  LABEL_STORE,
  LABEL_TOKEN_TYPE,
  METRIC_CHECKPOINT_DURATION,
  METRIC_CHECKPOINT_FAILURES,
  METRIC_CHECKPOINT_SIZE,
  METRIC_CHECKPOINT_SNAPSHOT_DURATION,
  METRIC_CHECKPOINT_SNAPSHOT_FAILURES,
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
  OTEL_METRIC_CHECKPOINT_DURATION,
  OTEL_METRIC_CHECKPOINT_FAILURES,
  OTEL_METRIC_CHECKPOINT_SIZE,
  OTEL_METRIC_CHECKPOINT_SNAPSHOT_DURATION,
  OTEL_METRIC_CHECKPOINT_SNAPSHOT_FAILURES,
  OTEL_METRIC_CONVERSATION_DISPATCHES,
  OTEL_METRIC_CONVERSATION_DURATION,
  OTEL_METRIC_CONVERSATION_TOKENS,
  OTEL_METRIC_CONVERSATIONS_ENDED,
  OTEL_METRIC_CONVERSATIONS_IN_PROGRESS,
  OTEL_METRIC_CONVERSATIONS_RESUMED,
  OTEL_METRIC_CONVERSATIONS_STARTED,
  OTEL_METRIC_DISPATCH_DURATION,
  OTEL_METRIC_DISPATCHES,
  OTEL_METRIC_LEASE_CONFLICTS,
  OTEL_METRIC_LISTENER_ERRORS,
  OTEL_METRIC_RESPONDER_DEADLINES,
  OTEL_METRIC_RESPONDER_ERRORS,
  OTEL_METRIC_RESPONDER_REINVOCATIONS,
  OTEL_METRIC_TOKENS,
} from './semconv.ts';

/** Which of the telemetry's bucket lists a histogram takes (`checkpoint`: the fixed default). */
export type BucketList =
  | 'dispatchDuration'
  | 'conversationDuration'
  | 'conversationDispatches'
  | 'conversationTokens'
  | 'checkpoint'
  | 'checkpointSize';

/** One metric, as both paths name and shape it. */
export interface MetricDefinition {
  /** The prom-client name (`orchestrator_dispatches_total`). */
  readonly prometheus: string;
  /** The OpenTelemetry instrument's name (`orchestrator.dispatches`). */
  readonly otel: string;
  /**
   * The prom-client type, and the OpenTelemetry instrument it becomes: a counter an observable
   * counter, a gauge an observable up-down counter (a count of what is running now), a histogram
   * a histogram (recorded as it happens: the API has no asynchronous histogram).
   */
  readonly kind: 'counter' | 'gauge' | 'histogram';
  /** The unit in UCUM, as the OpenTelemetry instrument declares it. */
  readonly unit: string;
  /** Whole numbers (`int`) or not (`double`), as the OpenTelemetry instrument declares them. */
  readonly values: 'int' | 'double';
  /** The help text of both. */
  readonly help: string;
  /** The label names, which are the attribute names on the OpenTelemetry path. */
  readonly labels: readonly string[];
  /** A histogram's bucket list. */
  readonly buckets?: BucketList;
}

const O = LABEL_ORCHESTRATOR;

/** The metrics of every conversation: registered with the metric set. */
export const ORCHESTRATOR_METRICS = {
  conversationsStarted: {
    prometheus: METRIC_CONVERSATIONS_STARTED,
    otel: OTEL_METRIC_CONVERSATIONS_STARTED,
    kind: 'counter',
    unit: '{conversation}',
    values: 'int',
    help: 'Conversations started.',
    labels: [O],
  },
  conversationsEnded: {
    prometheus: METRIC_CONVERSATIONS_ENDED,
    otel: OTEL_METRIC_CONVERSATIONS_ENDED,
    kind: 'counter',
    unit: '{conversation}',
    values: 'int',
    help: 'Conversations ended, by reason (converged, max_dispatches, timeout, queue_exhausted, aborted, deadline, error, ...).',
    labels: [O, LABEL_REASON],
  },
  conversationsInProgress: {
    prometheus: METRIC_CONVERSATIONS_IN_PROGRESS,
    otel: OTEL_METRIC_CONVERSATIONS_IN_PROGRESS,
    kind: 'gauge',
    unit: '{conversation}',
    values: 'int',
    help: 'Conversations running now.',
    labels: [O],
  },
  conversationDuration: {
    prometheus: METRIC_CONVERSATION_DURATION,
    otel: OTEL_METRIC_CONVERSATION_DURATION,
    kind: 'histogram',
    unit: 's',
    values: 'double',
    help: 'Elapsed time of a conversation at its end, by reason.',
    labels: [O, LABEL_REASON],
    buckets: 'conversationDuration',
  },
  conversationDispatches: {
    prometheus: METRIC_CONVERSATION_DISPATCHES,
    otel: OTEL_METRIC_CONVERSATION_DISPATCHES,
    kind: 'histogram',
    unit: '{dispatch}',
    values: 'int',
    help: 'Dispatches of a conversation at its end, by reason.',
    labels: [O, LABEL_REASON],
    buckets: 'conversationDispatches',
  },
  dispatches: {
    prometheus: METRIC_DISPATCHES,
    otel: OTEL_METRIC_DISPATCHES,
    kind: 'counter',
    unit: '{dispatch}',
    values: 'int',
    help: 'Successful dispatches (one responder answer each).',
    labels: [O, LABEL_RESPONDER],
  },
  dispatchDuration: {
    prometheus: METRIC_DISPATCH_DURATION,
    otel: OTEL_METRIC_DISPATCH_DURATION,
    kind: 'histogram',
    unit: 's',
    values: 'double',
    help: 'Duration of one dispatch: the responder answer plus the orchestrator work around it.',
    labels: [O, LABEL_RESPONDER],
    buckets: 'dispatchDuration',
  },
  responderErrors: {
    prometheus: METRIC_RESPONDER_ERRORS,
    otel: OTEL_METRIC_RESPONDER_ERRORS,
    kind: 'counter',
    unit: '{error}',
    values: 'int',
    help: 'Responder invocations that threw or rejected.',
    labels: [O, LABEL_RESPONDER],
  },
  responderDeadlines: {
    prometheus: METRIC_RESPONDER_DEADLINES,
    otel: OTEL_METRIC_RESPONDER_DEADLINES,
    kind: 'counter',
    unit: '{conversation}',
    values: 'int',
    help: 'Conversations ended by the dispatch deadline (dispatchTimeoutMs) while this responder had not answered.',
    labels: [O, LABEL_RESPONDER],
  },
  listenerErrors: {
    prometheus: METRIC_LISTENER_ERRORS,
    otel: OTEL_METRIC_LISTENER_ERRORS,
    kind: 'counter',
    unit: '{error}',
    values: 'int',
    help: 'Listener calls that threw or rejected.',
    labels: [O],
  },
  tokens: {
    prometheus: METRIC_TOKENS,
    otel: OTEL_METRIC_TOKENS,
    kind: 'counter',
    unit: '{token}',
    values: 'int',
    help: 'Tokens reported (context.reportUsage), by responder, model and type (input, output); failed and skipped invocations included.',
    labels: [O, LABEL_RESPONDER, LABEL_MODEL, LABEL_TOKEN_TYPE],
  },
  conversationTokens: {
    prometheus: METRIC_CONVERSATION_TOKENS,
    otel: OTEL_METRIC_CONVERSATION_TOKENS,
    kind: 'histogram',
    unit: '{token}',
    values: 'int',
    help: 'Tokens (input + output) of a conversation that reported any, at its end, by reason.',
    labels: [O, LABEL_REASON],
    buckets: 'conversationTokens',
  },
} as const satisfies Record<string, MetricDefinition>;

/** The metrics of durable conversations: registered at the first conversation with a store. */
export const DURABLE_METRICS = {
  responderReinvocations: {
    prometheus: METRIC_RESPONDER_REINVOCATIONS,
    otel: OTEL_METRIC_RESPONDER_REINVOCATIONS,
    kind: 'counter',
    unit: '{invocation}',
    values: 'int',
    help: 'Responder invocations run again after a crash (attempt > 1): the call in flight when a worker died.',
    labels: [O, LABEL_RESPONDER],
  },
  conversationsResumed: {
    prometheus: METRIC_CONVERSATIONS_RESUMED,
    otel: OTEL_METRIC_CONVERSATIONS_RESUMED,
    kind: 'counter',
    unit: '{conversation}',
    values: 'int',
    help: 'Conversations resumed, by cause (crash, abort, suspend, handoff).',
    labels: [O, LABEL_CAUSE],
  },
  checkpointDuration: {
    prometheus: METRIC_CHECKPOINT_DURATION,
    otel: OTEL_METRIC_CHECKPOINT_DURATION,
    kind: 'histogram',
    unit: 's',
    values: 'double',
    help: 'Duration of one checkpoint commit (the store call), by store.',
    labels: [O, LABEL_STORE],
    buckets: 'checkpoint',
  },
  checkpointFailures: {
    prometheus: METRIC_CHECKPOINT_FAILURES,
    otel: OTEL_METRIC_CHECKPOINT_FAILURES,
    kind: 'counter',
    unit: '{checkpoint}',
    values: 'int',
    help: 'Checkpoint commits that failed (the store threw or did not answer in time), by store.',
    labels: [O, LABEL_STORE],
  },
  checkpointSize: {
    prometheus: METRIC_CHECKPOINT_SIZE,
    otel: OTEL_METRIC_CHECKPOINT_SIZE,
    kind: 'histogram',
    unit: 'By',
    values: 'int',
    help: 'Bytes one checkpoint write stored (UTF-8 of the encoded state or entry), by store and kind (whole, entry, snapshot).',
    labels: [O, LABEL_STORE, LABEL_CHECKPOINT_KIND],
    buckets: 'checkpointSize',
  },
  snapshotDuration: {
    prometheus: METRIC_CHECKPOINT_SNAPSHOT_DURATION,
    otel: OTEL_METRIC_CHECKPOINT_SNAPSHOT_DURATION,
    kind: 'histogram',
    unit: 's',
    values: 'double',
    help: 'Duration of one snapshot write (the store call, off the per-dispatch path), landed or failed, by store.',
    labels: [O, LABEL_STORE],
    buckets: 'checkpoint',
  },
  snapshotFailures: {
    prometheus: METRIC_CHECKPOINT_SNAPSHOT_FAILURES,
    otel: OTEL_METRIC_CHECKPOINT_SNAPSHOT_FAILURES,
    kind: 'counter',
    unit: '{snapshot}',
    values: 'int',
    help: 'Snapshot writes that failed, were refused or did not answer in time (the log grows until one lands), by store.',
    labels: [O, LABEL_STORE],
  },
  leaseConflicts: {
    prometheus: METRIC_LEASE_CONFLICTS,
    otel: OTEL_METRIC_LEASE_CONFLICTS,
    kind: 'counter',
    unit: '{conflict}',
    values: 'int',
    help: 'Commits or lease renewals refused because another process holds the conversation.',
    labels: [O],
  },
} as const satisfies Record<string, MetricDefinition>;

/** A metric of the GenAI conventions, on the OpenTelemetry path only. */
export interface GenAiMetricDefinition {
  readonly otel: string;
  /** The conventions' instrument: a histogram (recorded as it happens) or a counter (observed). */
  readonly kind: 'counter' | 'histogram';
  readonly unit: string;
  readonly values: 'int' | 'double';
  readonly help: string;
  /** What it is recorded from, as docs/telemetry.md says it. */
  readonly from: string;
}

/** Upper bounds of `gen_ai.invoke_agent.inference_calls`: one call to a runaway loop. */
export const DEFAULT_INFERENCE_CALL_BUCKETS = [1, 2, 4, 8, 16, 32, 64, 128] as const;

/** The GenAI metrics (OpenTelemetry only; `genAiMetrics: false` leaves them out). */
export const GEN_AI_METRICS = {
  invokeWorkflowDuration: {
    otel: GEN_AI_METRIC_INVOKE_WORKFLOW_DURATION,
    kind: 'histogram',
    unit: 's',
    values: 'double',
    help: 'Duration of a conversation segment: its invoke_workflow span.',
    from: 'each conversation span (a durable conversation: each segment), with `gen_ai.workflow.name` and, when it failed, `error.type`; buckets of `conversationDurationBuckets`',
  },
  invokeAgentDuration: {
    otel: GEN_AI_METRIC_INVOKE_AGENT_DURATION,
    kind: 'histogram',
    unit: 's',
    values: 'double',
    help: 'Duration of one responder invocation, failed ones with error.type.',
    from: 'each responder invocation (`gen_ai.agent.name`, `gen_ai.workflow.name`, `error.type` when it threw or rejected); buckets of `dispatchDurationBuckets`',
  },
  invokeAgentInferenceCalls: {
    otel: GEN_AI_METRIC_INVOKE_AGENT_INFERENCE_CALLS,
    kind: 'histogram',
    unit: '{inference_call}',
    values: 'int',
    help: 'Usage reports (model calls) of one responder invocation that made any.',
    from: 'each responder invocation that reported usage: its number of `context.reportUsage` calls; buckets 1 … 128',
  },
  usageInputTokens: {
    otel: GEN_AI_METRIC_USAGE_INPUT_TOKENS,
    kind: 'counter',
    unit: '{token}',
    values: 'int',
    help: 'Input tokens responders reported (context.reportUsage), cache reads included.',
    from: '`orchestrator_tokens_total{type="input"}`, with `gen_ai.operation.name` `chat`, `gen_ai.provider.name`, `gen_ai.token.modality` `unknown`, `gen_ai.request.model` when reported',
  },
  usageOutputTokens: {
    otel: GEN_AI_METRIC_USAGE_OUTPUT_TOKENS,
    kind: 'counter',
    unit: '{token}',
    values: 'int',
    help: 'Output tokens responders reported, reasoning included.',
    from: '`orchestrator_tokens_total{type="output"}`, the same attributes',
  },
  usageCacheReadInputTokens: {
    otel: GEN_AI_METRIC_USAGE_CACHE_READ_INPUT_TOKENS,
    kind: 'counter',
    unit: '{token}',
    values: 'int',
    help: 'Cached input tokens responders reported (part of the input tokens).',
    from: '`cacheReadInputTokens` of the reports, once a report had some',
  },
  usageReasoningOutputTokens: {
    otel: GEN_AI_METRIC_USAGE_REASONING_OUTPUT_TOKENS,
    kind: 'counter',
    unit: '{token}',
    values: 'int',
    help: 'Reasoning output tokens responders reported (part of the output tokens).',
    from: '`reasoningOutputTokens` of the reports, once a report had some',
  },
} as const satisfies Record<string, GenAiMetricDefinition>;

/** Every definition, the orchestrator's then the durable ones. */
export const METRIC_DEFINITIONS: readonly MetricDefinition[] = [
  ...Object.values(ORCHESTRATOR_METRICS),
  ...Object.values(DURABLE_METRICS),
];

/**
 * The Prometheus name an exporter writes for a definition's OpenTelemetry instrument: dots to
 * `_`, `_total` on a counter, and the unit's suffix (`_seconds`) when `unitSuffix` (the
 * Collector's Prometheus exporters and Prometheus's own OTLP receiver add it; the SDK's
 * `PrometheusExporter` 0.301 does not). Units in braces add none.
 */
export function prometheusNameOf(definition: MetricDefinition, unitSuffix: boolean): string {
  let name = definition.otel.replace(/[^a-zA-Z0-9_:]/g, '_').replace(/_+/g, '_');
  if (unitSuffix && definition.unit === 's') name += '_seconds';
  if (unitSuffix && definition.unit === 'By') name += '_bytes';
  if (definition.kind === 'counter') name += '_total';
  return name;
}
