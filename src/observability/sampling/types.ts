/**
 * Options of `createConversationSampler()` and the span-processor shape it speaks. The shapes are
 * structural (what the OpenTelemetry SDK's `SpanProcessor`, `Span` and `ReadableSpan` have), so
 * the plugin needs no SDK package: an SDK 2.x `BatchSpanProcessor` is a `SpanProcessorLike`, and
 * the sampler is an SDK `SpanProcessor`.
 */
import type {
  Attributes,
  AttributeValue,
  Context,
  DiagLogger,
  SpanContext,
  SpanStatus,
} from '@opentelemetry/api';
import type { PrometheusRegistry } from '../registry.ts';

/** What the sampler reads of an ended span (the SDK's `ReadableSpan` has it). */
export interface SampledSpan {
  /** The span's name (`invoke_workflow {orchestrator}` for a conversation). */
  readonly name: string;
  /** Its trace and span ids. */
  spanContext(): SpanContext;
  /** Its attributes (the conversation span's end reason, elapsed time, dispatch count). */
  readonly attributes: Attributes;
  /** Its status (ERROR for a failed conversation). */
  readonly status: SpanStatus;
}

/** A span as it starts (the SDK's `Span`): readable and still writable. */
export interface StartedSpan extends SampledSpan {
  /** Sets one attribute (the sampler marks the rule that kept a conversation). */
  setAttribute(key: string, value: AttributeValue): unknown;
}

/** An OpenTelemetry SDK span processor (`BatchSpanProcessor`, `SimpleSpanProcessor`, ...). */
export interface SpanProcessorLike {
  /** A span started. */
  onStart(span: StartedSpan, parentContext: Context): void;
  /** SDK 2.x: called while an ending span can still be written. */
  onEnding?(span: StartedSpan): void;
  /** A span ended. */
  onEnd(span: SampledSpan): void;
  /** Exports what is waiting. */
  forceFlush(): Promise<void>;
  /** Flushes and stops. */
  shutdown(): Promise<void>;
}

/** What `createConversationSampler(options)` takes: only `next` is required. */
export interface ConversationSamplerOptions {
  /**
   * The processor that exports (a `BatchSpanProcessor` around your exporter): kept traces' spans
   * go to it, dropped ones' never do. Register the sampler in its place.
   * @example new BatchSpanProcessor(new OTLPTraceExporter())
   */
  readonly next: SpanProcessorLike;
  /**
   * The share of the other conversations (neither failed, nor with a kept reason, nor slow, nor
   * long) kept, chosen by trace id so that every process of a fleet keeps the same traces.
   * From 0 (none) to 1 (all).
   * @default 0.1
   */
  readonly ratio?: number;
  /**
   * End reasons whose conversations are always kept (failures, `error`, `deadline` and
   * `queue_overflow`, always are). Given, exactly these; user-named reasons count too.
   * @default every reason except `converged` and `queue_exhausted`
   * @example ['max_dispatches', 'timeout']
   */
  readonly keepReasons?: readonly string[];
  /**
   * Keep every conversation whose elapsed time (`conversation.elapsed_ms`) is above this.
   * @default undefined (no rule)
   */
  readonly slowMs?: number;
  /**
   * Keep every conversation with more dispatches (`conversation.dispatch_count`) than this.
   * @default undefined (no rule)
   */
  readonly longDispatches?: number;
  /**
   * Spans buffered for one trace while its conversation runs; later ones are lost and counted
   * (`orchestrator_sampler_spans_lost_total{limit="trace"}`, `conversation.sampler.spans_lost`).
   * The conversation span that decides its trace (the last of it to end) is never lost; one
   * that ends while another conversation of its trace runs (nested) counts like any span.
   * @default 1000
   */
  readonly maxSpansPerTrace?: number;
  /**
   * Spans buffered for all traces together; past it a span is lost and counted
   * (`orchestrator_sampler_spans_lost_total{limit="total"}`). Bounds the sampler's memory.
   * @default 20000
   */
  readonly maxBufferedSpans?: number;
  /**
   * How long a conversation may run before its trace is decided early: kept, its spans so far
   * exported, later ones following, and its conversation span marked
   * `conversation.sampler.rule = max_age`.
   * @default 300000 (5 minutes)
   */
  readonly maxDecisionDelayMs?: number;
  /**
   * Decisions remembered after a conversation ends, so that spans of its trace ending later (the
   * caller's server span, a late child) follow it. The oldest is forgotten first; a span of a
   * forgotten trace passes straight through, as one of a trace without a conversation does.
   * A trace kept while a conversation of it runs (decided early) is held apart until it ends, at
   * most this many such traces too (past it the oldest joins the remembered decisions).
   * @default 10000
   */
  readonly maxDecisions?: number;
  /**
   * The prom-client registry of the telemetry: the decision counters go on it. (Its exemplars
   * are gated by an export tracker on it, `createExportTracker`: a keep is not a delivery.)
   * @default undefined (no metrics)
   */
  readonly registry?: PrometheusRegistry;
  /**
   * Where a failing `next` (it throws) is reported, rate-limited; it never breaks a span's end.
   * @default diag (the OpenTelemetry diagnostics logger)
   */
  readonly logger?: DiagLogger;
}
