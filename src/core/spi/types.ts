import type { Suspend } from './suspend.ts';

/**
 * The vocabulary of a conversation: messages, responders, the state snapshot that policies and
 * listeners see, and the decisions the termination policy hands back.
 */

/** One message of a conversation. `content` is whatever your agents exchange. */
export interface Message<C = unknown> {
  /** Name of the responder (or outside party, e.g. `user`) that wrote the message. */
  readonly sender: string;
  /** The payload. Never recorded by the telemetry unless content capture is switched on. */
  readonly content: C;
  /** Names of the responders the message is addressed to (used by the `addressed()` turn policy). */
  readonly recipients?: readonly string[];
}

/**
 * The read-only snapshot of a conversation handed to responders, policies and listeners.
 * A fresh snapshot is made after every dispatch, so keeping a reference to one is safe.
 */
export interface ConversationState<S, C = unknown> {
  /** The conversation's id: the one `run()` was given, or a generated one. */
  readonly conversationId: string;
  /** The projection: the fold of every message so far. This is what the conversation keeps. */
  readonly projection: S;
  /** The message most recently folded into the projection (the input before any dispatch). */
  readonly lastMessage: Message<C>;
  /** Messages waiting in the queue. */
  readonly queueDepth: number;
  /** Successful dispatches so far. */
  readonly dispatchCount: number;
  /**
   * The most recent messages, oldest first, at most `historySize` of them. Empty unless the
   * orchestrator was built with `historySize > 0`: a full transcript costs memory and time.
   */
  readonly history: readonly Message<C>[];
  /**
   * Tokens reported so far (`context.reportUsage`), by responders and the turn policy, including
   * those of invocations that failed or were skipped. Zeros when nothing reported.
   */
  readonly usage: UsageTotals;
}

/** What a responder (or a turn policy) reports having spent; counts are non-negative integers. */
export interface Usage {
  /** Input (prompt) tokens, cache reads included. */
  readonly inputTokens?: number;
  /** Output (completion) tokens, reasoning included. */
  readonly outputTokens?: number;
  /** Input tokens read from a prompt cache (part of `inputTokens`). */
  readonly cacheReadInputTokens?: number;
  /** Output tokens spent on reasoning (part of `outputTokens`). */
  readonly reasoningOutputTokens?: number;
  /** Model name: a bounded name (same rule as responder names). */
  readonly model?: string;
}

/** Running totals. The optional kinds are present once any report had them. */
export interface UsageTotals {
  /** Input (prompt) tokens, cache reads included. */
  readonly inputTokens: number;
  /** Output (completion) tokens, reasoning included. */
  readonly outputTokens: number;
  /** Input tokens read from a prompt cache (part of `inputTokens`). */
  readonly cacheReadInputTokens?: number;
  /** Output tokens spent on reasoning (part of `outputTokens`). */
  readonly reasoningOutputTokens?: number;
}

/** Final totals of a conversation: on ConversationResult.usage and ConversationError.usage. */
export interface ConversationUsage extends UsageTotals {
  /** Per responder name, only responders that reported anything (a null-prototype object). */
  readonly byResponder: Readonly<Record<string, UsageTotals>>;
  /** What the turn policy reported through its context, when it did. */
  readonly turnPolicy?: UsageTotals;
}

/**
 * What the termination policy says after a dispatch. A "continue" decision has
 * `terminate: false` (and reason `continue`).
 */
export interface TerminationDecision {
  /** `true` ends the conversation after this dispatch; `false` lets it go on. */
  readonly terminate: boolean;
  /** Why: `continue`, `converged`, `max_dispatches`, `timeout`, `stopped`, or a user-named reason. */
  readonly reason: string;
  /**
   * The name of the policy that decided: for `anyOf(...)` the member that decided; for
   * `allOf(...)` the composite's own name (`all_of(a,b)`), since every member decided.
   */
  readonly policy?: string;
  /** What the deciding policy measured (the measure, the dispatch count, the elapsed ms, the tokens). */
  readonly observed?: number;
  /** The threshold the deciding policy compared `observed` with. */
  readonly limit?: number;
}

