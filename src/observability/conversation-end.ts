/**
 * What a conversation span and the metrics record when a segment ends: the ending's counts, the
 * kept dispatch events, the ending explained, the failure (its exception, status and error.type)
 * and, with a sampler, the exemplars of a kept trace.
 */
import { type Attributes, type Context, type Span, SpanStatusCode } from '@opentelemetry/api';
import { DispatchDeadlineError, ResponderError } from '../core/spi/errors.ts';
import type { ConversationEnd } from '../core/spi/observer.ts';
import type { ConversationUsage } from '../core/spi/types.ts';
import type { DispatchEvents } from './dispatch-events.ts';
import type { HistogramSeries } from './dispatch-histogram.ts';
import { type ExemplarFilter, exemplarDeferOf } from './exemplar-filter.ts';
import { addExplanation, errorMessage, errorType, exceptionRecord } from './guard.ts';
import type { OrchestratorRecord, ResponderSlots } from './metric-records.ts';
import type { OrchestratorMetrics } from './metrics.ts';
import type { PrometheusRegistry } from './registry.ts';
import { endOnce, type OpenSpan } from './responder-span.ts';
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
  ATTR_CONVERSATION_USAGE_INPUT_TOKENS,
  ATTR_CONVERSATION_USAGE_OUTPUT_TOKENS,
  ATTR_DECISION_LIMIT,
  ATTR_DECISION_OBSERVED,
  ATTR_DECISION_REASON,
  ATTR_DECISION_TERMINATE,
  ATTR_DISPATCH_COUNT,
  ATTR_DISPATCH_DURATION_MS,
  ATTR_DISPATCH_ELAPSED_MS,
  ATTR_DISPATCH_USAGE_INPUT_TOKENS,
  ATTR_DISPATCH_USAGE_OUTPUT_TOKENS,
  ATTR_ERROR_TYPE,
  ATTR_GEN_AI_AGENT_NAME,
  END_REASON_SUSPENDED,
  EVENT_DISPATCH,
} from './semconv.ts';

/** A segment's end, as its span and metrics record it. */
export interface Ending {
  /** The end's reason, or `suspended`. */
  readonly reason: string;
  /**
   * Whether this end is the conversation's, as the core decided it (`end.ended`, with a store): a
   * durable segment that suspended or was handed off (its lease released, its store failed,
   * another process holds it) ends without ending it, and its ending is counted where it ends.
   * Without a store (`ended` undefined) every end is the conversation's but a suspension. The
   * span says it (`conversation.ended`) for the sampler: the one decision, made in the core.
   */
  readonly final: boolean;
  /** The conversation's dispatches so far (all segments). */
  readonly dispatches: number;
  /** The conversation's active time so far (all segments). */
  readonly elapsedMs: number;
  /**
   * A caller's abort is not an error: status left Unset, the reason's class says what it was
   * (`TimeoutError` for `AbortSignal.timeout()`).
   */
  readonly abortReason: string | undefined;
  /**
   * A failure is an ending the caller did not choose: status ERROR, the exception, error.type.
   * An abort is the caller's choice (status left Unset, the reason says it), as is every resolved
   * ending: instrumentation leaves OK to the application.
   */
  readonly failed: boolean;
  /** The core's usage ledger at the end (all segments). */
  readonly usage: ConversationUsage;
}

export function endingOf<S, C>(end: ConversationEnd<S, C>): Ending {
  if (end.ok) {
    const { result } = end;
    const suspended = result.suspended !== undefined;
    return {
      reason: suspended ? END_REASON_SUSPENDED : result.decision.reason,
      final: end.ended ?? !suspended,
      dispatches: result.dispatchCount,
      elapsedMs: result.elapsedMs,
      abortReason: undefined,
      failed: false,
      usage: result.usage,
    };
  }
  const { error } = end;
  const aborted = error.reason === 'aborted';
  return {
    reason: error.reason,
    final: end.ended ?? true,
    dispatches: error.dispatchCount,
    elapsedMs: error.elapsedMs,
    abortReason: aborted ? errorType(error.cause) : undefined,
    failed: !aborted,
    usage: error.usage,
  };
}

