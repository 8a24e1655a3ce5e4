/**
 * What `/ws` sends: the message types a client (the page, a trading UI) reads. Public: the
 * README documents each one.
 */
import type { TerminationDecision } from '../src/index.ts';
import type { ApprovalUpdate, DecidedUpdate } from './approvals.ts';

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
}

/** Every message sent after the hello and the history, each with the orchestrator it concerns. */
export type LiveMessage = DispatchUpdate | EndUpdate | ApprovalUpdate | DecidedUpdate;

export type { ApprovalsMessage, ApprovalUpdate, DecidedUpdate } from './approvals.ts';
export type { HistoryMessage } from './history.ts';
