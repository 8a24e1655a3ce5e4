/** Options of `createConversationTelemetry()`. */
import type {
  Attributes,
  DiagLogger,
  MeterProvider,
  Tracer,
  TracerProvider,
} from '@opentelemetry/api';
import type { ConversationState } from '../core/spi/types.ts';
import type { PrometheusRegistry } from './registry.ts';

/**
 * What `createConversationTelemetry(options)` takes; every option is optional. `S` and `C` type
 * the state `stateAttributes` receives.
 */
export interface TelemetryOptions<S = unknown, C = unknown> {
  /**
   * The prom-client registry the metrics are registered on (any prom-client 15 copy: it is
   * recognised by its shape). Never the global default registry unless that is what you pass.
   * Without it, no metrics are recorded and prom-client need not be installed.
   * @default undefined (no metrics)
   */
  readonly registry?: PrometheusRegistry;
  /**
   * Records the metrics through the OpenTelemetry metrics API too (or instead, without a
   * `registry`): the same definitions and values under OpenTelemetry names with UCUM units,
   * plus the GenAI conventions' agent, workflow and usage metrics (`genAiMetrics`). `'global'`
   * takes the provider registered with `metrics.setGlobalMeterProvider()` (`NodeSDK.start()`
   * does it) when the telemetry is created: start the SDK first. Telemetries sharing a registry
   * share one provider; see docs/telemetry.md, "OpenTelemetry metrics".
   * @default undefined (no OpenTelemetry metrics)
   * @example createConversationTelemetry({ meterProvider: 'global' })
   */
  readonly meterProvider?: MeterProvider | 'global';
  /**
   * With `meterProvider`: the GenAI conventions' metrics (`gen_ai.invoke_agent.duration`,
   * `gen_ai.invoke_workflow.duration`, `gen_ai.invoke_agent.inference_calls`, the
   * `gen_ai.client.inference.usage.*` counters) beside the `orchestrator.*` ones. The agent
   * duration is one more histogram recorded per responder invocation.
   * @default true
   */
  readonly genAiMetrics?: boolean;
  /**
   * The tracer. Takes precedence over `tracerProvider`.
   * @default the global tracer provider's tracer named and versioned after this package
   */
  readonly tracer?: Tracer;
  /**
   * Where the tracer comes from when `tracer` is not given.
   * @default the global tracer provider (`trace.getTracerProvider()`)
   */
  readonly tracerProvider?: TracerProvider;
  /**
   * Attributes of the state added to every dispatch event (the spread of the desks' quotes, say).
   * Called once per dispatch while the span is recording; keep it cheap and the values small.
   * The returned values are copied at once, so reusing one object between calls is safe; at most
   * the span's event attribute limit (the SDK's `attributePerEventCountLimit`, default 128) less
   * the 11 attributes the plugin may write itself is copied (117 by default), a key whose read
   * throws is left out, and a key named like one of the plugin's own (`conversation.dispatch.count`,
   * `gen_ai.agent.name` …) is left out, the clash reported once per name through `logger`.
   * @default undefined (none)
   * @example (state) => ({ 'desks.spread': spread(state.projection) })
   */
  readonly stateAttributes?: (state: ConversationState<S, C>) => Attributes;
  /**
   * Record message content (the input on the conversation span, each new message on its dispatch
   * event), serialised (JSON for non-strings) within `maxContentLength`; a content that cannot be
   * read becomes `[unserialisable content: <class>]`. Conversations can hold secrets, prices and personal
   * data: off unless you opt in.
   * @default process.env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT === 'true'
   */
  readonly captureContent?: boolean;
  /**
   * Length of recorded content in UTF-16 code units (JavaScript string length, not characters);
   * longer content is cut and ends with `…`. A cut never splits a surrogate pair.
   * @default 1024
   */
  readonly maxContentLength?: number;
  /**
   * Dispatch events kept per conversation span: the first half and the last half of the
   * dispatches. The span's `conversation.dispatch_events.dropped` says how many were left out.
   * Keep it at or below the SDK's span event limit (`spanLimits.eventCountLimit`, default 128).
   * @default 128
   */
  readonly maxDispatchEvents?: number;
  /**
   * A child span `invoke_agent {responder}` per responder invocation, with the responder running
   * in its context so spans it starts (an HTTP call to a model) nest under it. Costs ~3 µs per
   * dispatch: worth it for LLM agents, ten times a fast algorithmic agent's whole dispatch.
   * @default false
   */
  readonly responderSpans?: boolean;
  /**
   * Attach the trace id as an exemplar to the histograms. Needs an OpenMetrics registry
   * (`registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE)`) set before the telemetry is
   * created.
   * @default true when the registry speaks OpenMetrics
   */
  readonly exemplars?: boolean;
  /**
   * Bucket upper bounds, in seconds, of `orchestrator_dispatch_duration_seconds`.
   * @default 1 µs ... 60 s (19 buckets)
   */
  readonly dispatchDurationBuckets?: readonly number[];
  /**
   * Bucket upper bounds, in seconds, of `orchestrator_conversation_duration_seconds`.
   * @default 100 µs ... 600 s (17 buckets)
   */
  readonly conversationDurationBuckets?: readonly number[];
  /**
   * Bucket upper bounds of `orchestrator_conversation_dispatches`.
   * @default 1 ... 1,000,000 (15 buckets)
   */
  readonly conversationDispatchBuckets?: readonly number[];
  /**
   * Bucket upper bounds, in tokens, of `orchestrator_conversation_tokens`.
   * @default 100 ... 10,000,000 (15 buckets)
   */
  readonly conversationTokenBuckets?: readonly number[];
  /**
   * Distinct user-named reasons kept as label values; past it a new reason becomes `other`, and
   * a warning names the cap, once.
   * @default 20
   */
  readonly maxReasons?: number;
  /**
   * Distinct orchestrator names with series of their own on the registry (one per tenant, say).
   * Past it, conversations of a new name are counted exactly under
   * `orchestrator="~overflow"` (`semconv.OVERFLOW_LABEL_VALUE`) and a warning names the cap,
   * once. `releaseOrchestrator(name)` frees a place.
   * @default 200
   */
  readonly maxOrchestrators?: number;
  /**
   * Distinct responder label values per orchestrator. A responder's series are created at its
   * first dispatch (or failure); past the cap, new responders are counted under
   * `responder="~overflow"`, with a warning once.
   * @default 100
   */
  readonly maxResponders?: number;
  /**
   * Distinct `model` label values of `orchestrator_tokens_total` on the registry; past it, tokens
   * of a new model are counted under `model="~overflow"`, with a warning once.
   * @default 50
   */
  readonly maxModels?: number;
  /**
   * `gen_ai.provider.name` of a responder that declares no `provider`: on its `invoke_agent` span
   * (kept for existing users until 0.3.0; the pinned conventions dropped it there) and on the
   * GenAI usage counters (they require it). A name like the responders' (1-64 letters, digits,
   * `_`, `.`, `:` or `-`).
   * @default '_OTHER'
   */
  readonly defaultProviderName?: string;
  /**
   * Where values that cannot be read (content, `stateAttributes` results, thrown values; each
   * kind rate-limited on its own: the first at once, then one line per 10 s with the count) and
   * settings that a shared registry cannot honour are reported. They never break a run.
   * @default diag (the OpenTelemetry diagnostics logger)
   */
  readonly logger?: DiagLogger;
}
