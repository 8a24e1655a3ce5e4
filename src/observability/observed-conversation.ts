/**
 * One observed conversation: its span, its kept dispatch events and its metric records. The
 * orchestrator calls these hooks; `onDispatch` is the hot path and is picked per conversation
 * for what it records (metrics only, or span events too).
 */
import {
  type Attributes,
  type Context,
  context,
  isSpanContextValid,
  isValidSpanId,
  isValidTraceId,
  type Link,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import { DispatchDeadlineError, ResponderError } from '../core/spi/errors.ts';
import type {
  ConversationEnd,
  ConversationObservation,
  ConversationStart,
  DispatchInfo,
} from '../core/spi/observer.ts';
import type { ConversationState, Message, Usage } from '../core/spi/types.ts';
import { DispatchEvents } from './dispatch-events.ts';
import type { HistogramSeries } from './dispatch-histogram.ts';
import { type ExemplarFilter, exemplarDeferOf, exemplarFilterOf } from './exemplar-filter.ts';
import {
  addExplanation,
  errorMessage,
  errorType,
  exceptionRecord,
  messageContent,
  stateAttributeRoom,
} from './guard.ts';
import type { OrchestratorRecord, ResponderSlots } from './metrics.ts';
import { keptBySampler } from './sampling/kept-spans.ts';
import {
  ATTR_CONVERSATION_ABORT_REASON,
  ATTR_CONVERSATION_DISPATCH_COUNT,
  ATTR_CONVERSATION_ELAPSED_MS,
  ATTR_CONVERSATION_END_LIMIT,
  ATTR_CONVERSATION_END_OBSERVED,
  ATTR_CONVERSATION_END_POLICY,
  ATTR_CONVERSATION_END_REASON,
  ATTR_CONVERSATION_ENDED,
  ATTR_CONVERSATION_EVENTS_DROPPED,
  ATTR_CONVERSATION_INPUT_CONTENT,
  ATTR_CONVERSATION_RESPONDERS,
  ATTR_CONVERSATION_RESUME_CAUSE,
  ATTR_CONVERSATION_RESUME_DISPATCHES_LOST,
  ATTR_CONVERSATION_SAMPLER_RULE,
  ATTR_CONVERSATION_SEGMENT,
  ATTR_CONVERSATION_USAGE_INPUT_TOKENS,
  ATTR_CONVERSATION_USAGE_OUTPUT_TOKENS,
  ATTR_DECISION_LIMIT,
  ATTR_DECISION_OBSERVED,
  ATTR_DECISION_REASON,
  ATTR_DECISION_TERMINATE,
  ATTR_DISPATCH_CONTENT,
  ATTR_DISPATCH_COUNT,
  ATTR_DISPATCH_DURATION_MS,
  ATTR_DISPATCH_ELAPSED_MS,
  ATTR_DISPATCH_USAGE_INPUT_TOKENS,
  ATTR_DISPATCH_USAGE_OUTPUT_TOKENS,
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_CONVERSATION_ID,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
  ATTR_GEN_AI_WORKFLOW_NAME,
  ATTR_RESPONDER_DISPATCH_NUMBER,
  END_REASON_SUSPENDED,
  EVENT_DISPATCH,
  GEN_AI_OPERATION_INVOKE_AGENT,
  GEN_AI_OPERATION_INVOKE_WORKFLOW,
  SAMPLER_RULE_SEGMENT,
  SPAN_CONVERSATION_PREFIX,
  SPAN_RESPONDER_PREFIX,
} from './semconv.ts';
import { contextWithSpan } from './span-context.ts';
import { type Settings, safeAttributes } from './utils.ts';

/** A responder span not yet ended, and whether it has been (a late answer must not end it again). */
interface OpenSpan {
  readonly span: Span;
  readonly index: number;
  /** The dispatch the invocation would be: usage reports name it. */
  readonly dispatchNumber: number;
  ended: boolean;
  /** What the invocation reported so far (`onUsage`), summed; the model of the last report. */
  usage: InvocationUsage | undefined;
}

interface InvocationUsage {
  input: number;
  output: number;
  cacheRead: number | undefined;
  reasoning: number | undefined;
  model: string | undefined;
}

/** The `gen_ai.usage.*` and `gen_ai.request.model` attributes of an invocation's reports. */
function usageAttributes(usage: InvocationUsage): Attributes {
  const attributes: Attributes = {
    [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: usage.input,
    [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: usage.output,
  };
  if (usage.cacheRead !== undefined) {
    attributes[ATTR_GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS] = usage.cacheRead;
  }
  if (usage.reasoning !== undefined) {
    attributes[ATTR_GEN_AI_USAGE_REASONING_OUTPUT_TOKENS] = usage.reasoning;
  }
  if (usage.model !== undefined) attributes[ATTR_GEN_AI_REQUEST_MODEL] = usage.model;
  return attributes;
}

/**
 * Ends a responder span once, at `timeMs`, marking it failed when `failure` is given (`type`
 * overrides its `error.type`: the ending's reason when the conversation ended first).
 */
function endOnce(
  open: OpenSpan,
  timeMs: number,
  report: (error: unknown) => void,
  failure?: { readonly error: unknown },
  type?: string,
): void {
  if (open.ended) return;
  open.ended = true;
  const span = open.span;
  if (open.usage !== undefined) span.setAttributes(usageAttributes(open.usage));
  if (failure !== undefined) {
    const { error } = failure;
    span.recordException(exceptionRecord(error, report), timeMs);
    span.setAttribute(ATTR_ERROR_TYPE, type ?? errorType(error));
    span.setStatus({ code: SpanStatusCode.ERROR, message: errorMessage(error) });
  }
  span.end(timeMs);
}

/**
 * What the telemetry keeps in each checkpoint of a durable conversation (`save()`, under the key
 * `telemetry`), and reads back when it resumes. JSON-safe; every field is checked on the way in.
 */
export interface SavedTelemetry {
  readonly v: 1;
  /** The conversation's trace id (absent without a recording tracer). */
  readonly traceId?: string;
  /**
   * The span every segment starts under: the parent span active at the first `run()`, or, when
   * there was none, the first segment's own span (the trace's root).
   */
  readonly parentSpanId?: string;
  readonly parentFlags?: number;
  readonly parentRemote?: boolean;
  /** The span of the segment that made the checkpoint: the next segment links to it. */
  readonly spanId?: string;
  readonly spanFlags?: number;
  /**
   * Dispatches accounted for by segment spans that ended: on a span event, or counted in
   * `conversation.dispatch_events.dropped`. A segment resumed after a crash says the rest of the
   * committed ones were lost (`conversation.resume.dispatches_lost`).
   */
  readonly accounted: number;
  /** A sampler had kept the conversation's trace by then: every later segment is kept. */
  readonly kept?: true;
  /** Some invocation reported usage by then (the token histogram observes the conversation). */
  readonly usage?: true;
}

function flagsOf(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 255
    ? value
    : undefined;
}

/** `saved` if it is telemetry data this version can read, its fields checked; else undefined. */
function readSaved(saved: unknown): SavedTelemetry | undefined {
  if (typeof saved !== 'object' || saved === null) return undefined;
  const data = saved as Record<string, unknown>;
  if (data.v !== 1) return undefined;
  const accounted =
    typeof data.accounted === 'number' && Number.isInteger(data.accounted) && data.accounted >= 0
      ? data.accounted
      : 0;
  const result: { -readonly [K in keyof SavedTelemetry]: SavedTelemetry[K] } = { v: 1, accounted };
  const parentFlags = flagsOf(data.parentFlags);
  if (
    typeof data.traceId === 'string' &&
    isValidTraceId(data.traceId) &&
    typeof data.parentSpanId === 'string' &&
    isValidSpanId(data.parentSpanId) &&
    parentFlags !== undefined
  ) {
    result.traceId = data.traceId;
    result.parentSpanId = data.parentSpanId;
    result.parentFlags = parentFlags;
    result.parentRemote = data.parentRemote === true;
    const spanFlags = flagsOf(data.spanFlags);
    if (typeof data.spanId === 'string' && isValidSpanId(data.spanId) && spanFlags !== undefined) {
      result.spanId = data.spanId;
      result.spanFlags = spanFlags;
    }
  }
  if (data.kept === true) result.kept = true;
  if (data.usage === true) result.usage = true;
  return result;
}

/** The non-negative finite number `value`, or 0. */
function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
}

/**
 * The trace context a segment saves: the saved one's parent when this segment continues that
 * trace; else the parent active at the start (when in the same trace), or the span itself (a root).
 */
function savedTrace(
  own: SpanContext,
  saved: SavedTelemetry | undefined,
  parent: Context,
): Omit<SavedTelemetry, 'v' | 'accounted' | 'kept' | 'usage'> {
  let parentSpanId = own.spanId;
  let parentFlags = own.traceFlags;
  let parentRemote = false;
  if (saved?.traceId === own.traceId) {
    parentSpanId = saved.parentSpanId as string;
    parentFlags = saved.parentFlags as number;
    parentRemote = saved.parentRemote === true;
  } else {
    const active = trace.getSpanContext(parent);
    if (active !== undefined && isSpanContextValid(active) && active.traceId === own.traceId) {
      parentSpanId = active.spanId;
      parentFlags = active.traceFlags;
      parentRemote = active.isRemote === true;
    }
  }
  return {
    traceId: own.traceId,
    parentSpanId,
    parentFlags,
    parentRemote,
    spanId: own.spanId,
    spanFlags: own.traceFlags,
  };
}

export class ObservedConversation<S, C> implements ConversationObservation<S, C> {
  readonly #settings: Settings<S, C>;
  readonly #orchestrator: string;
  readonly #responders: readonly string[];
  readonly #conversationId: string;
  readonly #providers: readonly (string | undefined)[] | undefined;
  readonly #startTimeMs: number;
  /**
   * `#startTimeMs` less the active time committed before this segment: the elapsed times the
   * core reports count from the conversation's start, so an event at elapsed `e` is stamped
   * `#clockBase + e` (the same as `#startTimeMs + e` for a first segment).
   */
  readonly #clockBase: number;
  /** Dispatches committed before this segment (0 for a first segment). */
  readonly #dispatchBase: number;
  /** The store's name, for a durable conversation (one that may have segments). */
  readonly #store: string | undefined;
  /** What this segment saves of the trace in checkpoints (durable, with a valid span context). */
  readonly #savedTrace: Omit<SavedTelemetry, 'v' | 'accounted' | 'kept' | 'usage'> | undefined;
  /** `SavedTelemetry.accounted` for this segment's checkpoints. */
  readonly #accounted: number;
  /** A sampler kept the trace (known from an earlier segment, or asked at a commit). */
  #kept: boolean;
  /** An earlier segment reported usage. */
  readonly #usageBefore: boolean;
  /**
   * Durable conversations with metrics: dispatches heard but not yet in a landed commit, per
   * responder. `orchestrator_dispatches_total` counts a dispatch when the commit storing it
   * lands, so a dispatch re-run after a crash is counted once, by the process that stored it.
   */
  readonly #pending: number[] | undefined;
  /** Dispatches in the commit under way (moved from `#pending` by `save()`). */
  readonly #committing: number[] | undefined;
  /** The counts the last landed commit added, while a refusal may still follow in the same turn. */
  #justFlushed: number[] | undefined;
  /** `performance.now()` at the start: every time the plugin writes is `#startTimeMs` + elapsed. */
  readonly #startPerfMs: number;
  /**
   * The latest time written on a responder span: the conversation span ends no earlier, so a
   * child never ends after its parent whatever the rounding of two clock reads.
   */
  #latestChildMs: number;
  /** The event attribute limit in force, when state attributes are kept. */
  readonly #attributeLimit: number;
  readonly #span: Span;
  /** The context with the conversation span active: entered once, by `runConversation`. */
  readonly #context: Context;
  readonly #events: DispatchEvents | undefined;
  /** State attributes or content are kept per dispatch. */
  readonly #withExtras: boolean;
  /** The responders' records, filled at each one's first dispatch (shared by the orchestrator). */
  readonly #slots: ResponderSlots | undefined;
  /** `#slots.durations`, one hop less per dispatch. */
  readonly #durations: (HistogramSeries | undefined)[] | undefined;
  readonly #metricsRecord: OrchestratorRecord | undefined;
  /** Set when exemplars are on and the trace is sampled. */
  readonly #traceId: string | undefined;
  /**
   * The trace id the hot path writes as dispatch exemplars: `#traceId`, unless a conversation
   * sampler filters the registry's exemplars. Then nothing is written before the trace is decided,
   * and a kept trace's exemplars are written at the end from its kept dispatches.
   */
  readonly #dispatchTraceId: string | undefined;
  readonly #exemplarFilter: ExemplarFilter | undefined;
  readonly #stateAttributes: ((state: ConversationState<S, C>) => Attributes) | undefined;
  #lastMessage: Message<C> | undefined;
  #openResponderSpan: OpenSpan | undefined;
  /** Set at the first usage report. */
  #reportedUsage = false;
  readonly runResponder: (<T>(index: number, invoke: () => T) => T) | undefined;
  readonly runConversation: (<T>(run: () => T) => T) | undefined;

  constructor(settings: Settings<S, C>, start: ConversationStart<C>) {
    this.#settings = settings;
    this.#orchestrator = start.orchestrator;
    this.#responders = start.responders;
    this.#providers = Array.isArray(start.providers) ? start.providers : undefined;
    this.#conversationId = start.conversationId;
    this.#startTimeMs = start.startTimeMs;
    this.#startPerfMs = start.startTimeMs - performance.timeOrigin;
    this.#latestChildMs = start.startTimeMs;
    const store = typeof start.store === 'string' ? start.store.slice(0, 64) : undefined;
    this.#store = store;
    const resumed = store === undefined ? undefined : start.resumed;
    const saved = resumed === undefined ? undefined : readSaved(resumed.saved);
    this.#dispatchBase = count(resumed?.dispatchCount);
    this.#clockBase = start.startTimeMs - count(resumed?.elapsedMs);
    this.#kept = saved?.kept === true;
    this.#usageBefore = saved?.usage === true;
    // Lost to a crash: what the crashed segments committed and no ended segment span accounts for.
    // After a suspension or a handoff the previous segment ended its span: all is accounted for.
    this.#accounted =
      resumed === undefined
        ? 0
        : resumed.cause === 'crash'
          ? Math.min(saved?.accounted ?? 0, this.#dispatchBase)
          : this.#dispatchBase;
    let parent = context.active();
    let links: Link[] | undefined;
    if (saved?.traceId !== undefined) {
      // The same trace, under the original parent, linked to the previous segment.
      parent = trace.setSpanContext(parent, {
        traceId: saved.traceId,
        spanId: saved.parentSpanId as string,
        traceFlags: saved.parentFlags as number,
        isRemote: saved.parentRemote === true,
      });
      if (saved.spanId !== undefined) {
        links = [
          {
            context: {
              traceId: saved.traceId,
              spanId: saved.spanId,
              traceFlags: saved.spanFlags as number,
            },
          },
        ];
      }
    }
    const attributes: Attributes = {
      [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_INVOKE_WORKFLOW,
      [ATTR_GEN_AI_WORKFLOW_NAME]: start.orchestrator,
      [ATTR_GEN_AI_CONVERSATION_ID]: start.conversationId,
      // The core's array, stable per orchestrator: the SDK keeps it as given.
      [ATTR_CONVERSATION_RESPONDERS]: start.responders as string[],
    };
    if (settings.captureContent) {
      attributes[ATTR_CONVERSATION_INPUT_CONTENT] = messageContent(
        start.input,
        settings.maxContentLength,
        settings.reports.content,
      );
    }
    if (store !== undefined) {
      attributes[ATTR_CONVERSATION_SEGMENT] = resumed === undefined ? 1 : count(resumed.segment);
      if (resumed !== undefined) {
        attributes[ATTR_CONVERSATION_RESUME_CAUSE] = resumed.cause;
        if (resumed.cause === 'crash') {
          attributes[ATTR_CONVERSATION_RESUME_DISPATCHES_LOST] =
            this.#dispatchBase - this.#accounted;
        }
      }
      // Read by the sampler when the span starts: an earlier segment was kept, so is this one.
      if (this.#kept) attributes[ATTR_CONVERSATION_SAMPLER_RULE] = SAMPLER_RULE_SEGMENT;
    }
    this.#span = settings.tracer.startSpan(
      SPAN_CONVERSATION_PREFIX + start.orchestrator,
      links === undefined
        ? { kind: SpanKind.INTERNAL, attributes, startTime: start.startTimeMs }
        : { kind: SpanKind.INTERNAL, attributes, startTime: start.startTimeMs, links },
      parent,
    );
    const recording = this.#span.isRecording();
    const spanContext = this.#span.spanContext();
    this.#savedTrace =
      store === undefined || !isSpanContextValid(spanContext)
        ? undefined
        : savedTrace(spanContext, saved, parent);
    // The conversation span is the active context of everything the conversation runs (turn
    // policy, responders, listener), so spans they start nest under it. With an AsyncLocalStorage
    // context manager, entering it once carries it through every promise continuation and timer
    // of the loop: no per-dispatch `context.with`. Without a tracer provider the span is the
    // parent's own (or invalid), and there is nothing to enter.
    const entered =
      isSpanContextValid(spanContext) &&
      spanContext.spanId !== trace.getSpanContext(parent)?.spanId;
    this.#context = entered ? contextWithSpan(parent, this.#span) : parent;
    const enteredContext = this.#context;
    this.runConversation = entered
      ? <T>(run: () => T): T => context.with(enteredContext, run)
      : undefined;
    this.#withExtras = settings.stateAttributes !== undefined || settings.captureContent;
    this.#events = recording
      ? new DispatchEvents(settings.maxDispatchEvents, this.#withExtras, settings.eventStorage)
      : undefined;
    this.#stateAttributes = recording ? settings.stateAttributes : undefined;
    this.#attributeLimit = this.#stateAttributes === undefined ? 0 : stateAttributeRoom(this.#span);
    this.#lastMessage = start.input;
    this.#traceId =
      settings.exemplars && (spanContext.traceFlags & TraceFlags.SAMPLED) !== 0
        ? spanContext.traceId
        : undefined;
    const metrics = settings.metrics;
    this.#exemplarFilter =
      metrics !== undefined && this.#traceId !== undefined
        ? exemplarFilterOf(metrics.registry)
        : undefined;
    this.#dispatchTraceId = this.#exemplarFilter === undefined ? this.#traceId : undefined;
    if (metrics !== undefined) {
      this.#metricsRecord = metrics.orchestrator(start.orchestrator);
      this.#slots = metrics.slots(this.#metricsRecord, start.responders);
      this.#durations = this.#slots.durations;
      if (store !== undefined) metrics.durable();
      if (resumed === undefined) metrics.conversationStarted(this.#metricsRecord);
      else {
        metrics.segmentStarted(this.#metricsRecord);
        // A cancel resumes nothing: it is counted where endings are (reason `aborted`).
        if (resumed.cause !== 'cancel') metrics.resumed(this.#metricsRecord, resumed.cause);
      }
    } else {
      this.#slots = undefined;
      this.#durations = undefined;
      this.#metricsRecord = undefined;
    }
    // A wrapper around the responder call works detached, as `runConversation` does (a wrapper
    // composing observers may forward it as a value); made only when responder spans are on.
    this.runResponder =
      settings.responderSpans && recording
        ? <T>(index: number, invoke: () => T): T => this.#runInSpan(index, invoke)
        : undefined;
    // The leanest handler for what this conversation records:
    // metrics only is the common case without a tracer provider and should cost next to nothing;
    // metrics and span events without extras is the common case with one.
    const records = this.#slots !== undefined;
    const durableCounts = records && store !== undefined;
    this.#pending = durableCounts ? start.responders.map(() => 0) : undefined;
    this.#committing = durableCounts ? start.responders.map(() => 0) : undefined;
    this.#justFlushed = undefined;
    // Told of each invocation's attempt only when durable: a re-run is counted as such.
    if (durableCounts) this.onResponderStart = this.#responderStarted;
    // The methods themselves, shared by every conversation (the loop's call into them stays
    // monomorphic): the core calls hooks as methods of their observation.
    this.onDispatch =
      this.#events === undefined
        ? records
          ? durableCounts
            ? this.#countDurable
            : this.#countDispatch
          : undefined
        : this.#withExtras
          ? this.#recordWithExtras
          : records
            ? durableCounts
              ? this.#countDurableAndKeep
              : this.#countAndKeep
            : this.#keep;
  }

  /** Set for durable conversations with metrics: counts re-invocations. */
  readonly onResponderStart?: (index: number, message: Message<C>, attempt: number) => void;

  #responderStarted(index: number, _message: Message<C>, attempt: number): void {
    if (!(attempt > 1)) return;
    const metrics = this.#settings.metrics;
    if (metrics === undefined || this.#slots === undefined) return;
    metrics.reinvoked(metrics.slot(this.#metricsRecord as OrchestratorRecord, this.#slots, index));
  }

  /**
   * A durable conversation's dispatch: its duration observed now, its count held until the
   * commit storing it lands (`onCheckpoint`).
   */
  #countDurable(info: DispatchInfo<S, C>): void {
    const index = info.responderIndex;
    const series = (this.#durations as HistogramSeries[])[index] ?? this.#firstDispatch(index);
    const pending = this.#pending as number[];
    pending[index] = (pending[index] as number) + 1;
    const seconds = info.durationMs / 1000;
    const bucket = series.observe(seconds);
    if (this.#dispatchTraceId !== undefined && bucket >= 0 && series.exemplarTaken[bucket] === 0) {
      series.exemplar(
        bucket,
        this.#dispatchTraceId,
        seconds,
        (this.#clockBase + info.elapsedMs) / 1000,
      );
    }
  }

  #countDurableAndKeep(info: DispatchInfo<S, C>): void {
    this.#countDurable(info);
    (this.#events as DispatchEvents).add(info);
  }

  /**
   * The telemetry's data for the checkpoint being made (durable conversations): the trace context,
   * what ended spans account for, whether a sampler kept the trace, whether usage was reported.
   */
  save(): SavedTelemetry | undefined {
    const pending = this.#pending;
    if (pending !== undefined) {
      const committing = this.#committing as number[];
      for (let i = 0; i < pending.length; i++) {
        committing[i] = (committing[i] as number) + (pending[i] as number);
        pending[i] = 0;
      }
    }
    if (this.#store === undefined) return undefined;
    if (!this.#kept && this.#savedTrace !== undefined) this.#kept = keptBySampler(this.#span);
    const data: { -readonly [K in keyof SavedTelemetry]: SavedTelemetry[K] } = {
      v: 1,
      ...this.#savedTrace,
      accounted: this.#accounted,
    };
    if (this.#kept) data.kept = true;
    if (this.#reportedUsage || this.#usageBefore) data.usage = true;
    return data;
  }

  /**
   * A commit attempt finished. Landed: the dispatches it stored are counted now. Failed: they
   * are not stored, and are counted when a later segment stores them.
   */
  onCheckpoint(durationMs: number, ...error: unknown[]): void {
    const metrics = this.#settings.metrics;
    if (metrics === undefined || this.#metricsRecord === undefined) return;
    const failed = error.length > 0;
    if (this.#store !== undefined) {
      metrics.checkpointed(this.#metricsRecord, this.#store, count(durationMs) / 1000, failed);
    }
    const committing = this.#committing;
    if (committing === undefined) return;
    if (!failed) {
      const slots = this.#slots as ResponderSlots;
      for (let i = 0; i < committing.length; i++) {
        const n = committing[i] as number;
        if (n > 0) metrics.dispatchesCommitted(metrics.slot(this.#metricsRecord, slots, i), n);
      }
      // A refusal is told right after, in the same turn (`onLeaseConflict`): it undoes this.
      this.#justFlushed = committing.slice();
      queueMicrotask(() => {
        this.#justFlushed = undefined;
      });
    }
    committing.fill(0);
  }

  /** Another process holds the conversation: a refused commit stored nothing. */
  onLeaseConflict(): void {
    const metrics = this.#settings.metrics;
    if (metrics === undefined || this.#metricsRecord === undefined) return;
    metrics.leaseConflict(this.#metricsRecord);
    const undo = this.#justFlushed;
    if (undo === undefined) return;
    this.#justFlushed = undefined;
    const slots = this.#slots as ResponderSlots;
    for (let i = 0; i < undo.length; i++) {
      const n = undo[i] as number;
      if (n > 0) metrics.dispatchesCommitted(metrics.slot(this.#metricsRecord, slots, i), -n);
    }
  }

  /** Absent when there is nothing to record per dispatch (no metrics, span not recording). */
  readonly onDispatch: ((info: DispatchInfo<S, C>) => void) | undefined;

  /**
   * Metrics only: a counter, a bucket and an exemplar, all plain numbers in one array per
   * responder (what the hot path costs is mostly the objects it touches between two answers).
   */
  #countDispatch(info: DispatchInfo<S, C>): void {
    const series =
      (this.#durations as HistogramSeries[])[info.responderIndex] ??
      this.#firstDispatch(info.responderIndex);
    const counts = series.counts;
    counts[series.tallyAt] = (counts[series.tallyAt] as number) + 1;
    const seconds = info.durationMs / 1000;
    const bucket = series.observe(seconds);
    if (this.#dispatchTraceId !== undefined && bucket >= 0 && series.exemplarTaken[bucket] === 0) {
      series.exemplar(
        bucket,
        this.#dispatchTraceId,
        seconds,
        (this.#clockBase + info.elapsedMs) / 1000,
      );
    }
  }

  /** A responder's first dispatch for its orchestrator: its series are created now. */
  #firstDispatch(index: number): HistogramSeries {
    const metrics = this.#settings.metrics as NonNullable<Settings<S, C>['metrics']>;
    return metrics.slot(
      this.#metricsRecord as OrchestratorRecord,
      this.#slots as ResponderSlots,
      index,
    ).duration;
  }

  /** Metrics and the dispatch kept for its span event. */
  #countAndKeep(info: DispatchInfo<S, C>): void {
    this.#countDispatch(info);
    (this.#events as DispatchEvents).add(info);
  }

  /** The dispatch kept for its span event (no registry). */
  #keep(info: DispatchInfo<S, C>): void {
    (this.#events as DispatchEvents).add(info);
  }

  /** Span events with state attributes or content (and metrics when a registry is given). */
  #recordWithExtras(info: DispatchInfo<S, C>): void {
    if (this.#slots !== undefined) {
      if (this.#pending !== undefined) this.#countDurable(info);
      else this.#countDispatch(info);
    }
    let extra: Attributes | undefined;
    if (this.#stateAttributes !== undefined) {
      extra = safeAttributes(this.#settings, info.state, this.#attributeLimit);
    }
    if (this.#settings.captureContent) {
      const message = info.state.lastMessage;
      if (message !== this.#lastMessage) {
        this.#lastMessage = message;
        extra = {
          ...extra,
          [ATTR_DISPATCH_CONTENT]: messageContent(
            message,
            this.#settings.maxContentLength,
            this.#settings.reports.content,
          ),
        };
      }
    }
    (this.#events as DispatchEvents).add(info, extra);
  }

  onResponderError(index: number): void {
    const metrics = this.#settings.metrics;
    if (metrics === undefined || this.#slots === undefined) return;
    metrics.responderFailed(
      metrics.slot(this.#metricsRecord as OrchestratorRecord, this.#slots, index),
    );
  }

  /**
   * A usage report (as it is made, also for invocations that then fail or are skipped): counted
   * in the metrics at once, summed on the invocation's open span, and from now on each dispatch's
   * tokens are kept for its event. Never called when nothing reports: no cost then.
   */
  onUsage(index: number, usage: Usage, dispatchNumber: number): void {
    this.#reportedUsage = true;
    this.#events?.usageSeen();
    const metrics = this.#settings.metrics;
    if (metrics !== undefined && this.#slots !== undefined) {
      metrics.tokensReported(
        this.#metricsRecord as OrchestratorRecord,
        this.#slots,
        index,
        usage.model,
        usage.inputTokens ?? 0,
        usage.outputTokens ?? 0,
      );
    }
    const open = this.#openResponderSpan;
    if (open !== undefined && open.index === index && open.dispatchNumber === dispatchNumber) {
      const sum = open.usage ?? {
        input: 0,
        output: 0,
        cacheRead: undefined,
        reasoning: undefined,
        model: undefined,
      };
      sum.input += usage.inputTokens ?? 0;
      sum.output += usage.outputTokens ?? 0;
      if (usage.cacheReadInputTokens !== undefined) {
        sum.cacheRead = (sum.cacheRead ?? 0) + usage.cacheReadInputTokens;
      }
      if (usage.reasoningOutputTokens !== undefined) {
        sum.reasoning = (sum.reasoning ?? 0) + usage.reasoningOutputTokens;
      }
      if (usage.model !== undefined) sum.model = usage.model;
      open.usage = sum;
    }
  }

  onListenerError(): void {
    if (this.#metricsRecord !== undefined)
      this.#settings.metrics?.listenerFailed(this.#metricsRecord);
  }

  onConversationEnd(end: ConversationEnd<S, C>): void {
    const ending = end.ok ? end.result.decision.reason : end.error.reason;
    // Whether this end is the conversation's, as the core decided it (`end.ended`, with a store):
    // a durable segment that suspended or was handed off (its lease released, its store failed,
    // another process holds it) ends without ending it, and its ending is counted where it ends.
    // Without a store (`ended` undefined) every end is the conversation's but a suspension. The
    // span says it (`conversation.ended`) for the sampler: the one decision, made in the core.
    const suspended = end.ok && end.result.suspended !== undefined;
    const final = end.ended ?? !suspended;
    const reason = suspended ? END_REASON_SUSPENDED : ending;
    const dispatches = end.ok ? end.result.dispatchCount : end.error.dispatchCount;
    const elapsedMs = end.ok ? end.result.elapsedMs : end.error.elapsedMs;
    const filter = this.#exemplarFilter;
    const metrics = this.#settings.metrics;
    let tokens: number | undefined;
    if (this.#reportedUsage || this.#usageBefore) {
      const usage = end.ok ? end.result.usage : end.error.usage;
      tokens = usage.inputTokens + usage.outputTokens;
    }
    const clockBase = this.#clockBase;
    if (metrics !== undefined && !final) {
      metrics.segmentEnded(this.#metricsRecord as OrchestratorRecord);
    } else if (metrics !== undefined) {
      const record = this.#metricsRecord as OrchestratorRecord;
      metrics.conversationEnded(
        record,
        reason,
        elapsedMs / 1000,
        dispatches,
        filter === undefined ? this.#traceId : undefined,
        (clockBase + elapsedMs) / 1000,
      );
      if (tokens !== undefined) {
        metrics.conversationTokens(
          record,
          reason,
          tokens,
          filter === undefined ? this.#traceId : undefined,
          (clockBase + elapsedMs) / 1000,
        );
      }
      if (!end.ok && end.error instanceof DispatchDeadlineError) {
        const index =
          end.error.responder === undefined ? -1 : this.#responders.indexOf(end.error.responder);
        if (index >= 0 && this.#slots !== undefined) {
          metrics.deadlinePassed(metrics.slot(record, this.#slots, index));
        }
      }
    }

    const span = this.#span;
    // One clock: the span ends at its start plus the elapsed time the result or error reports,
    // and never before a child's end.
    const endMs = Math.max(clockBase + elapsedMs, this.#latestChildMs);
    // A caller's abort is not an error: status left Unset, the reason's class says what it was
    // (`TimeoutError` for `AbortSignal.timeout()`).
    const aborted = !end.ok && reason === 'aborted';
    const abortReason = aborted ? errorType(end.error.cause) : undefined;
    const open = this.#openResponderSpan;
    if (open !== undefined) {
      this.#openResponderSpan = undefined;
      open.span.setAttribute(ATTR_CONVERSATION_END_REASON, reason);
      if (abortReason !== undefined) {
        open.span.setAttribute(ATTR_CONVERSATION_ABORT_REASON, abortReason);
        endOnce(open, endMs, this.#settings.reports.thrown);
      } else {
        // Cut short by a deadline (or another ending the responder did not choose): an error.
        endOnce(
          open,
          endMs,
          this.#settings.reports.thrown,
          { error: end.ok ? new Error(`Conversation ended (${reason})`) : end.error },
          reason,
        );
      }
    }
    const events = this.#events;
    if (events !== undefined) {
      // A failure is an ending the caller did not choose: status ERROR, the exception, error.type.
      // An abort is the caller's choice (status left Unset, the reason says it), as is every
      // resolved ending: instrumentation leaves OK to the application.
      const failed = !end.ok && !aborted;
      // The exception event is written after the dispatch events: leave it room under the
      // span's event limit, or the SDK would drop the first dispatch event to make it.
      const room = this.#settings.maxDispatchEvents - (failed ? 1 : 0);
      const responders = this.#responders;
      const written = events.forEachKept(
        room,
        (count, elapsedMs, durationMs, responder, decision, extra, usage) => {
          const attributes: Attributes = {
            [ATTR_DISPATCH_COUNT]: count,
            [ATTR_GEN_AI_AGENT_NAME]: responders[responder],
            [ATTR_DISPATCH_ELAPSED_MS]: elapsedMs,
            [ATTR_DISPATCH_DURATION_MS]: durationMs,
            [ATTR_DECISION_TERMINATE]: decision.terminate,
            [ATTR_DECISION_REASON]: decision.reason,
          };
          addExplanation(attributes, decision, ATTR_DECISION_OBSERVED, ATTR_DECISION_LIMIT);
          if (usage !== undefined) {
            attributes[ATTR_DISPATCH_USAGE_INPUT_TOKENS] = usage.inputTokens;
            attributes[ATTR_DISPATCH_USAGE_OUTPUT_TOKENS] = usage.outputTokens;
          }
          if (extra !== undefined) Object.assign(attributes, extra);
          span.addEvent(EVENT_DISPATCH, attributes, clockBase + elapsedMs);
        },
      );
      span.setAttributes({
        [ATTR_CONVERSATION_DISPATCH_COUNT]: dispatches,
        [ATTR_CONVERSATION_END_REASON]: reason,
        [ATTR_CONVERSATION_ELAPSED_MS]: elapsedMs,
        // Of this segment's dispatches (those the result or error reports past the ones committed
        // before it), those without an event.
        [ATTR_CONVERSATION_EVENTS_DROPPED]: Math.max(0, dispatches - this.#dispatchBase - written),
      });
      // On a durable conversation's span, and on any that did not end its conversation: absent,
      // the span's end is the conversation's.
      if (this.#store !== undefined || !final) span.setAttribute(ATTR_CONVERSATION_ENDED, final);
      if (abortReason !== undefined) span.setAttribute(ATTR_CONVERSATION_ABORT_REASON, abortReason);
      if (end.ok) {
        // What ended it, explained: the deciding policy, what it measured, against what limit.
        const decision = end.result.decision;
        const explanation: Attributes = {};
        addExplanation(
          explanation,
          decision,
          ATTR_CONVERSATION_END_OBSERVED,
          ATTR_CONVERSATION_END_LIMIT,
          ATTR_CONVERSATION_END_POLICY,
        );
        span.setAttributes(explanation);
      }
      if (this.#reportedUsage) {
        const usage = end.ok ? end.result.usage : end.error.usage;
        span.setAttributes({
          [ATTR_CONVERSATION_USAGE_INPUT_TOKENS]: usage.inputTokens,
          [ATTR_CONVERSATION_USAGE_OUTPUT_TOKENS]: usage.outputTokens,
        });
      }
      if (failed) {
        // The responder's own error (its class, message and throw site), not only the library's
        // wrapper: a trace without responder spans still shows where it failed.
        const error = end.error;
        // `throw undefined` is the responder's own value too (its error.type is _OTHER).
        const original = error instanceof ResponderError && 'cause' in error ? error.cause : error;
        span.recordException(exceptionRecord(original, this.#settings.reports.thrown), endMs);
        span.setAttribute(ATTR_ERROR_TYPE, errorType(original));
        span.setStatus({ code: SpanStatusCode.ERROR, message: errorMessage(error) });
      }
    }
    span.end(endMs);
    // The sampler decided as the span ended: exemplars of a kept trace only.
    if (filter !== undefined && events !== undefined) {
      this.#keptExemplars(filter, final, reason, elapsedMs, dispatches, tokens, events);
    }
    events?.release();
  }

  /** With a sampler: the end's exemplars and one per kept dispatch, if the trace was kept. */
  #keptExemplars(
    filter: ExemplarFilter,
    final: boolean,
    reason: string,
    elapsedMs: number,
    dispatches: number,
    tokens: number | undefined,
    events: DispatchEvents,
  ): void {
    const traceId = this.#traceId as string;
    const metrics = this.#settings.metrics;
    if (metrics === undefined) return;
    const startTimeMs = this.#clockBase;
    const record = this.#metricsRecord as OrchestratorRecord;
    const durations = this.#durations as HistogramSeries[];
    if (filter(traceId)) {
      if (final) {
        metrics.keptEndExemplars(
          record,
          reason,
          elapsedMs / 1000,
          dispatches,
          tokens,
          traceId,
          (startTimeMs + elapsedMs) / 1000,
        );
      }
      events.forEachKept(Number.POSITIVE_INFINITY, (_count, atMs, durationMs, responder) => {
        durations[responder]?.keptExemplar(durationMs / 1000, traceId, (startTimeMs + atMs) / 1000);
      });
      return;
    }
    // Not decided yet (a conversation nested in another that still runs, or a trace not exported
    // yet): the exemplars wait for the decision, as plain numbers (the events are released).
    const kept: number[] = [];
    events.forEachKept(Number.POSITIVE_INFINITY, (_count, atMs, durationMs, responder) => {
      kept.push(durationMs / 1000, (startTimeMs + atMs) / 1000, responder);
    });
    exemplarDeferOf(metrics.registry)(traceId, () => {
      if (final) {
        metrics.keptEndExemplars(
          record,
          reason,
          elapsedMs / 1000,
          dispatches,
          tokens,
          traceId,
          (startTimeMs + elapsedMs) / 1000,
        );
      }
      for (let i = 0; i < kept.length; i += 3) {
        durations[kept[i + 2] as number]?.keptExemplar(
          kept[i] as number,
          traceId,
          kept[i + 1] as number,
        );
      }
    });
  }

  /** Now, on the clock every span and event of this conversation is stamped from. */
  #now(): number {
    const now = this.#startTimeMs + Math.max(0, performance.now() - this.#startPerfMs);
    if (now > this.#latestChildMs) this.#latestChildMs = now;
    return now;
  }

  /** `runResponder` with responder spans (a method: the core calls hooks on the observation). */
  #runInSpan<T>(index: number, invoke: () => T): T {
    const name = this.#responders[index] as string;
    const attributes: Attributes = {
      [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_INVOKE_AGENT,
      [ATTR_GEN_AI_AGENT_NAME]: name,
      [ATTR_GEN_AI_CONVERSATION_ID]: this.#conversationId,
      [ATTR_RESPONDER_DISPATCH_NUMBER]: this.#dispatchBase + (this.#events?.total ?? 0) + 1,
    };
    // Required by the GenAI conventions: the responder's provider, or the documented default.
    const provider = this.#providers?.[index];
    attributes[ATTR_GEN_AI_PROVIDER_NAME] =
      typeof provider === 'string' ? provider : this.#settings.defaultProviderName;
    const span = this.#settings.tracer.startSpan(
      SPAN_RESPONDER_PREFIX + name,
      { kind: SpanKind.INTERNAL, attributes, startTime: this.#now() },
      this.#context,
    );
    const report = this.#settings.reports.thrown;
    const open: OpenSpan = {
      span,
      index,
      dispatchNumber: attributes[ATTR_RESPONDER_DISPATCH_NUMBER] as number,
      ended: false,
      usage: undefined,
    };
    // Open from the start: an abort inside the call itself ends the conversation, and the span
    // with it, before the call returns.
    this.#openResponderSpan = open;
    let result: T;
    try {
      result = context.with(contextWithSpan(this.#context, span), invoke);
    } catch (error) {
      if (this.#openResponderSpan === open) this.#openResponderSpan = undefined;
      endOnce(open, this.#now(), report, { error });
      throw error;
    }
    let thenable: boolean;
    try {
      thenable =
        result !== null &&
        (typeof result === 'object' || typeof result === 'function') &&
        typeof (result as { then?: unknown }).then === 'function';
    } catch (error) {
      // A `then` getter that throws: the responder's answer failed, and so did its span.
      if (this.#openResponderSpan === open) this.#openResponderSpan = undefined;
      endOnce(open, this.#now(), report, { error });
      throw error;
    }
    if (!thenable) {
      if (this.#openResponderSpan === open) this.#openResponderSpan = undefined;
      endOnce(open, this.#now(), report);
      return result;
    }
    // A late answer (after an abort or a deadline ended the conversation and this span) finds
    // the span ended and leaves it alone. A foreign thenable is adopted by a native promise: its
    // own `then` may return nothing (the answer would be lost) or call back twice.
    return Promise.resolve(result as unknown as PromiseLike<unknown>).then(
      (value) => {
        if (this.#openResponderSpan === open) this.#openResponderSpan = undefined;
        if (!open.ended) endOnce(open, this.#now(), report);
        return value;
      },
      (error: unknown) => {
        if (this.#openResponderSpan === open) this.#openResponderSpan = undefined;
        if (!open.ended) endOnce(open, this.#now(), report, { error });
        throw error;
      },
    ) as T;
  }
}
