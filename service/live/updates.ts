/**
 * What `/ws` sends: the message types a client (the page, a trading UI) reads. Public: the
 * README documents each one. The orchestrators' listener hands the service one `DispatchUpdate`
 * per dispatch and one `EndUpdate` per conversation; clients get them coalesced, in one
 * `updates` frame per interval (`live.ts`).
 */
import type { TerminationDecision } from '../../src/index.ts';
import type { ApprovalUpdate, DecidedUpdate } from '../desks/approvals.ts';

/** After every dispatch of a conversation. */
export interface DispatchUpdate {
  readonly type: 'dispatch';
  readonly orchestrator: string;
  readonly conversationId: string;
  readonly dispatchCount: number;
  readonly spread: number;
  readonly decision: TerminationDecision;
  readonly elapsedMs: number;
  /** Set when this segment resumed the conversation after a crash or a shutdown of the service. */
  readonly resumed?: true;
  /** In fleet mode (`--workers`), the worker process that ran this dispatch (`worker-1`, …). */
  readonly worker?: string;
}

/**
 * Once per conversation, however it ended: converged, max_dispatches, timeout, error, aborted,
 * deadline. Failures and aborts end without a terminating dispatch, so the listener alone cannot
 * say how a conversation ended.
 */
export interface EndUpdate {
  readonly type: 'end';
  readonly orchestrator: string;
  readonly conversationId: string;
  readonly reason: string;
  readonly dispatchCount: number;
  /** The spread reached at the end. */
  readonly spread: number;
  readonly elapsedMs: number;
  /** Tokens the desks' simulated models spent in the conversation (`result.usage`). */
  readonly tokens: { readonly input: number; readonly output: number };
  /**
   * The conversation's trace (32 hex digits), when tracing is on and the trace was sampled; the
   * page links it through `--trace-url`.
   */
  readonly traceId?: string;
  /** Set when the conversation was resumed after a crash or a shutdown of the service. */
  readonly resumed?: true;
  /** In fleet mode (`--workers`), the worker process that ended the conversation. */
  readonly worker?: string;
}

/** What the updates read of a desks conversation's state: its id and its book's spread. */
export interface SpreadState {
  readonly conversationId: string;
  readonly projection: { readonly spread: number };
}

/**
 * The `DispatchUpdate` of one dispatch, from what the orchestrators' listener hears, with what
 * the mode adds (`resumed` in the service, `worker` in fleet mode).
 */
export function dispatchUpdate(
  orchestrator: string,
  state: SpreadState,
  decision: TerminationDecision,
  dispatchCount: number,
  elapsedMs: number,
  more: Pick<DispatchUpdate, 'resumed' | 'worker'>,
): DispatchUpdate {
  return {
    type: 'dispatch',
    orchestrator,
    conversationId: state.conversationId,
    dispatchCount,
    spread: state.projection.spread,
    decision,
    elapsedMs,
    ...more,
  };
}

/** What an `EndUpdate` reads of a conversation's result (or of its error). */
export interface EndedConversation {
  readonly state: { readonly projection: { readonly spread: number } };
  readonly dispatchCount: number;
  readonly elapsedMs: number;
  readonly usage: { readonly inputTokens: number; readonly outputTokens: number };
}

/** The `EndUpdate` of a conversation that ended with `reason`, with what the mode adds. */
export function endUpdate(
  orchestrator: string,
  conversationId: string,
  reason: string,
  end: EndedConversation,
  more: Pick<EndUpdate, 'traceId' | 'resumed' | 'worker'>,
): EndUpdate {
  return {
    type: 'end',
    orchestrator,
    conversationId,
    reason,
    dispatchCount: end.dispatchCount,
    spread: end.state.projection.spread,
    elapsedMs: end.elapsedMs,
    tokens: { input: end.usage.inputTokens, output: end.usage.outputTokens },
    ...more,
  };
}

/** Every message sent after the hello and the history, each with the orchestrator it concerns. */
export type LiveMessage = DispatchUpdate | EndUpdate | ApprovalUpdate | DecidedUpdate;

export type { ApprovalsMessage, ApprovalUpdate, DecidedUpdate } from '../desks/approvals.ts';

/**
 * A spread as `/ws` sends it: four significant digits draw the same on a log scale and take half
 * the bytes.
 */
export function compactSpread(spread: number): number {
  return Number(spread.toPrecision(4));
}

/** A conversation's dispatches since the previous `updates` frame. */
export interface DispatchesSince {
  readonly orchestrator: string;
  readonly conversationId: string;
  /** The dispatch count of `spreads[0]`; the rest follow one dispatch each. */
  readonly fromDispatch: number;
  /** The spread after each of those dispatches, four significant digits. */
  readonly spreads: readonly number[];
  /** The decision after the newest of them. */
  readonly decision: TerminationDecision;
  /** The conversation's elapsed time at the newest of them. */
  readonly elapsedMs: number;
  /** In fleet mode, the worker that ran the newest of them. */
  readonly worker?: string;
  /** Set when a segment that resumed the conversation after a crash or a shutdown ran them. */
  readonly resumed?: true;
}

/**
 * Everything that happened in one interval, sent once per interval to every client (only what
 * concerns its orchestrator, when it subscribed to one): each conversation that dispatched, then
 * each that ended. A client that connected during the interval gets the next one.
 */
export interface UpdatesMessage {
  readonly type: 'updates';
  readonly dispatches: readonly DispatchesSince[];
  /** The `EndUpdate`s, without their `type`. */
  readonly ends: readonly Omit<EndUpdate, 'type'>[];
}

/** One conversation in flight, as the history message carries it. */
export interface ConversationTail {
  readonly orchestrator: string;
  readonly conversationId: string;
  /** The dispatch count of `spreads[0]`; the rest follow one dispatch each. */
  readonly fromDispatch: number;
  readonly spreads: readonly number[];
  /** Set when this segment resumed it after a crash or a shutdown of the service. */
  readonly resumed?: true;
}

/** The `history` message. */
export interface HistoryMessage {
  readonly type: 'history';
  /** In flight when the client connected, oldest first, as many as fit in the byte bound. */
  readonly conversations: readonly ConversationTail[];
  /** Conversations in flight that did not fit. */
  readonly omitted: number;
  /** Endings since the service started, by orchestrator, then reason. */
  readonly totals: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /**
   * When the service started (ISO 8601), for "since the service started": the oldest ending
   * its store keeps, when it keeps one from an earlier run, else this process's start.
   */
  readonly since: string;
  /** Conversations this process resumed after a crash or a shutdown that have ended since. */
  readonly resumedEnded: number;
}