/** Where a conversation's metrics go. */
export interface EndMetrics {
  readonly metrics: OrchestratorMetrics;
  readonly record: OrchestratorRecord;
  readonly slots: ResponderSlots;
  readonly responders: readonly string[];
}

/**
 * Counts the end: the in-progress gauge only, for a segment that did not end its conversation;
 * else the ending (reason, duration, dispatches, tokens, the responder a deadline cut short).
 * Its exemplars come later, from `keptExemplars`, once the trace is delivered.
 */
export function countEnd<S, C>(
  to: EndMetrics,
  end: ConversationEnd<S, C>,
  ending: Ending,
  tokens: number | undefined,
  context: Context,
): void {
  const { metrics, record } = to;
  metrics.segmentEnded(record);
  if (!ending.final) return;
  const { reason, elapsedMs } = ending;
  metrics.countEnd(record, reason, elapsedMs / 1000, ending.dispatches, context);
  if (tokens !== undefined) metrics.conversationTokens(record, reason, tokens, context);
  if (!end.ok && end.error instanceof DispatchDeadlineError) {
    const index =
      end.error.responder === undefined ? -1 : to.responders.indexOf(end.error.responder);
    if (index >= 0) metrics.deadlinePassed(metrics.slot(record, to.slots, index));
  }
}

/**
 * Ends the responder span the end cut short: unmarked after an abort, failed otherwise (a
 * deadline, or another ending the responder did not choose).
 */
export function endCutShort<S, C>(
  open: OpenSpan,
  end: ConversationEnd<S, C>,
  ending: Ending,
  endMs: number,
  report: (error: unknown) => void,
): void {
  const { reason, abortReason } = ending;
  open.span.setAttribute(ATTR_CONVERSATION_END_REASON, reason);
  if (abortReason !== undefined) {
    open.span.setAttribute(ATTR_CONVERSATION_ABORT_REASON, abortReason);
    endOnce(open, endMs, report);
    return;
  }
  const error = end.ok ? new Error(`Conversation ended (${reason})`) : end.error;
  endOnce(open, endMs, report, { error }, reason);
}

/**
 * Writes the kept dispatches as span events, at most `room` of them, stamped `clockBase` plus
 * their elapsed time. Returns how many were written.
 */
