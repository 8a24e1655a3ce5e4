/**
 * One observed conversation: its span, its kept dispatch events and its metric records. The
 * orchestrator calls these hooks; `onDispatch` is the hot path and is picked per conversation
 * for what it records (metrics only, or span events too). A durable conversation's segments are
 * in segment.ts, responder spans in responder-span.ts, what its end records in conversation-end.ts.
 */
import {
  type Attributes,
  type Context,
  context,
  isSpanContextValid,
  type Span,
  SpanKind,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import type {
  CheckpointWrite,
  ConversationEnd,
  ConversationObservation,
  ConversationStart,
  DispatchInfo,
} from '../core/spi/observer.ts';
import type { ConversationState, Message, Usage } from '../core/spi/types.ts';
import {
  countEnd,
  type EndMetrics,
  endCutShort,
  endingOf,
  failureType,
  keptExemplars,
  recordFailure,
  setEndAttributes,
  writeDispatchEvents,
} from './conversation-end.ts';
import { conversationAttributes, startMetrics } from './conversation-start.ts';
import { DispatchEvents } from './dispatch-events.ts';
import type { HistogramSeries } from './dispatch-histogram.ts';
import { type ExemplarFilter, exemplarFilterOf } from './exemplar-filter.ts';
import { errorType, messageContent, stateAttributeRoom } from './guard.ts';
import type { DispatchRecord, OrchestratorRecord, ResponderSlots } from './metric-records.ts';
import type { OtelMetrics } from './otel-metrics.ts';
import { addUsage, endOnce, type OpenSpan } from './responder-span.ts';
import { keptBySampler } from './sampling/kept-spans.ts';
import {
  CommitCounts,
  count,
  readSegment,
  type SavedTelemetry,
  type SavedTrace,
  type SegmentStart,
  savedTelemetry,
  savedTrace,
  segmentParent,
  usageReported,
} from './segment.ts';
import {
  ATTR_DISPATCH_CONTENT,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_CONVERSATION_ID,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_RESPONDER_DISPATCH_NUMBER,
  GEN_AI_OPERATION_INVOKE_AGENT,
  SPAN_CONVERSATION_PREFIX,
  SPAN_RESPONDER_PREFIX,
} from './semconv.ts';
import { type CallFailure, callSettled } from './settled-call.ts';
import { contextWithSpan } from './span-context.ts';
import { type Settings, safeAttributes } from './utils.ts';

export class ObservedConversation<S, C> implements ConversationObservation<S, C> {
  readonly #settings: Settings<S, C>;
  readonly #responders: readonly string[];
  readonly #conversationId: string;
  readonly #providers: readonly (string | undefined)[] | undefined;
  readonly #startTimeMs: number;
  /** Where this segment stands in its conversation (a first one, or a durable one resumed). */
  readonly #segment: SegmentStart;
  /** `#segment.clockBase` (one hop less per dispatch): an event at elapsed `e` is at it + `e`. */
  readonly #clockBase: number;
  /** What this segment saves of the trace in checkpoints (durable, with a valid span context). */
  readonly #savedTrace: SavedTrace | undefined;
  /** A sampler kept the trace (known from an earlier segment, or asked at a commit). */
  #kept: boolean;
  /** Durable conversations with metrics: the dispatch counts held until their commit lands. */
  readonly #commits: CommitCounts | undefined;
  /** `#commits.pending`, one hop less per dispatch. */
  readonly #pending: number[] | undefined;
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
   * The export tracker's word on the registry (undefined: no tracker, no exemplars). Nothing is
   * written per dispatch: an exemplar must point at a delivered trace, known only after the
   * conversation's span ends, so its exemplars are written then (or once the batch is delivered)
   * from its kept dispatches.
   */
  readonly #exemplarFilter: ExemplarFilter | undefined;
  readonly #stateAttributes: ((state: ConversationState<S, C>) => Attributes) | undefined;
  #lastMessage: Message<C> | undefined;
  #openResponderSpan: OpenSpan | undefined;
  /** Set at the first usage report. */
  #reportedUsage = false;
  readonly #otel: OtelMetrics | undefined;
  /** Usage reports (`#usageCalls`) of the invocation (responder, dispatch) that made the last. */
  #usageIndex = -1;
  #usageDispatch = 0;
  #usageCalls = 0;
  readonly runResponder: (<T>(index: number, invoke: () => T) => T) | undefined;
  readonly runConversation: (<T>(run: () => T) => T) | undefined;

  constructor(settings: Settings<S, C>, start: ConversationStart<C>) {
    this.#settings = settings;
    this.#responders = start.responders;
    this.#providers = Array.isArray(start.providers) ? start.providers : undefined;
    this.#conversationId = start.conversationId;
    this.#startTimeMs = start.startTimeMs;
    this.#startPerfMs = start.startTimeMs - performance.timeOrigin;
    this.#latestChildMs = start.startTimeMs;
    const segment = readSegment(start);
    const { store, saved } = segment;
    this.#segment = segment;
    this.#clockBase = segment.clockBase;
    this.#kept = saved?.kept === true;

    const { parent, links } = segmentParent(saved, context.active());
    const attributes = conversationAttributes(settings, start, segment, this.#kept);
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
    // The registry's exemplars (the OpenTelemetry path's are the SDK's, from the context).
    const registry = metrics?.registry;
    this.#exemplarFilter =
      registry !== undefined && this.#traceId !== undefined
        ? exemplarFilterOf(registry)
        : undefined;
    if (registry !== undefined && this.#traceId !== undefined && this.#exemplarFilter === undefined)
      metrics?.exemplarsWithheld();
    const records = metrics === undefined ? undefined : startMetrics(metrics, start, segment);
    this.#otel = records === undefined ? undefined : metrics?.otel;
    this.#metricsRecord = records?.record;
    this.#slots = records?.slots;
    this.#durations = records?.slots.durations;

    // A wrapper around the responder call works detached, as `runConversation` does (a wrapper
    // composing observers may forward it as a value); made only when responder spans are on.
    this.runResponder =
      settings.responderSpans && recording
        ? <T>(index: number, invoke: () => T): T => this.#runInSpan(index, invoke)
        : undefined;
    const durableCounts = records !== undefined && store !== undefined;
    this.#commits = durableCounts ? new CommitCounts(start.responders.length) : undefined;
    this.#pending = this.#commits?.pending;
    // Told of each invocation's attempt only when durable: a re-run is counted as such.
    if (durableCounts) {
      this.onResponderStart = this.#responderStarted;
      this.onCheckpointWrite = this.#checkpointWritten;
    }
    this.onDispatch = this.#dispatchHandler(records !== undefined, durableCounts);
  }

  /**
   * The leanest handler for what this conversation records: metrics only is the common case
   * without a tracer provider and should cost next to nothing; metrics and span events without
   * extras is the common case with one. The methods themselves, shared by every conversation (the
   * loop's call into them stays monomorphic): the core calls hooks as methods of their observation.
   */
  #dispatchHandler(
    records: boolean,
    durableCounts: boolean,
  ): ((info: DispatchInfo<S, C>) => void) | undefined {
    if (this.#events === undefined) {
      if (!records) return undefined;
      if (this.#otel !== undefined) return this.#countWithOtel;
      return durableCounts ? this.#countDurable : this.#countDispatch;
    }
    if (this.#withExtras) return this.#recordWithExtras;
    if (!records) return this.#keep;
    if (this.#otel !== undefined) return this.#countWithOtel;
    return durableCounts ? this.#countDurableAndKeep : this.#countAndKeep;
  }

  /** Metrics on both paths (the OpenTelemetry histograms cost far more than the branches). */
  #countWithOtel(info: DispatchInfo<S, C>): void {
    const index = info.responderIndex;
    if (this.#pending !== undefined) this.#countDurable(info);
    else this.#countDispatch(info);
    (this.#otel as OtelMetrics).dispatched(
      this.#metricsRecord as OrchestratorRecord,
      ((this.#slots as ResponderSlots).records as DispatchRecord[])[index] as DispatchRecord,
      info.durationMs / 1000,
      this.#callsOf(index),
      this.#context,
    );
    this.#events?.add(info);
  }

  /** The usage reports of responder `index`'s invocation that just ended. */
  #callsOf(index: number): number {
    const calls = this.#usageIndex === index ? this.#usageCalls : 0;
    this.#usageCalls = 0;
    return calls;
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
    series.observe(seconds);
  }

  #countDurableAndKeep(info: DispatchInfo<S, C>): void {
    this.#countDurable(info);
    (this.#events as DispatchEvents).add(info);
  }

  /**
   * The telemetry's data for the checkpoint being made (durable conversations): the trace context,
   * what ended spans account for, whether a sampler kept the trace.
   */
  save(): SavedTelemetry | undefined {
    this.#commits?.startCommit();
    if (this.#segment.store === undefined) return undefined;
    if (!this.#kept && this.#savedTrace !== undefined) this.#kept = keptBySampler(this.#span);
    return savedTelemetry(this.#savedTrace, this.#segment.accounted, this.#kept);
  }

  /** A commit attempt finished (see `CommitCounts.finished`). */
  onCheckpoint(durationMs: number, ...error: unknown[]): void {
    const metrics = this.#settings.metrics;
    if (metrics === undefined || this.#metricsRecord === undefined) return;
    const failed = error.length > 0;
    if (this.#segment.store !== undefined) {
      metrics.checkpointed(
        this.#metricsRecord,
        this.#segment.store,
        count(durationMs) / 1000,
        failed,
      );
    }
    this.#commits?.finished(metrics, this.#metricsRecord, this.#slots as ResponderSlots, failed);
  }

  /** Set for durable conversations with metrics: a write's bytes and (a snapshot's) duration. */
  readonly onCheckpointWrite?: (write: CheckpointWrite) => void;

  #checkpointWritten(write: CheckpointWrite): void {
    const metrics = this.#settings.metrics;
    if (metrics === undefined) return;
    metrics.checkpointWritten(
      this.#metricsRecord as OrchestratorRecord,
      this.#segment.store as string,
      write.kind,
      count(write.bytes),
      count(write.durationMs) / 1000,
      write.error !== undefined,
    );
  }

  /** Another process holds the conversation: a refused commit stored nothing. */
  onLeaseConflict(): void {
    const metrics = this.#settings.metrics;
    if (metrics === undefined || this.#metricsRecord === undefined) return;
    metrics.leaseConflict(this.#metricsRecord);
    this.#commits?.refused(metrics, this.#metricsRecord, this.#slots as ResponderSlots);
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
    series.observe(seconds);
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
      if (this.#otel !== undefined) {
        this.#otel.dispatched(
          this.#metricsRecord as OrchestratorRecord,
          (this.#slots.records as DispatchRecord[])[info.responderIndex] as DispatchRecord,
          info.durationMs / 1000,
          this.#callsOf(info.responderIndex),
          this.#context,
        );
      }
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

  onResponderError(index: number, durationMs: number, error: unknown): void {
    const metrics = this.#settings.metrics;
    if (metrics === undefined || this.#slots === undefined) return;
    const record = metrics.slot(this.#metricsRecord as OrchestratorRecord, this.#slots, index);
    metrics.responderFailed(record);
    this.#otel?.invocationEnded(
      this.#metricsRecord as OrchestratorRecord,
      record,
      durationMs / 1000,
      this.#callsOf(index),
      errorType(error),
      this.#context,
    );
  }

  /**
   * A usage report (as it is made, also for invocations that then fail or are skipped): counted
   * in the metrics at once, summed on the invocation's open span, and from now on each dispatch's
   * tokens are kept for its event. Never called when nothing reports: no cost then.
   */
  onUsage(index: number, usage: Usage, dispatchNumber: number): void {
    this.#reportedUsage = true;
    if (index >= 0) {
      // One report per model call: the invocation's inference calls (gen_ai.invoke_agent.*).
      if (this.#usageIndex !== index || this.#usageDispatch !== dispatchNumber) {
        this.#usageIndex = index;
        this.#usageDispatch = dispatchNumber;
        this.#usageCalls = 0;
      }
      this.#usageCalls++;
    }
    this.#events?.usageSeen();
    const metrics = this.#settings.metrics;
    if (metrics !== undefined && this.#slots !== undefined) {
      metrics.tokensReported(
        this.#metricsRecord as OrchestratorRecord,
        this.#slots,
        index,
        usage,
        this.#providerOf(index),
      );
    }
    const open = this.#openResponderSpan;
    if (open !== undefined && open.index === index && open.dispatchNumber === dispatchNumber) {
      addUsage(open, usage);
    }
  }

  onListenerError(): void {
    if (this.#metricsRecord !== undefined)
      this.#settings.metrics?.listenerFailed(this.#metricsRecord);
  }

  onConversationEnd(end: ConversationEnd<S, C>): void {
    const ending = endingOf(end);
    const { elapsedMs } = ending;
    const filter = this.#exemplarFilter;
    const metrics = this.#settings.metrics;
    const report = this.#settings.reports.thrown;
    // Tokens of a conversation that reported any: in this segment, or (the core's ledger says it)
    // in one before.
    let tokens: number | undefined;
    if (
      this.#reportedUsage ||
      (this.#segment.resumed !== undefined && usageReported(ending.usage))
    ) {
      tokens = ending.usage.inputTokens + ending.usage.outputTokens;
    }
    const clockBase = this.#clockBase;
    const to: EndMetrics | undefined =
      metrics === undefined
        ? undefined
        : {
            metrics,
            record: this.#metricsRecord as OrchestratorRecord,
            slots: this.#slots as ResponderSlots,
            responders: this.#responders,
          };
    if (to !== undefined) {
      countEnd(to, end, ending, tokens, this.#context);
    }

    const span = this.#span;
    // One clock: the span ends at its start plus the elapsed time the result or error reports,
    // and never before a child's end.
    const endMs = Math.max(clockBase + elapsedMs, this.#latestChildMs);
    const open = this.#openResponderSpan;
    if (open !== undefined) {
      this.#openResponderSpan = undefined;
      endCutShort(open, end, ending, endMs, report);
    }
    const events = this.#events;
    if (events !== undefined) {
      // The exception event is written after the dispatch events: leave it room under the
      // span's event limit, or the SDK would drop the first dispatch event to make it.
      const room = this.#settings.maxDispatchEvents - (ending.failed ? 1 : 0);
      const written = writeDispatchEvents(span, events, room, this.#responders, clockBase);
      setEndAttributes(span, end, ending, {
        // Of this segment's dispatches (those the result or error reports past the ones committed
        // before it), those without an event.
        dropped: Math.max(0, ending.dispatches - this.#segment.dispatchBase - written),
        durable: this.#segment.store !== undefined,
        reportedUsage: this.#reportedUsage,
      });
      if (ending.failed && !end.ok) recordFailure(span, end.error, report, endMs);
    }
    span.end(endMs);
    // The segment's gen_ai.invoke_workflow.duration: its span's duration.
    this.#otel?.segmentEnded(
      this.#metricsRecord as OrchestratorRecord,
      (endMs - this.#startTimeMs) / 1000,
      failureType(end, ending),
      this.#context,
    );
    // Exemplars of a delivered trace only: now if a batch of it was, else once one is.
    if (filter !== undefined && events !== undefined && to !== undefined) {
      keptExemplars(to, filter, this.#traceId as string, ending, tokens, events, clockBase, endMs);
    }
    events?.release();
  }

  /** Now, on the clock every span and event of this conversation is stamped from. */
  #now(): number {
    const now = this.#startTimeMs + Math.max(0, performance.now() - this.#startPerfMs);
    if (now > this.#latestChildMs) this.#latestChildMs = now;
    return now;
  }

  /** The `gen_ai.provider.name` of responder `index` (-1: the turn policy), or the default. */
  #providerOf(index: number): string {
    const provider = index < 0 ? undefined : this.#providers?.[index];
    return typeof provider === 'string' ? provider : this.#settings.defaultProviderName;
  }

  /** `runResponder` with responder spans (a method: the core calls hooks on the observation). */
  #runInSpan<T>(index: number, invoke: () => T): T {
    const name = this.#responders[index] as string;
    const attributes: Attributes = {
      [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_INVOKE_AGENT,
      [ATTR_GEN_AI_AGENT_NAME]: name,
      [ATTR_GEN_AI_CONVERSATION_ID]: this.#conversationId,
      [ATTR_RESPONDER_DISPATCH_NUMBER]: this.#segment.dispatchBase + (this.#events?.total ?? 0) + 1,
    };
    // Kept from the conventions before the GenAI repository (see the migration table of
    // docs/telemetry.md): the responder's provider, or the documented default.
    attributes[ATTR_GEN_AI_PROVIDER_NAME] = this.#providerOf(index);
    const span = this.#settings.tracer.startSpan(
      SPAN_RESPONDER_PREFIX + name,
      { kind: SpanKind.INTERNAL, attributes, startTime: this.#now() },
      this.#context,
    );
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
    return callSettled(contextWithSpan(this.#context, span), invoke, (failure) =>
      this.#settle(open, failure),
    );
  }

  /**
   * The invocation of `open` settled: it is no longer the open one, and its span ends now unless
   * the conversation's end ended it first.
   */
  #settle(open: OpenSpan, failure?: CallFailure): void {
    if (this.#openResponderSpan === open) this.#openResponderSpan = undefined;
    if (!open.ended) endOnce(open, this.#now(), this.#settings.reports.thrown, failure);
  }
}
