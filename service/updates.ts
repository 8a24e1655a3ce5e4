/**
 * What `/ws` sends: the message types a client (the page, a trading UI) reads. Public: the
 * README documents each one.
 */
import type { TerminationDecision } from '../src/index.ts';

/** After every dispatch of a conversation. */
export interface DispatchUpdate {
  readonly type: 'dispatch';
  readonly orchestrator: string;
  readonly conversationId: string;
  readonly dispatchCount: number;
  readonly spread: number;
  readonly decision: TerminationDecision;
  readonly elapsedMs: number;
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
  /** In fleet mode (`--workers`), the worker process that ended the conversation. */
  readonly worker?: string;
}

/** Every message sent after the hello and the history, each with the orchestrator it concerns. */
export type LiveMessage = DispatchUpdate | EndUpdate;

export type { HistoryMessage } from './history.ts';