/** What a responder may answer: nothing, one message, several, or `suspend(payload)`. */
export type ResponderOutput<C> = Message<C> | readonly Message<C>[] | Suspend | undefined | null;

/** What a responder gets besides the message and the state. One object per conversation: read it during the call. */
export interface ResponderContext {
  /** Fires when the caller aborts the run or the per-dispatch deadline passes. */
  readonly signal: AbortSignal;
  /** 1-based number of the dispatch this invocation would be if it succeeds. */
  readonly dispatchNumber: number;
  /**
   * `{conversationId}:{invocation}`: the same for a given invocation however often it is run
   * (a re-run after a crash keeps it), different for every other invocation of every
   * conversation. Use it to deduplicate side effects (a payment, an email, a cached model call).
   */
  readonly idempotencyKey: string;
  /** 1 on the first invocation; more when the invocation runs again after a crash (see docs/durability.md). */
  readonly attempt: number;
  /**
   * Reports tokens this invocation spent; call it once per model call, during the invocation.
   * The counts join `state.usage` and the result's `usage`, even if the invocation then fails or
   * is skipped. A bad value throws a `TypeError` naming what came and changes no total; a report
   * made after the run settled is ignored.
   */
  reportUsage(usage: Usage): void;
}

/** An agent of the conversation. Sync or async. */
export interface Responder<S, C = unknown> {
  /**
   * Unique within an orchestrator; becomes a bounded metric label: 1-64 characters (ASCII letters,
   * digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`.
   */
  readonly name: string;
  /**
   * Who serves this agent's model (`openai`, `anthropic`, `aws.bedrock`, …), when there is one.
   * Telemetry records it as `gen_ai.provider.name`; leave it out for algorithmic agents. The name
   * rule of `name` applies.
   */
  readonly provider?: string;
  /**
   * Answers `message`: nothing, a message, or an array of messages (sync or a promise). Each
   * answer is folded into the state and queued; `context.signal` fires on abort or deadline.
   */
  respond(
    message: Message<C>,
    state: ConversationState<S, C>,
    context: ResponderContext,
  ): ResponderOutput<C> | Promise<ResponderOutput<C>>;
}

/**
 * The fold that turns messages into the conversation's state. `initial()` is called once per
 * conversation, so conversations share nothing mutable. `fold` may return a new value or the
 * same (mutated) one: the state belongs to one conversation only.
 */
export interface Projection<S, C = unknown> {
  /** The state a conversation starts from, given its input message. */
  initial(input: Message<C>): S;
  /** The state after `message`: called for every message a responder answers (not the input). */
  fold(state: S, message: Message<C>): S;
}

/**
 * The seed's functional SPI: called exactly once after every successful dispatch, after that
 * dispatch's termination decision. `elapsedMs` is the time since the conversation started.
 * It runs inline on the dispatch path and is not awaited: any return value is ignored, and a
 * returned promise's rejection goes to `onListenerError`. Any lambda type-checks.
 */
export type ConversationListener<S, C = unknown> = (
  state: ConversationState<S, C>,
  decision: TerminationDecision,
  dispatchCount: number,
  elapsedMs: number,
  /**
   * Reports a failure to `onListenerError` (and the observers) as a throw or a rejection would:
   * for work the listener hands off instead of returning. The orchestrator always passes it; it
   * may be called at any time, also after the run settled.
   */
  reportError?: (error: unknown) => void,
) => unknown;

/** Every way a conversation can end, as the `reason` of its result or error. */
export type EndReason =
  | 'queue_exhausted'
  | 'aborted'
  | 'deadline'
  | 'error'
  | 'queue_overflow'
  | (string & {});

