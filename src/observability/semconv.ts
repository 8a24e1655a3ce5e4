/**
 * Every span, event, attribute and metric name the plugin emits: public API. The tables of
 * docs/telemetry.md, the Grafana dashboards and the Prometheus rules use these names, and a test
 * fails when they drift apart. GenAI names are copied from the OpenTelemetry GenAI conventions ("development"
 * status) rather than imported from the incubating entry point at run time; the version they
 * follow is pinned in vendor/semantic-conventions-genai/ and checked by a conformance test.
 */

// --- GenAI semantic conventions (copied) ---
/** `invoke_workflow` on the conversation span, `invoke_agent` on a responder span. */
export const ATTR_GEN_AI_OPERATION_NAME = 'gen_ai.operation.name';
/** The conversation id, on the conversation span and every responder span. */
export const ATTR_GEN_AI_CONVERSATION_ID = 'gen_ai.conversation.id';
/** The responder: on its `invoke_agent` span and on each dispatch event. */
export const ATTR_GEN_AI_AGENT_NAME = 'gen_ai.agent.name';
/** The orchestrator's `name`, on the conversation span. */
export const ATTR_GEN_AI_WORKFLOW_NAME = 'gen_ai.workflow.name';
/**
 * On every `invoke_agent` span: the responder's `provider`, or the telemetry's
 * `defaultProviderName` when it declares none. The pinned conventions dropped it from internal
 * agent spans: kept there until 0.3.0 (docs/telemetry.md, the migration table); required on the
 * GenAI usage counters.
 */
export const ATTR_GEN_AI_PROVIDER_NAME = 'gen_ai.provider.name';
/** `gen_ai.provider.name` of a responder that declares no provider, unless the telemetry says another. */
export const DEFAULT_PROVIDER_NAME = '_OTHER';
/** On `invoke_agent` spans: the model the invocation's last usage report named. */
export const ATTR_GEN_AI_REQUEST_MODEL = 'gen_ai.request.model';
/** On `invoke_agent` spans: input tokens the invocation reported (`context.reportUsage`), summed. */
export const ATTR_GEN_AI_USAGE_INPUT_TOKENS = 'gen_ai.usage.input_tokens';
/** On `invoke_agent` spans: output tokens the invocation reported, summed. */
export const ATTR_GEN_AI_USAGE_OUTPUT_TOKENS = 'gen_ai.usage.output_tokens';
/**
 * On `invoke_agent` spans: cached input tokens the invocation reported, when any report had them.
 * The pinned conventions dropped it from internal agent spans: kept there until 0.3.0.
 */
export const ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS = 'gen_ai.usage.cache_read.input_tokens';
/** On `invoke_agent` spans: reasoning output tokens the invocation reported, when any report had them. */
export const ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS = 'gen_ai.usage.reasoning.output_tokens';
/** The `gen_ai.operation.name` of a conversation span, and its name's first word. */
export const GEN_AI_OPERATION_INVOKE_WORKFLOW = 'invoke_workflow';
/** The `gen_ai.operation.name` of a responder span, and its name's first word. */
export const GEN_AI_OPERATION_INVOKE_AGENT = 'invoke_agent';

// --- General semantic conventions (stable) ---
/** The class of error a failed span ended with (the error's class name, or `_OTHER`). */
export const ATTR_ERROR_TYPE = 'error.type';
/** `error.type` of a thrown value that is not an Error. */
export const ERROR_TYPE_OTHER = '_OTHER';

// --- Spans ---
/** The conversation span: `invoke_workflow {orchestrator}`. */
export const SPAN_CONVERSATION_PREFIX = `${GEN_AI_OPERATION_INVOKE_WORKFLOW} `;
/** A responder invocation span (opt-in): `invoke_agent {responder}`. */
export const SPAN_RESPONDER_PREFIX = `${GEN_AI_OPERATION_INVOKE_AGENT} `;

