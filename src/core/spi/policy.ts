/**
 * The policy SPIs: who answers a message (turn policy) and when the conversation ends (termination
 * policy). The core defines them; `src/policies/` implements the built-in ones, and a plain
 * function or object of yours works the same way.
 */
import { endReasons } from './end-reasons.ts';
import type { ConversationState, Message, Responder, TerminationDecision, Usage } from './types.ts';

/** Responders (or their names) selected to answer, in order. Empty: nobody answers. */
export type TurnSelection<S, C = unknown> = readonly (Responder<S, C> | string)[];

/** What a turn function gets besides the message, the state and the responders. */
export interface TurnContext {
  /** Fires when the caller aborts the run or the per-dispatch deadline passes. */
  readonly signal: AbortSignal;
  /**
   * Reports tokens spent selecting (an LLM picking the next speaker): they join the conversation's
   * totals and `usage.turnPolicy`. Same rules as `ResponderContext.reportUsage`.
   */
  reportUsage(usage: Usage): void;
}

/**
 * Selects responders for one message. May be async (an LLM picking the next speaker). A selector
 * started by a `TurnPolicy` may carry `save`: its per-run state, for durable conversations.
 */
export interface TurnFunction<S, C = unknown> {
  (
    message: Message<C>,
    state: ConversationState<S, C>,
    responders: readonly Responder<S, C>[],
    context: TurnContext,
  ): TurnSelection<S, C> | Promise<TurnSelection<S, C>>;
  /**
   * The selector's per-run state as JSON-safe data, read at each commit of a durable
   * conversation and handed back to `TurnPolicy.start(responders, saved)` on resume.
   */
  save?: (() => unknown) | undefined;
}

/** A turn policy with per-conversation state. */
export interface TurnPolicy<S, C = unknown> {
  /** A short name for the policy (`round_robin`), for messages and traces. */
  readonly name: string;
  /**
   * Called once per conversation (and once per resumed segment); returns that conversation's
   * selector. `saved` is what the selector's `save()` returned at the last commit, when the
   * conversation resumes; a selector without `save` is started afresh (warned once per name).
   */
  start(responders: readonly Responder<S, C>[], saved?: unknown): TurnFunction<S, C>;
  /**
   * `true` when its selectors keep no per-run state (nothing to save, no warning on resume).
   * @default false
   */
  readonly stateless?: boolean;
}

/**
 * Decides, after one dispatch, whether the conversation ends. Must return a decision
 * (`{ terminate: boolean, reason: string }`); anything else fails the run with a `PolicyError`.
 */
export interface TerminationCheck<S, C = unknown> {
  (state: ConversationState<S, C>, elapsedMs: number): TerminationDecision;
  /**
   * The check's per-run state (a streak, a position) as JSON-safe data, read at each commit of a
   * durable conversation and handed back to `TerminationPolicy.start(saved)` on resume.
   */
  save?: (() => unknown) | undefined;
}

/**
 * When a conversation ends: `maxDispatches()`, `converged()`, `anyOf()` … or your own object.
 * `start()` is called once per conversation, so counters and streaks never leak between runs.
 */
export interface TerminationPolicy<S, C = unknown> {
  /** Shown as the decision's `policy`. */
  readonly name: string;
  /**
   * Called once per conversation (and once per resumed segment); returns that conversation's
   * check. `saved` is what the check's `save()` returned at the last commit, when the
   * conversation resumes; a check without `save` is started afresh (warned once per name).
   */
  start(saved?: unknown): TerminationCheck<S, C>;
  /**
   * `true` when its checks keep no per-run state (they read only the state and the elapsed
   * time): nothing to save, no warning on resume.
   * @default false
   */
  readonly stateless?: boolean;
}

/** The decision that lets the conversation go on. */
export const CONTINUE: TerminationDecision = Object.freeze({
  terminate: false,
  reason: 'continue',
});

/** Reasons the loop itself gives to the endings it decides; a termination policy may not use them. */
export const RESERVED_REASONS: readonly string[] = Object.freeze([
  'continue',
  ...endReasons((r) => r.decidedBy === 'loop'),
]);

const REASON = /^[a-z][a-z0-9_]{0,39}$/;

/** What `isReasonName` accepts, as error messages say it. */
export const REASON_EXPECTED = `a snake_case reason of 1-40 characters other than ${RESERVED_REASONS.join(', ')}`;

/** What a termination policy must return, as error messages say it. */
export function decisionExpected(policy: string): string {
  return `termination policy \`${policy}\` to return a decision ({ terminate: boolean, reason: string })`;
}

/**
 * A terminating decision's reason becomes an ending and a metric label: short snake_case
 * (1-40 characters) and not one of the reserved reasons.
 */
export function isReasonName(value: unknown): value is string {
  return typeof value === 'string' && REASON.test(value) && !RESERVED_REASONS.includes(value);
}

/** Whether a termination policy's answer is a decision: `{ terminate: boolean, reason: string }`. */
export function isDecision(value: unknown): value is TerminationDecision {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as TerminationDecision).terminate === 'boolean' &&
    typeof (value as TerminationDecision).reason === 'string'
  );
}