export function writeDispatchEvents(
  span: Span,
  events: DispatchEvents,
  room: number,
  responders: readonly string[],
  clockBase: number,
): number {
  return events.forEachKept(
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
}

/** What the conversation span says of its segment, beside the ending. */
export interface SegmentAccount {
  /** This segment's dispatches without an event. */
  readonly dropped: number;
  /** The conversation is durable: the span says whether it ended it. */
  readonly durable: boolean;
  /** This segment reported usage: the span carries the conversation's totals. */
  readonly reportedUsage: boolean;
}

/** The ending's attributes on the conversation span: counts, reason, explanation, usage. */
export function setEndAttributes<S, C>(
  span: Span,
  end: ConversationEnd<S, C>,
  ending: Ending,
  account: SegmentAccount,
): void {
  span.setAttributes({
    [ATTR_CONVERSATION_DISPATCH_COUNT]: ending.dispatches,
    [ATTR_CONVERSATION_END_REASON]: ending.reason,
    [ATTR_CONVERSATION_ELAPSED_MS]: ending.elapsedMs,
    [ATTR_CONVERSATION_EVENTS_DROPPED]: account.dropped,
  });
  // On a durable conversation's span, and on any that did not end its conversation: absent,
  // the span's end is the conversation's.
  if (account.durable || !ending.final) span.setAttribute(ATTR_CONVERSATION_ENDED, ending.final);
  if (ending.abortReason !== undefined) {
    span.setAttribute(ATTR_CONVERSATION_ABORT_REASON, ending.abortReason);
  }
  if (end.ok) {
    // What ended it, explained: the deciding policy, what it measured, against what limit.
    const explanation: Attributes = {};
    addExplanation(
      explanation,
      end.result.decision,
      ATTR_CONVERSATION_END_OBSERVED,
      ATTR_CONVERSATION_END_LIMIT,
      ATTR_CONVERSATION_END_POLICY,
    );
    span.setAttributes(explanation);
  }
  if (account.reportedUsage) {
    span.setAttributes({
      [ATTR_CONVERSATION_USAGE_INPUT_TOKENS]: ending.usage.inputTokens,
      [ATTR_CONVERSATION_USAGE_OUTPUT_TOKENS]: ending.usage.outputTokens,
    });
  }
}

/**
 * The failure on the conversation span: the responder's own error (its class, message and throw
 * site), not only the library's wrapper, so a trace without responder spans still shows where it
 * failed.
 */
export function recordFailure(
  span: Span,
  error: Error,
  report: (error: unknown) => void,
  endMs: number,
): void {
  const original = failureOf(error);
  span.recordException(exceptionRecord(original, report), endMs);
  span.setAttribute(ATTR_ERROR_TYPE, errorType(original));
  span.setStatus({ code: SpanStatusCode.ERROR, message: errorMessage(error) });
}

/** What a failed conversation failed with: a responder's own error, not the library's wrapper. */
function failureOf(error: Error): unknown {
  // `throw undefined` is the responder's own value too (its error.type is _OTHER).
  return error instanceof ResponderError && 'cause' in error ? error.cause : error;
}

/** The `error.type` of a failed ending (as `recordFailure` sets it), undefined for any other. */
export function failureType<S, C>(end: ConversationEnd<S, C>, ending: Ending): string | undefined {
  return ending.failed && !end.ok ? errorType(failureOf(end.error)) : undefined;
}

/** With a sampler: the end's exemplars and one per kept dispatch, if the trace was kept. */
export function keptExemplars(
  to: EndMetrics,
  filter: ExemplarFilter,
  traceId: string,
  ending: Ending,
  tokens: number | undefined,
  events: DispatchEvents,
  clockBase: number,
  endMs: number,
): void {
  const { metrics, record } = to;
  const durations = to.slots.durations as HistogramSeries[];
  const { final, reason, elapsedMs, dispatches } = ending;
  const endExemplars = (): void => {
    if (!final) return;
    // Stamped with the span's own end, so the latest exemplar per bucket is the trace that ended last.
    const endTime = endMs / 1000;
    metrics.keptEndExemplars(
      record,
      reason,
      elapsedMs / 1000,
      dispatches,
      tokens,
      traceId,
      endTime,
    );
  };
  if (filter(traceId)) {
    endExemplars();
    events.forEachKept(Number.POSITIVE_INFINITY, (_count, atMs, durationMs, responder) => {
      durations[responder]?.keptExemplar(durationMs / 1000, traceId, (clockBase + atMs) / 1000);
    });
    return;
  }
  // Not decided yet (a conversation nested in another that still runs, or a trace not exported
  // yet): the exemplars wait for the decision, as plain numbers (the events are released).
  const kept: number[] = [];
  events.forEachKept(Number.POSITIVE_INFINITY, (_count, atMs, durationMs, responder) => {
    kept.push(durationMs / 1000, (clockBase + atMs) / 1000, responder);
  });
  exemplarDeferOf(metrics.registry as PrometheusRegistry)(traceId, () => {
    endExemplars();
    for (let i = 0; i < kept.length; i += 3) {
      durations[kept[i + 2] as number]?.keptExemplar(
        kept[i] as number,
        traceId,
        kept[i + 1] as number,
      );
    }
  });
}