// --- Conversation span attributes ---
/** The orchestrator's responders, in order (string array). */
export const ATTR_CONVERSATION_RESPONDERS = 'conversation.responders';
/** Dispatches at the end of the conversation. */
export const ATTR_CONVERSATION_DISPATCH_COUNT = 'conversation.dispatch_count';
/** How the conversation ended: `converged`, `max_dispatches`, `aborted`, `error` … */
export const ATTR_CONVERSATION_END_REASON = 'conversation.end.reason';
/** The policy whose decision ended the conversation (`decision.policy`), when it names one. */
export const ATTR_CONVERSATION_END_POLICY = 'conversation.end.policy';
/** What the deciding policy measured at the end (`decision.observed`), when it says. */
export const ATTR_CONVERSATION_END_OBSERVED = 'conversation.end.observed';
/** The threshold it compared that with (`decision.limit`), when it says. */
export const ATTR_CONVERSATION_END_LIMIT = 'conversation.end.limit';
/** Elapsed time at the end, in milliseconds. */
export const ATTR_CONVERSATION_ELAPSED_MS = 'conversation.elapsed_ms';
/** Dispatch events not kept (past `maxDispatchEvents`): kept events + this = dispatches. */
export const ATTR_CONVERSATION_EVENTS_DROPPED = 'conversation.dispatch_events.dropped';
/** The input message's content (only with `captureContent`, truncated). */
export const ATTR_CONVERSATION_INPUT_CONTENT = 'conversation.input.content';
/** The conversation's input tokens at its end (`result.usage` / `error.usage`), when any was reported. */
export const ATTR_CONVERSATION_USAGE_INPUT_TOKENS = 'conversation.usage.input_tokens';
/** The conversation's output tokens at its end, when any was reported. */
export const ATTR_CONVERSATION_USAGE_OUTPUT_TOKENS = 'conversation.usage.output_tokens';
/**
 * On an aborted conversation's span (and on the responder span the abort cut short): the class
 * of the abort signal's reason (`TimeoutError` for `AbortSignal.timeout()`, `AbortError` for a
 * bare `abort()`, `_OTHER` for a reason that is not an Error).
 */
export const ATTR_CONVERSATION_ABORT_REASON = 'conversation.abort.reason';

// --- Segments of a durable conversation (one trace per conversation) ---
/**
 * On the conversation span of a durable conversation (one with a `store`): which segment of the
 * conversation it is, 1 for the first run, 2 for the first resume, 3 … Every segment is an
 * `invoke_workflow {orchestrator}` span in the conversation's one trace, linked to the previous.
 */
export const ATTR_CONVERSATION_SEGMENT = 'conversation.segment';
/**
 * On the conversation span of a durable conversation, set at its end: whether this segment's end
 * is the conversation's (`true`: its ending was committed, count it here; `false`: it suspended or
 * was handed off and ends in a later segment). The core decides it (`ConversationEnd.ended`); the
 * sampler applies the `reason` rule only when it is not `false`. Without a store it is set only
 * on a suspended span (`false`); absent, the span's end is the conversation's.
 */
export const ATTR_CONVERSATION_ENDED = 'conversation.ended';
/**
 * On a resumed segment's span: why the segment started, `crash`, `abort`, `suspend`, `handoff` or `cancel`
 * (`cancel()` ending it, running nothing; not counted in `orchestrator_conversations_resumed_total`).
 */
export const ATTR_CONVERSATION_RESUME_CAUSE = 'conversation.resume.cause';
/**
 * On a segment resumed after a crash: the committed dispatches that no span event of an ended
 * segment carries (their segment's span died with its process). See docs/telemetry.md.
 */
export const ATTR_CONVERSATION_RESUME_DISPATCHES_LOST = 'conversation.resume.dispatches_lost';
/**
 * On a resumed segment's span: how many checkpoint entries the resume folded onto the stored
 * base (a snapshot or a whole checkpoint) to rebuild the state; 0 when it was stored whole.
 */
export const ATTR_CONVERSATION_RESUME_ENTRIES = 'conversation.resume.entries';
/** `conversation.end.reason` of a segment that ended by suspending (the conversation goes on). */
export const END_REASON_SUSPENDED = 'suspended';
/** The key under which the telemetry's data is kept in checkpoints (`ConversationObserver.key`). */
export const TELEMETRY_OBSERVER_KEY = 'telemetry';

/** On a conversation span the sampler kept: the rule that kept it (`failed`, `reason`, `slow`, ...). */
export const ATTR_CONVERSATION_SAMPLER_RULE = 'conversation.sampler.rule';
/** On a conversation span: spans of its trace the sampler could not buffer (its bounds). */
export const ATTR_CONVERSATION_SAMPLER_SPANS_LOST = 'conversation.sampler.spans_lost';