/** What `run()` resolves with. */
export interface ConversationResult<S, C = unknown> {
  /** The conversation's id: the one `run()` was given, or a generated one. */
  readonly conversationId: string;
  /** The state at the end. */
  readonly state: ConversationState<S, C>;
  /** The last decision: terminating, or `{ terminate: true, reason: 'queue_exhausted' }`. */
  readonly decision: TerminationDecision;
  /** Successful dispatches in the conversation. */
  readonly dispatchCount: number;
  /** Milliseconds from the start to the end (high resolution). */
  readonly elapsedMs: number;
  /** Tokens the conversation's responders and turn policy reported, in total and per responder. */
  readonly usage: ConversationUsage;
  /**
   * Set when a responder returned `suspend(payload)`: the conversation waits (in its store) for
   * `orchestrator.resume(conversationId, { input })`. `decision` then does not terminate.
   */
  readonly suspended?: ConversationSuspension | undefined;
}

/** Why a conversation waits: who suspended it and the payload it gave (what to ask a person). */
export interface ConversationSuspension {
  /** The responder that returned `suspend(payload)`. */
  readonly responder: string;
  /** What it passed to `suspend()`, as stored (through the orchestrator's codec). */
  readonly payload: unknown;
}

/** Per-run options. */
export interface RunOptions {
  /** Aborting it aborts the running responder's signal and rejects the run promptly. */
  readonly signal?: AbortSignal;
  /**
   * 1-128 characters: ASCII letters, digits, `_`, `.`, `:` or `-`, starting with a letter, a
   * digit or `_` (it is copied onto every span). Defaults to a random UUID. With a `store`, an id
   * already stored rejects the run with a `ConversationExistsError`.
   */
  readonly conversationId?: string;
  /**
   * A gentler stop than `signal`, for a worker that is draining: when it aborts, the run lets the
   * responder call in flight finish, completes and commits that dispatch, and hands the
   * conversation back at that commit point (rejecting with `ConversationAbortedError`, its `cause`
   * the signal's reason; the conversation stays resumable), instead of cutting the call, which
   * would then run again elsewhere. `signal` still cuts at once.
   * @default undefined
   */
  readonly drain?: AbortSignal;
}

/** What `orchestrator.resume(conversationId, options)` takes. */
export interface ResumeOptions<C = unknown> {
  /**
   * A message queued first (a person's answer to a suspension): folded into the projection like
   * a responder's answer, then answered as the turn policy says.
   * @default undefined (nothing added)
   */
  readonly input?: Message<C>;
  /** As for `run()`: aborting it rejects the resume; the conversation stays resumable. */
  readonly signal?: AbortSignal;
  /** As for `run()`: stop at the next commit point, the call in flight finished. */
  readonly drain?: AbortSignal;
}

/** What `orchestrator.cancel(conversationId, options)` takes. */
export interface CancelOptions {
  /**
   * Why: the `cause` of the `ConversationAbortedError` the conversation ends with (kept in the
   * store when it is a string), and the span's abort reason.
   * @default undefined
   */
  readonly reason?: unknown;
}

/** What `orchestrator.recover(options)` takes. */
export interface RecoverOptions {
  /**
   * Conversations resumed at once.
   * @default 8
   */
  readonly concurrency?: number;
  /** Stops taking new conversations and aborts those being resumed (they stay resumable). */
  readonly signal?: AbortSignal;
}

/** What `orchestrator.recover()` resolves with: how many it resumed and how they ended. */
export interface RecoverResult {
  /** Conversations this call took over and ran. */
  readonly resumed: number;
  /** Of those, how many ended (resolved with a terminating decision). */
  readonly ended: number;
  /** Of those, how many suspended again. */
  readonly suspended: number;
  /** Of those, how many rejected (a `ConversationError`: failed, aborted, lease lost). */
  readonly failed: number;
  /** Conversations listed but taken by another process first (not counted in `resumed`). */
  readonly skipped: number;
}
