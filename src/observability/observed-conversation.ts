/**
 * One observed conversation: its span, its kept dispatch events and its metric records. The
 * orchestrator calls these hooks; `onDispatch` is the hot path and is picked per conversation
 * for what it records (metrics only, or span events too).
 */
import {
  type Attributes,
  type Context,
  context,
  type Span,
  SpanKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from '@opentelemetry/api';
import type {
  ConversationEnd,
  ConversationObservation,
  ConversationStart,
  DispatchInfo,
} from '../core/observer.ts';
import type { ConversationState, Message } from '../core/types.ts';
import { DispatchEvents } from './dispatch-events.ts';
import type { DispatchRecord, OrchestratorRecord } from './metrics.ts';
import {
  ATTR_CONVERSATION_DISPATCH_COUNT,
  ATTR_CONVERSATION_ELAPSED_MS,
  ATTR_CONVERSATION_END_REASON,
  ATTR_CONVERSATION_EVENTS_DROPPED,
  ATTR_CONVERSATION_INPUT_CONTENT,
  ATTR_CONVERSATION_RESPONDERS,
  ATTR_DECISION_REASON,
  ATTR_DECISION_TERMINATE,
  ATTR_DISPATCH_CONTENT,
  ATTR_DISPATCH_COUNT,
  ATTR_DISPATCH_DURATION_MS,
  ATTR_DISPATCH_ELAPSED_MS,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_CONVERSATION_ID,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_WORKFLOW_NAME,
  ATTR_RESPONDER_DISPATCH_NUMBER,
  EVENT_DISPATCH,
  GEN_AI_OPERATION_INVOKE_AGENT,
  GEN_AI_OPERATION_INVOKE_WORKFLOW,
  SPAN_CONVERSATION_PREFIX,
  SPAN_RESPONDER_PREFIX,
} from './semconv.ts';
import { endResponderSpan, type Settings, safeAttributes, truncate } from './utils.ts';

export class ObservedConversation<S, C> implements ConversationObservation<S, C> {
  readonly #settings: Settings<S, C>;
  readonly #orchestrator: string;
  readonly #responders: readonly string[];
  readonly #conversationId: string;
  readonly #startTimeMs: number;
  readonly #span: Span;
  readonly #context: Context;
  readonly #events: DispatchEvents | undefined;
  /** State attributes or content are kept per dispatch. */
  readonly #withExtras: boolean;
  readonly #records: DispatchRecord[] | undefined;
  readonly #metricsRecord: OrchestratorRecord | undefined;
  /** Set when exemplars are on and the trace is sampled. */
  readonly #traceId: string | undefined;
  readonly #stateAttributes: ((state: ConversationState<S, C>) => Attributes) | undefined;
  #lastMessage: Message<C> | undefined;
  #openResponderSpan: Span | undefined;
  readonly runResponder: (<T>(index: number, invoke: () => T) => T) | undefined;

  constructor(settings: Settings<S, C>, start: ConversationStart<C>) {
    this.#settings = settings;
    this.#orchestrator = start.orchestrator;
    this.#responders = start.responders;
    this.#conversationId = start.conversationId;
    this.#startTimeMs = start.startTimeMs;
    const parent = context.active();
    const attributes: Attributes = {
      [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_INVOKE_WORKFLOW,
      [ATTR_GEN_AI_WORKFLOW_NAME]: start.orchestrator,
      [ATTR_GEN_AI_CONVERSATION_ID]: start.conversationId,
      [ATTR_CONVERSATION_RESPONDERS]: [...start.responders],
    };
    if (settings.captureContent) {
      attributes[ATTR_CONVERSATION_INPUT_CONTENT] = truncate(
        start.input.content,
        settings.maxContentLength,
      );
    }
    this.#span = settings.tracer.startSpan(
      SPAN_CONVERSATION_PREFIX + start.orchestrator,
      { kind: SpanKind.INTERNAL, attributes, startTime: start.startTimeMs },
      parent,
    );
    const recording = this.#span.isRecording();
    // The responders' context: only needed (and only made) for responder spans.
    this.#context =
      settings.responderSpans && recording ? trace.setSpan(parent, this.#span) : parent;
    this.#withExtras = settings.stateAttributes !== undefined || settings.captureContent;
    this.#events = recording
      ? new DispatchEvents(settings.maxDispatchEvents, this.#withExtras)
      : undefined;
    this.#stateAttributes = recording ? settings.stateAttributes : undefined;
    this.#lastMessage = start.input;
    const spanContext = this.#span.spanContext();
    this.#traceId =
      settings.exemplars && (spanContext.traceFlags & TraceFlags.SAMPLED) !== 0
        ? spanContext.traceId
        : undefined;
    const metrics = settings.metrics;
    if (metrics !== undefined) {
      this.#metricsRecord = metrics.orchestrator(start.orchestrator);
      this.#records = metrics.records(this.#metricsRecord, start.responders);
      metrics.conversationStarted(this.#metricsRecord);
    } else {
      this.#records = undefined;
      this.#metricsRecord = undefined;
    }
    this.runResponder = settings.responderSpans && recording ? this.#runInSpan : undefined;
    // The leanest handler for what this conversation records: metrics only is the common case
    // without a tracer provider, and it should cost next to nothing.
    this.onDispatch =
      this.#events === undefined
        ? this.#records === undefined
          ? undefined
          : this.#countDispatch
        : this.#recordDispatch;
  }

  /** Absent when there is nothing to record per dispatch (no metrics, span not recording). */
  readonly onDispatch: ((info: DispatchInfo<S, C>) => void) | undefined;

  /** Metrics only: a counter, a bucket and an exemplar, all plain numbers. */
  readonly #countDispatch = (info: DispatchInfo<S, C>): void => {
    const record = (this.#records as DispatchRecord[])[info.responderIndex] as DispatchRecord;
    record.count++;
    const seconds = info.durationMs / 1000;
    const series = record.duration;
    const bucket = series.observe(seconds);
    if (this.#traceId !== undefined && series.exemplarTaken[bucket] === 0) {
      series.exemplar(bucket, this.#traceId, seconds, (this.#startTimeMs + info.elapsedMs) / 1000);
    }
  };

  /** Span events (and metrics when a registry is given). */
  readonly #recordDispatch = (info: DispatchInfo<S, C>): void => {
    if (this.#records !== undefined) this.#countDispatch(info);
    const events = this.#events as DispatchEvents;
    if (!this.#withExtras) {
      events.add(info);
      return;
    }
    let extra: Attributes | undefined;
    if (this.#stateAttributes !== undefined) extra = safeAttributes(this.#settings, info.state);
    if (this.#settings.captureContent) {
      const message = info.state.lastMessage;
      if (message !== this.#lastMessage) {
        this.#lastMessage = message;
        extra = {
          ...extra,
          [ATTR_DISPATCH_CONTENT]: truncate(message.content, this.#settings.maxContentLength),
        };
      }
    }
    events.add(info, extra);
  };

  onResponderError(index: number): void {
    this.#settings.metrics?.responderFailed(this.#orchestrator, this.#responders[index] as string);
  }

  onListenerError(): void {
    this.#settings.metrics?.listenerFailed(this.#orchestrator);
  }

  onConversationEnd(end: ConversationEnd<S, C>): void {
    const reason = end.ok ? end.result.decision.reason : end.error.reason;
    const dispatches = end.ok ? end.result.dispatchCount : end.error.dispatchCount;
    const elapsedMs = end.ok ? end.result.elapsedMs : end.error.elapsedMs;
    this.#settings.metrics?.conversationEnded(
      this.#metricsRecord as OrchestratorRecord,
      reason,
      elapsedMs / 1000,
      dispatches,
      this.#traceId,
      (this.#startTimeMs + elapsedMs) / 1000,
    );

    const span = this.#span;
    if (this.#openResponderSpan !== undefined) {
      endResponderSpan(
        this.#openResponderSpan,
        new Error(`Conversation ended (${reason}) before the responder answered`),
      );
      this.#openResponderSpan = undefined;
    }
    const events = this.#events;
    if (events !== undefined) {
      for (const e of events.kept()) {
        const attributes: Attributes = {
          [ATTR_DISPATCH_COUNT]: e.count,
          [ATTR_GEN_AI_AGENT_NAME]: this.#responders[e.responder],
          [ATTR_DISPATCH_ELAPSED_MS]: e.elapsedMs,
          [ATTR_DISPATCH_DURATION_MS]: e.durationMs,
          [ATTR_DECISION_TERMINATE]: e.decision.terminate,
          [ATTR_DECISION_REASON]: e.decision.reason,
          ...e.extra,
        };
        span.addEvent(EVENT_DISPATCH, attributes, this.#startTimeMs + e.elapsedMs);
      }
      span.setAttributes({
        [ATTR_CONVERSATION_DISPATCH_COUNT]: dispatches,
        [ATTR_CONVERSATION_END_REASON]: reason,
        [ATTR_CONVERSATION_ELAPSED_MS]: elapsedMs,
        [ATTR_CONVERSATION_EVENTS_DROPPED]: events.dropped,
      });
      if (end.ok) span.setStatus({ code: SpanStatusCode.OK });
      else if (reason !== 'aborted') {
        span.recordException(end.error);
        span.setStatus({ code: SpanStatusCode.ERROR, message: end.error.message });
      }
    }
    span.end(this.#startTimeMs + elapsedMs);
  }

  readonly #runInSpan = <T>(index: number, invoke: () => T): T => {
    const name = this.#responders[index] as string;
    const span = this.#settings.tracer.startSpan(
      SPAN_RESPONDER_PREFIX + name,
      {
        kind: SpanKind.INTERNAL,
        attributes: {
          [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_INVOKE_AGENT,
          [ATTR_GEN_AI_AGENT_NAME]: name,
          [ATTR_GEN_AI_CONVERSATION_ID]: this.#conversationId,
          [ATTR_RESPONDER_DISPATCH_NUMBER]: (this.#events?.total ?? 0) + 1,
        },
      },
      this.#context,
    );
    let result: T;
    try {
      result = context.with(trace.setSpan(this.#context, span), invoke);
    } catch (error) {
      endResponderSpan(span, error);
      throw error;
    }
    if (result === null || typeof (result as { then?: unknown })?.then !== 'function') {
      endResponderSpan(span, undefined);
      return result;
    }
    this.#openResponderSpan = span;
    return (result as unknown as PromiseLike<unknown>).then(
      (value) => {
        if (this.#openResponderSpan === span) this.#openResponderSpan = undefined;
        endResponderSpan(span, undefined);
        return value;
      },
      (error: unknown) => {
        if (this.#openResponderSpan === span) this.#openResponderSpan = undefined;
        endResponderSpan(span, error);
        throw error;
      },
    ) as T;
  };
}