// --- The per-dispatch span event ---
/** The span event recorded on the conversation span for each kept dispatch. */
export const EVENT_DISPATCH = 'conversation.dispatch';
/** The dispatch count on a dispatch event: 1, 2, 3 … */
export const ATTR_DISPATCH_COUNT = 'conversation.dispatch.count';
/** Time since the conversation started at that dispatch, in milliseconds. */
export const ATTR_DISPATCH_ELAPSED_MS = 'conversation.dispatch.elapsed_ms';
/** Duration of that dispatch, in milliseconds. */
export const ATTR_DISPATCH_DURATION_MS = 'conversation.dispatch.duration_ms';
/** The termination decision after that dispatch. */
export const ATTR_DECISION_TERMINATE = 'conversation.decision.terminate';
/** The decision's reason (`continue` while the conversation goes on). */
export const ATTR_DECISION_REASON = 'conversation.decision.reason';
/** What the termination policy measured at this dispatch (`decision.observed`), when it says. */
export const ATTR_DECISION_OBSERVED = 'conversation.decision.observed';
/** The threshold it compared that with (`decision.limit`), when it says. */
export const ATTR_DECISION_LIMIT = 'conversation.decision.limit';
/** The new message's content (only with `captureContent`, truncated). */
export const ATTR_DISPATCH_CONTENT = 'conversation.dispatch.content';
/** The input tokens this dispatch's invocation reported (`DispatchInfo.usage`), when it reported any. */
export const ATTR_DISPATCH_USAGE_INPUT_TOKENS = 'conversation.dispatch.usage.input_tokens';
/** The output tokens this dispatch's invocation reported, when it reported any. */
export const ATTR_DISPATCH_USAGE_OUTPUT_TOKENS = 'conversation.dispatch.usage.output_tokens';

// --- Responder span attributes ---
/** On a responder span: the dispatch that invocation would be if it succeeds. */
export const ATTR_RESPONDER_DISPATCH_NUMBER = 'conversation.dispatch.number';

// --- Metrics (prom-client) ---
/** Counter of conversations started, by `orchestrator`. */
export const METRIC_CONVERSATIONS_STARTED = 'orchestrator_conversations_started_total';
/** Counter of conversations ended, by `orchestrator` and `reason`. */
export const METRIC_CONVERSATIONS_ENDED = 'orchestrator_conversations_ended_total';
/** Gauge of conversations running now, by `orchestrator`. */
export const METRIC_CONVERSATIONS_IN_PROGRESS = 'orchestrator_conversations_in_progress';
/** Histogram of conversation elapsed time at the end (seconds), by `orchestrator` and `reason`. */
export const METRIC_CONVERSATION_DURATION = 'orchestrator_conversation_duration_seconds';
/** Histogram of dispatches per conversation, by `orchestrator` and `reason`. */
export const METRIC_CONVERSATION_DISPATCHES = 'orchestrator_conversation_dispatches';
/** Counter of successful dispatches, by `orchestrator` and `responder`. */
export const METRIC_DISPATCHES = 'orchestrator_dispatches_total';
/** Histogram of one dispatch's duration (seconds), by `orchestrator` and `responder`. */
export const METRIC_DISPATCH_DURATION = 'orchestrator_dispatch_duration_seconds';
/** Counter of responder invocations that threw or rejected, by `orchestrator` and `responder`. */
export const METRIC_RESPONDER_ERRORS = 'orchestrator_responder_errors_total';
/** Counter of listener calls that threw or rejected, by `orchestrator`. */
export const METRIC_LISTENER_ERRORS = 'orchestrator_listener_errors_total';
/** Conversations ended by `dispatchTimeoutMs` while this responder had not answered. */
export const METRIC_RESPONDER_DEADLINES = 'orchestrator_responder_deadlines_total';
/** Tokens reported, by orchestrator, responder, model and type (`input` | `output`). */
export const METRIC_TOKENS = 'orchestrator_tokens_total';
/** Tokens (input + output) per conversation that reported any, at its end, by reason. */
export const METRIC_CONVERSATION_TOKENS = 'orchestrator_conversation_tokens';
/** The conversation sampler (`createConversationSampler`): one count per trace decided. */
export const METRIC_SAMPLER_DECISIONS = 'orchestrator_sampler_decisions_total';
/** Spans the sampler could not buffer (per-trace or total bound) and so never exported. */
export const METRIC_SAMPLER_SPANS_LOST = 'orchestrator_sampler_spans_lost_total';
/** Spans buffered now, waiting for their conversation's decision. */
export const METRIC_SAMPLER_BUFFERED_SPANS = 'orchestrator_sampler_buffered_spans';
/** Traces waiting for their conversation's decision now. */
export const METRIC_SAMPLER_PENDING_TRACES = 'orchestrator_sampler_pending_traces';

