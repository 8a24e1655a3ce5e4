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
  type Span,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import { DispatchDeadlineError, ResponderError } from '../core/errors.ts';
import type {
  ConversationEnd,
  ConversationObservation,
  ConversationStart,
  DispatchInfo,
} from '../core/observer.ts';
import type { ConversationState, Message, Usage } from '../core/types.ts';
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
import {
  ATTR_CONVERSATION_ABORT_REASON,
  ATTR_CONVERSATION_DISPATCH_COUNT,
  ATTR_CONVERSATION_ELAPSED_MS,
  ATTR_CONVERSATION_END_LIMIT,
  ATTR_CONVERSATION_END_OBSERVED,
  ATTR_CONVERSATION_END_POLICY,
  ATTR_CONVERSATION_END_REASON,
  ATTR_CONVERSATION_EVENTS_DROPPED,
  ATTR_CONVERSATION_INPUT_CONTENT,
  ATTR_CONVERSATION_RESPONDERS,
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
  EVENT_DISPATCH,
  GEN_AI_OPERATION_INVOKE_AGENT,
  GEN_AI_OPERATION_INVOKE_WORKFLOW,
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

export class ObservedConversation<S, C> implements ConversationObservation<S, C> {
  readonly #settings: Settings<S, C>;
  readonly #orchestrator: string;
  readonly #responders: readonly string[];
  readonly #conversationId: string;
  readonly #providers: readonly (string | undefined)[] | undefined;
  readonly #startTimeMs: number;
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
    const parent = context.active();
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
    this.#span = settings.tracer.startSpan(
      SPAN_CONVERSATION_PREFIX + start.orchestrator,
      { kind: SpanKind.INTERNAL, attributes, startTime: start.startTimeMs },
      parent,
    );
    const recording = this.#span.isRecording();
    const spanContext = this.#span.spanContext();
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
      metrics.conversationStarted(this.#metricsRecord);
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
    // The methods themselves, shared by every conversation (the loop's call into them stays
    // monomorphic): the core calls hooks as methods of their observation.
    this.onDispatch =
      this.#events === undefined
        ? records
          ? this.#countDispatch
          : undefined
        : this.#withExtras
          ? this.#recordWithExtras
          : records
            ? this.#countAndKeep
            : this.#keep;
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
        (this.#startTimeMs + info.elapsedMs) / 1000,
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
    if (this.#slots !== undefined) this.#countDispatch(info);
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
    const reason = end.ok ? end.result.decision.reason : end.error.reason;
    const dispatches = end.ok ? end.result.dispatchCount : end.error.dispatchCount;
    const elapsedMs = end.ok ? end.result.elapsedMs : end.error.elapsedMs;
    const filter = this.#exemplarFilter;
    const metrics = this.#settings.metrics;
    let tokens: number | undefined;
    if (this.#reportedUsage) {
      const usage = end.ok ? end.result.usage : end.error.usage;
      tokens = usage.inputTokens + usage.outputTokens;
    }
    if (metrics !== undefined) {
      const record = this.#metricsRecord as OrchestratorRecord;
      metrics.conversationEnded(
        record,
        reason,
        elapsedMs / 1000,
        dispatches,
        filter === undefined ? this.#traceId : undefined,
        (this.#startTimeMs + elapsedMs) / 1000,
      );
      if (tokens !== undefined) {
        metrics.conversationTokens(
          record,
          reason,
          tokens,
          filter === undefined ? this.#traceId : undefined,
          (this.#startTimeMs + elapsedMs) / 1000,
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
    const endMs = Math.max(this.#startTimeMs + elapsedMs, this.#latestChildMs);
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
      const startTimeMs = this.#startTimeMs;
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
          span.addEvent(EVENT_DISPATCH, attributes, startTimeMs + elapsedMs);
        },
      );
      span.setAttributes({
        [ATTR_CONVERSATION_DISPATCH_COUNT]: dispatches,
        [ATTR_CONVERSATION_END_REASON]: reason,
        [ATTR_CONVERSATION_ELAPSED_MS]: elapsedMs,
        // Of the dispatches the result or error reports, those without an event.
        [ATTR_CONVERSATION_EVENTS_DROPPED]: Math.max(0, dispatches - written),
      });
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
      this.#keptExemplars(filter, reason, elapsedMs, dispatches, tokens, events);
    }
    events?.release();
  }

  /** With a sampler: the end's exemplars and one per kept dispatch, if the trace was kept. */
  #keptExemplars(
    filter: ExemplarFilter,
    reason: string,
    elapsedMs: number,
    dispatches: number,
    tokens: number | undefined,
    events: DispatchEvents,
  ): void {
    const traceId = this.#traceId as string;
    const metrics = this.#settings.metrics;
    if (metrics === undefined) return;
    const startTimeMs = this.#startTimeMs;
    const record = this.#metricsRecord as OrchestratorRecord;
    const durations = this.#durations as HistogramSeries[];
    if (filter(traceId)) {
      metrics.keptEndExemplars(
        record,
        reason,
        elapsedMs / 1000,
        dispatches,
        tokens,
        traceId,
        (startTimeMs + elapsedMs) / 1000,
      );
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
      metrics.keptEndExemplars(
        record,
        reason,
        elapsedMs / 1000,
        dispatches,
        tokens,
        traceId,
        (startTimeMs + elapsedMs) / 1000,
      );
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
      [ATTR_RESPONDER_DISPATCH_NUMBER]: (this.#events?.total ?? 0) + 1,
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