// --- Metrics of durable conversations and fleets (emitted once a store is attached) ---
/**
 * Counter of dispatches run again after a crash (the responder call in flight when a worker
 * died), by `orchestrator` and `responder`: counted here instead of `orchestrator_dispatches_total`.
 */
export const METRIC_RESPONDER_REINVOCATIONS = 'orchestrator_responder_reinvocations_total';
/** Counter of conversations resumed, by `orchestrator` and `cause` (`crash`, `abort`, `suspend`, `handoff`; a `cancel()` is counted as an `aborted` ending, not here). */
export const METRIC_CONVERSATIONS_RESUMED = 'orchestrator_conversations_resumed_total';
/** Histogram of one checkpoint commit's duration (seconds), by `orchestrator` and `store`. */
export const METRIC_CHECKPOINT_DURATION = 'orchestrator_checkpoint_duration_seconds';
/** Counter of checkpoint commits that failed (the store threw), by `orchestrator` and `store`. */
export const METRIC_CHECKPOINT_FAILURES = 'orchestrator_checkpoint_failures_total';
/**
 * Histogram of the bytes one checkpoint write stored, by `orchestrator`, `store` and `kind`
 * (`whole`, `entry`, `snapshot`).
 */
export const METRIC_CHECKPOINT_SIZE = 'orchestrator_checkpoint_size_bytes';
/** Histogram of one snapshot write's duration (seconds), landed or failed, by `orchestrator` and `store`. */
export const METRIC_CHECKPOINT_SNAPSHOT_DURATION =
  'orchestrator_checkpoint_snapshot_duration_seconds';
/** Counter of snapshot writes that failed or were refused (the log keeps growing), by `orchestrator` and `store`. */
export const METRIC_CHECKPOINT_SNAPSHOT_FAILURES =
  'orchestrator_checkpoint_snapshot_failures_total';
/** Counter of commits or acquisitions refused because another owner holds the lease, by `orchestrator`. */
export const METRIC_LEASE_CONFLICTS = 'orchestrator_lease_conflicts_total';
/** Gauge of conversations suspended in the store, by `orchestrator` (read from the store at scrape time). */
export const METRIC_CONVERSATIONS_SUSPENDED = 'orchestrator_conversations_suspended';
/** Gauge of the age (seconds) of the oldest suspended conversation, by `orchestrator` (read at scrape time). */
export const METRIC_OLDEST_SUSPENDED = 'orchestrator_oldest_suspended_seconds';
/**
 * Gauge of conversations the store has running whose lease no worker holds (expired or never
 * taken): the recovery backlog, by `orchestrator` (read from the store at scrape time).
 */
export const METRIC_CONVERSATIONS_UNLEASED = 'orchestrator_conversations_unleased';
/**
 * Counter of scrape-time store reads (`store.stats()`) that failed or did not answer in time, by
 * `store` and `reason` (one of {@link STORE_READ_FAILURE_REASONS}).
 */
export const METRIC_STORE_READ_FAILURES = 'orchestrator_store_read_failures_total';
/**
 * Gauge, by `store`: 1 when the last scrape-time read of the store answered in time, 0 when it
 * failed or did not answer within `timeoutMs` (that scrape has no store gauge series).
 */
export const METRIC_STORE_UP = 'orchestrator_store_up';
/**
 * The `reason` values of `orchestrator_store_read_failures_total`: `timeout` (the store did not
 * answer within `timeoutMs`, or had not yet answered an earlier scrape's read), `error` (it failed).
 */
export const STORE_READ_FAILURE_REASONS = ['timeout', 'error'] as const;
/** Histogram of how long a BullMQ job waited before a worker took it (seconds), by `queue`. */
export const METRIC_QUEUE_JOB_WAIT = 'orchestrator_queue_job_wait_seconds';
/** Gauge of the age (seconds) of the oldest job waiting in a BullMQ queue, by `queue` (read at scrape time). */
export const METRIC_QUEUE_OLDEST_WAITING = 'orchestrator_queue_oldest_waiting_seconds';
/** Counter of BullMQ jobs a worker found stalled (BullMQ's `stalled` event), by `queue`. */
export const METRIC_QUEUE_JOBS_STALLED = 'orchestrator_queue_jobs_stalled_total';

// --- The same metrics through the OpenTelemetry metrics API (`meterProvider`) ---
// Each `orchestrator_*` metric above has an OpenTelemetry name: the Prometheus name with dots,
// without the `_total` and unit suffixes, its unit in UCUM (metric-definitions.ts pairs them and
// holds units, buckets and labels for both). Exported to Prometheus with the usual translation
// (dots to `_`, `_total` on counters, the unit's suffix) each becomes its Prometheus name again.
/** `orchestrator_conversations_started_total`, `{conversation}`. */
export const OTEL_METRIC_CONVERSATIONS_STARTED = 'orchestrator.conversations.started';
/** `orchestrator_conversations_ended_total`, `{conversation}`. */
export const OTEL_METRIC_CONVERSATIONS_ENDED = 'orchestrator.conversations.ended';
/** `orchestrator_conversations_in_progress`, an up-down counter, `{conversation}`. */
export const OTEL_METRIC_CONVERSATIONS_IN_PROGRESS = 'orchestrator.conversations.in_progress';
/** `orchestrator_conversation_duration_seconds`, `s`. */
export const OTEL_METRIC_CONVERSATION_DURATION = 'orchestrator.conversation.duration';
/** `orchestrator_conversation_dispatches`, `{dispatch}`. */
export const OTEL_METRIC_CONVERSATION_DISPATCHES = 'orchestrator.conversation.dispatches';
/** `orchestrator_dispatches_total`, `{dispatch}`. */
export const OTEL_METRIC_DISPATCHES = 'orchestrator.dispatches';
/** `orchestrator_dispatch_duration_seconds`, `s`. */
export const OTEL_METRIC_DISPATCH_DURATION = 'orchestrator.dispatch.duration';
/** `orchestrator_responder_errors_total`, `{error}`. */
export const OTEL_METRIC_RESPONDER_ERRORS = 'orchestrator.responder.errors';
/** `orchestrator_responder_deadlines_total`, `{conversation}`. */
export const OTEL_METRIC_RESPONDER_DEADLINES = 'orchestrator.responder.deadlines';
/** `orchestrator_listener_errors_total`, `{error}`. */
export const OTEL_METRIC_LISTENER_ERRORS = 'orchestrator.listener.errors';
/** `orchestrator_tokens_total`, `{token}`. */
export const OTEL_METRIC_TOKENS = 'orchestrator.tokens';
/** `orchestrator_conversation_tokens`, `{token}`. */
export const OTEL_METRIC_CONVERSATION_TOKENS = 'orchestrator.conversation.tokens';
/** `orchestrator_responder_reinvocations_total`, `{invocation}`. */
export const OTEL_METRIC_RESPONDER_REINVOCATIONS = 'orchestrator.responder.reinvocations';
/** `orchestrator_conversations_resumed_total`, `{conversation}`. */
export const OTEL_METRIC_CONVERSATIONS_RESUMED = 'orchestrator.conversations.resumed';
/** `orchestrator_checkpoint_duration_seconds`, `s`. */
export const OTEL_METRIC_CHECKPOINT_DURATION = 'orchestrator.checkpoint.duration';
/** `orchestrator_checkpoint_failures_total`, `{checkpoint}`. */
export const OTEL_METRIC_CHECKPOINT_FAILURES = 'orchestrator.checkpoint.failures';
/** `orchestrator_checkpoint_size_bytes`, `By`. */
export const OTEL_METRIC_CHECKPOINT_SIZE = 'orchestrator.checkpoint.size';
/** `orchestrator_checkpoint_snapshot_duration_seconds`, `s`. */
export const OTEL_METRIC_CHECKPOINT_SNAPSHOT_DURATION = 'orchestrator.checkpoint.snapshot.duration';
/** `orchestrator_checkpoint_snapshot_failures_total`, `{snapshot}`. */
export const OTEL_METRIC_CHECKPOINT_SNAPSHOT_FAILURES = 'orchestrator.checkpoint.snapshot.failures';
/** `orchestrator_lease_conflicts_total`, `{conflict}`. */
export const OTEL_METRIC_LEASE_CONFLICTS = 'orchestrator.lease.conflicts';

// --- GenAI metrics (semantic-conventions-genai, pinned: docs/telemetry.md), OpenTelemetry only ---
/** Histogram (`s`) of one conversation segment: its `invoke_workflow` span's duration. */
export const GEN_AI_METRIC_INVOKE_WORKFLOW_DURATION = 'gen_ai.invoke_workflow.duration';
/** Histogram (`s`) of one responder invocation, failed ones with `error.type`. */
export const GEN_AI_METRIC_INVOKE_AGENT_DURATION = 'gen_ai.invoke_agent.duration';
/**
 * Histogram (`{inference_call}`) of the usage reports of one responder invocation that made any
 * (one `context.reportUsage` per model call).
 */
export const GEN_AI_METRIC_INVOKE_AGENT_INFERENCE_CALLS = 'gen_ai.invoke_agent.inference_calls';
/** Counter (`{token}`) of the input tokens responders reported. */
export const GEN_AI_METRIC_USAGE_INPUT_TOKENS = 'gen_ai.client.inference.usage.input_tokens';
/** Counter (`{token}`) of the output tokens responders reported. */
export const GEN_AI_METRIC_USAGE_OUTPUT_TOKENS = 'gen_ai.client.inference.usage.output_tokens';
/** Counter (`{token}`) of the cached input tokens responders reported (part of the input). */
export const GEN_AI_METRIC_USAGE_CACHE_READ_INPUT_TOKENS =
  'gen_ai.client.inference.usage.cache_read.input_tokens';
/** Counter (`{token}`) of the reasoning output tokens responders reported (part of the output). */
export const GEN_AI_METRIC_USAGE_REASONING_OUTPUT_TOKENS =
  'gen_ai.client.inference.usage.reasoning.output_tokens';
/** The attribute of the usage counters saying what kind of tokens they count (required). */
export const OTEL_ATTR_GEN_AI_TOKEN_MODALITY = 'gen_ai.token.modality';
/** `gen_ai.token.modality` of reported usage: a report says no modality. */
export const GEN_AI_TOKEN_MODALITY_UNKNOWN = 'unknown';
/**
 * `gen_ai.operation.name` of the usage counters: the model calls a responder reports are counted
 * as chat completions (a report does not say which operation it was).
 */
export const GEN_AI_OPERATION_CHAT = 'chat';

// --- BullMQ's own metrics (`queue.exportPrometheusMetrics()`), exposed beside the plugin's ---
/** Gauge of jobs by `queue` and `state` (`waiting`, `active`, `delayed`, `failed`, `completed`, `prioritized`, `waiting-children`). */
export const BULLMQ_METRIC_JOB_COUNT = 'bullmq_job_count';
/** Counter of completed jobs, by `queue`. */
export const BULLMQ_METRIC_JOBS_COMPLETED = 'bullmq_job_completed_total';
/** Counter of failed jobs, by `queue`. */
export const BULLMQ_METRIC_JOBS_FAILED = 'bullmq_job_failed_total';

// --- Metric labels ---
/** The metric label holding the orchestrator's `name`. */
export const LABEL_ORCHESTRATOR = 'orchestrator';
/** The metric label holding a responder's `name`. */
export const LABEL_RESPONDER = 'responder';
/** The metric label holding a conversation's ending reason. */
export const LABEL_REASON = 'reason';
/** The metric label holding what a checkpoint write stored: `whole`, `entry` or `snapshot`. */
export const LABEL_CHECKPOINT_KIND = 'kind';
/** The model label of `orchestrator_tokens_total` (bounded by `maxModels`). */
export const LABEL_MODEL = 'model';
/** The token type label: the GenAI `gen_ai.token.type` values. */
export const LABEL_TOKEN_TYPE = 'type';
/** `type` of input tokens. */
export const TOKEN_TYPE_INPUT = 'input';
/** `type` of output tokens. */
export const TOKEN_TYPE_OUTPUT = 'output';
/** The `model` label of tokens reported without a model (an empty value: no label in PromQL). */
export const MODEL_NONE = '';
/**
 * The `responder` label of tokens the turn policy reported (an LLM picking the next speaker).
 * Like the overflow value it starts with `~`, so it never collides with a responder's name.
 */
export const TURN_POLICY_LABEL_VALUE = '~turn_policy';
/** The sampler's decision: `keep` or `drop`. */
export const LABEL_DECISION = 'decision';
/** The sampler rule that made a decision (one of the `SAMPLER_RULE_*` values). */
export const LABEL_RULE = 'rule';
/** Which bound a lost span hit: `trace` (`maxSpansPerTrace`) or `total` (`maxBufferedSpans`). */
export const LABEL_LIMIT = 'limit';
/** The exemplar label carrying the trace id (Grafana's Prometheus datasource links it to Jaeger). */
export const EXEMPLAR_TRACE_ID = 'trace_id';

/** The label of the durable metrics naming the store (`memory`, `sqlite`, `postgres`, `redis`, or the store's own name). */
export const LABEL_STORE = 'store';
/** Why a conversation resumed: `crash`, `abort`, `suspend` or `handoff` (a `cancel()` is not a resume). */
export const LABEL_CAUSE = 'cause';
/** The BullMQ queue's name. */
export const LABEL_QUEUE = 'queue';
/** BullMQ's job state label (`bullmq_job_count`). */
export const LABEL_STATE = 'state';

/** The value a reason label takes past the cap on distinct user reasons. */
export const REASON_OTHER = 'other';
/**
 * The value an `orchestrator`, `responder` or `model` label takes past its cardinality cap
 * (`maxOrchestrators`, `maxResponders`, `maxModels`). It starts with `~`, which no valid name can
 * (names start with a letter, a digit or `_`), so it never collides with one.
 */
export const OVERFLOW_LABEL_VALUE = '~overflow';

// --- Sampler decisions and rules (label values of orchestrator_sampler_decisions_total) ---
/** The `decision` label of a kept trace. */
export const SAMPLER_DECISION_KEEP = 'keep';
/** The `decision` label of a dropped trace. */
export const SAMPLER_DECISION_DROP = 'drop';
/** The conversation failed: `error`, `deadline`, `queue_overflow` (status ERROR). */
export const SAMPLER_RULE_FAILED = 'failed';
/** Its end reason is one of `keepReasons`. */
export const SAMPLER_RULE_REASON = 'reason';
/** It ran longer than `slowMs`. */
export const SAMPLER_RULE_SLOW = 'slow';
/** It made more dispatches than `longDispatches`. */
export const SAMPLER_RULE_LONG = 'long';
/** The deterministic share `ratio` of the rest, by trace id (keep or drop). */
export const SAMPLER_RULE_RATIO = 'ratio';
/** A conversation span without `conversation.end.reason` (not this plugin's): kept. */
export const SAMPLER_RULE_UNCLASSIFIED = 'unclassified';
/** An earlier segment of the same durable conversation was kept (carried in its checkpoint). */
export const SAMPLER_RULE_SEGMENT = 'segment';
/** Still running after `maxDecisionDelayMs`: kept early. */
export const SAMPLER_RULE_MAX_AGE = 'max_age';
/** Still running at `forceFlush()`: kept. */
export const SAMPLER_RULE_FORCE_FLUSH = 'force_flush';
/** Still running at `shutdown()`: kept. */
export const SAMPLER_RULE_SHUTDOWN = 'shutdown';
/** The `limit` label (of orchestrator_sampler_spans_lost_total) of spans lost to `maxSpansPerTrace`. */
export const SAMPLER_LIMIT_TRACE = 'trace';
/** The `limit` label of spans lost to `maxBufferedSpans` (all traces together). */
export const SAMPLER_LIMIT_TOTAL = 'total';

/** Environment variable that switches content capture on (`true`). */
export const ENV_CAPTURE_CONTENT = 'OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT';

/** The instrumentation scope (tracer): the package's name and version, generated from package.json. */
export { PACKAGE_NAME as TRACER_NAME, PACKAGE_VERSION as TRACER_VERSION } from './version.ts';
