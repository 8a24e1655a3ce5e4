/**
 * A conversation's run, part 1 of 3: what it holds. The fields of the loop (the queue, the
 * projection, the snapshot of the last dispatch, where the loop stands, the durable counters), the
 * snapshots it hands out, the usage it joins, and what the contexts, the observers' errors and the
 * store session read of it. The steps are in steps.ts, the start and the endings in run.ts; the
 * three are one object, split by concern (see run.ts for how to read them).
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  ConversationAbortedError,
  type ConversationError,
  type FailurePoint,
  unknownResponder,
} from '../spi/errors.ts';
import type { DispatchInfo } from '../spi/observer.ts';
import type { TerminationCheck, TurnFunction, TurnSelection } from '../spi/policy.ts';
import type {
  ConversationResult,
  ConversationState,
  ConversationSuspension,
  ConversationUsage,
  Message,
  Responder,
  UsageTotals,
} from '../spi/types.ts';
import type { RunConfig } from './config.ts';
import type { ContextHost, InvocationContext } from './context.ts';
import type { LoopPosition, Resumption, RunDurability } from './durability.ts';
import type { Observations } from './observations.ts';
import { History, MessageQueue } from './queue.ts';
import { NO_CONVERSATION_USAGE, NO_USAGE, readUsage, UsageLedger } from './usage.ts';

const NO_HISTORY: readonly never[] = Object.freeze([]);
/** What `_waitingFor` holds while the awaited promise is the turn policy's selection. */
export const WAITING_FOR_TURN = -1;
/** What `_waitingFor` holds while the awaited promise is a commit (a point the store can hold). */
export const WAITING_FOR_COMMIT = -2;
/** What run() and resume() read of their options (each read once, checked: orchestrator.ts). */
export interface CallOptions<C> {
  readonly signal?: AbortSignal | undefined;
  /** Stop at the next commit point, the call in flight finished (a worker's drain). */
  readonly drain?: AbortSignal | undefined;
  /** run()'s (undefined: a random UUID). */
  readonly conversationId?: string | undefined;
  /** resume()'s: the person's answer. */
  readonly input?: Message<C> | undefined;
  /** cancel()'s: end the conversation as aborted with this reason, running nothing. */
  readonly cancel?: { readonly reason: unknown } | undefined;
}

export abstract class RunState<S, C> implements ContextHost, FailurePoint<S, C> {
  protected readonly _config: RunConfig<S, C>;
  protected _input: Message<C>;
  protected readonly _conversationId: string;
  protected readonly _signal: AbortSignal | undefined;
  protected readonly _queue = new MessageQueue<Message<C>>();
  protected readonly _history: History<Message<C>> | undefined;
  protected _observations!: Observations<S, C>;
  protected _observationsStarted = false;
  // Which observer hooks exist, read once: a conversation pays only for the hooks it has.
  protected _wrapsResponders = false;
  protected _watchesStarts = false;
  protected _watchesDispatches = false;
  protected _projection!: S;
  /** The snapshot of the last completed dispatch (or of the start). */
  protected _state!: ConversationState<S, C>;
  protected _lastMessage: Message<C>;
  protected _dispatchCount = 0;
  protected _startedAt = 0;
  /** Set by begin once the policies started (a failure before leaves them undefined). */
  protected _check!: TerminationCheck<S, C>;
  protected _turn!: TurnFunction<S, C>;
  /** Each responder's context, made on its first invocation; the turn policy's. */
  protected readonly _contexts: (InvocationContext | undefined)[];
  protected _turnContext!: InvocationContext;
  /** The responder whose invocation is in progress (or was last). */
  protected _invoking = -1;
  /** Set when an abort raised while the observers heard of a dispatch cuts the run right after. */
  protected _cutAfterDispatch = false;
  /** Made on the first usage report: a conversation where nothing reports never has one. */
  protected _usage: UsageLedger | undefined;
  /** `state.usage`: shared by the snapshots until the next report. */
  protected _usageTotals: UsageTotals = NO_USAGE;
  protected _info!: { -readonly [K in keyof DispatchInfo<S, C>]: DispatchInfo<S, C>[K] };
  // Where the loop stands: the message being answered, its selected responders, the next one.
  protected _message!: Message<C>;
  protected _selection: TurnSelection<S, C> | undefined;
  protected _nextSelected = 0;
  /**
   * Set while a promise is awaited: the responder's index (>= 0), WAITING_FOR_TURN (the turn
   * policy's selection) or WAITING_FOR_COMMIT (a commit before the next step).
   */
  protected _waitingFor = WAITING_FOR_TURN;
  protected _waiting = false;
  // One clock read per dispatch (performance.now() costs ~55 ns here): a dispatch's duration
  // runs from the previous clock read to the end of its answer.
  protected _lastTick = 0;
  protected _lastYield = 0;
  protected _settled = false;
  protected _unsubscribe: (() => void) | undefined;
  protected _unsubscribeDrain: (() => void) | undefined;
  /** Set while the observers and the listener hear of a completed dispatch. */
  protected _notifying = false;
  protected _abortedWhileNotifying = false;
  /** Set when the `drain` signal aborts: the run hands back after the dispatch in flight. */
  protected _draining = false;
  protected readonly _drain: AbortSignal | undefined;
  protected _resolve!: (result: ConversationResult<S, C>) => void;
  protected _reject!: (error: ConversationError<S, C>) => void;
  protected _deadline: NodeJS.Timeout | undefined;
  protected _immediate: NodeJS.Immediate | undefined;
  /** Made when a responder first reads `context.signal`: most never do, and one costs ~1 µs. */
  protected _controller: AbortController | undefined;
  /** Why the responder's signal aborts (set when the run is aborted or a deadline passes). */
  protected _interruption: ConversationError<S, C> | undefined;
  protected _resumer: (() => void) | undefined;
  protected _onDeadline: (() => void) | undefined;
  // Durable conversations (a store): none of this is touched per dispatch without one, apart
  // from `_slow`, the one check completeDispatch makes (a store, or a suspension to settle).
  // The store session (core/durable/session.ts) does every store call; undefined without a store.
  protected _durable: RunDurability<S, C> | undefined;
  protected _slow: boolean;
  /**
   * The messages folded since the last commit landed, in order: what an incremental commit
   * writes (the store session takes them and trims what landed). Undefined without a store.
   */
  protected readonly _folded: Message<C>[] | undefined;
  protected _suspension: ConversationSuspension | undefined;
  /** Responder invocations so far (idempotency keys), and which one is a re-run, how often. */
  protected _invocations = 0;
  protected _retryInvocation = 0;
  protected _retryAttempt = 1;
  /** The stored conversation this run continues (resume, recover, cancel); undefined: a new one. */
  protected readonly _resumption: Resumption<S, C> | undefined;
  /** Where its checkpoint left the loop (undefined: a fresh start). */
  protected readonly _restored: LoopPosition<S, C> | undefined;
  /** Where the loop stands, for the errors it builds: the state at the end (FailurePoint). */
  state(): ConversationState<S, C> {
    return this.endState();
  }
  /** The conversation's id (ContextHost: the prefix of idempotency keys). */
  get conversationId(): string {
    return this._conversationId;
  }
  // What the store session reads (DurableHost).
  get input(): Message<C> {
    return this._input;
  }
  get settled(): boolean {
    return this._settled;
  }
  get invocations(): number {
    return this._invocations;
  }
  get dispatchCount(): number {
    return this._dispatchCount;
  }
  get folded(): Message<C>[] | undefined {
    return this._folded;
  }
  get observations(): Observations<S, C> {
    return this._observations;
  }
  /** The time since the conversation started (FailurePoint). */
  elapsedMs(): number {
    return this.elapsed();
  }
  constructor(
    config: RunConfig<S, C>,
    input: Message<C>,
    options: CallOptions<C>,
    resumption?: Resumption<S, C>,
  ) {
    this._config = config;
    this._slow = config.durable !== undefined || resumption !== undefined;
    this._folded = this._slow ? [] : undefined;
    this._resumption = resumption;
    this._restored = resumption?.position;
    if (resumption !== undefined) {
      this._invocations = resumption.invocations;
      this._retryInvocation = this._invocations + 1;
      this._retryAttempt = resumption.attempt;
    }
    this._input = input;
    this._lastMessage = input;
    // randomUUID() builds its string from ~20 concatenated pieces (480 bytes held per waiting
    // conversation, measured); toLowerCase() of it is the same id as one flat string (54 bytes).
    this._conversationId = options.conversationId ?? randomUUID().toLowerCase();
    this._signal = options.signal;
    this._drain = options.drain;
    this._history = config.historySize > 0 ? new History(config.historySize) : undefined;
    // Sized once: filled by index, a `[]` would grow a 16-slot backing store (measured).
    this._contexts = new Array(config.responders.length);
  }
  /**
   * Where the loop stands, for the store session to commit (DurableHost). With `reopen`, a
   * responder's call is open (the run was cut while it ran): the position is the one before that
   * call, its attempt raised, so the call runs again with its key and attempt > 1.
   */
  position(reopen: boolean): LoopPosition<S, C> {
    const selection = this._selection;
    const next: number[] = [];
    if (selection !== undefined) {
      for (
        let i = reopen ? this._nextSelected - 1 : this._nextSelected;
        i < selection.length;
        i++
      ) {
        next.push(this.responderIndexOf(selection[i]));
      }
    }
    return {
      input: this._input,
      projection: this._projection,
      lastMessage: this._lastMessage,
      queue: this._queue.toArray(),
      history: this._history?.toArray(),
      answering: next.length === 0 ? undefined : { message: this._message, next },
      dispatchCount: this._dispatchCount,
      invocations: reopen ? this._invocations - 1 : this._invocations,
      attempt: reopen
        ? (this._invocations === this._retryInvocation ? this._retryAttempt : 1) + 1
        : this._invocations + 1 === this._retryInvocation
          ? this._retryAttempt
          : 1,
      elapsedMs: this.elapsed(),
      usage: reopen
        ? this._usage?.toStored({
            index: this._invoking,
            dispatchNumber: this._dispatchCount + 1,
          })
        : this._usage?.toStored(),
      // Undefined when the run failed before its policies started (its ending is committed).
      termination: (this._check as TerminationCheck<S, C> | undefined)?.save?.(),
      turn: (this._turn as TurnFunction<S, C> | undefined)?.save?.(),
      observers: this._observations.save(),
      suspended: this._suspension,
    };
  }
  protected responderIndexOf(selected: Responder<S, C> | string | undefined): number {
    const index = this._config.responderIndex.get(selected as Responder<S, C> | string);
    if (index === undefined) {
      const config = this._config;
      throw unknownResponder(selected, config.name, config.responderNames, this);
    }
    return index;
  }
  /** A report through a context: checked (a bad value throws to the reporter), then counted. */
  reportUsage(index: number, value: unknown, dispatchNumber: number): void {
    if (this._settled) return;
    const usage = readUsage(value);
    // Reading the report ran the app's getters, which may have ended the run.
    if (this._settled) return;
    this._usage ??= new UsageLedger();
    const ledger = this._usage;
    ledger.add(index, usage, dispatchNumber, index >= 0 && index === this._invoking);
    this._usageTotals = ledger.totals;
    // The turn policy's context keeps no number: its reports belong to the dispatch to come.
    this._observations.usageReported(
      index,
      usage,
      index < 0 ? this._dispatchCount + 1 : dispatchNumber,
    );
  }
  /** The usage `run()` ends with. */
  protected finalUsage(): ConversationUsage {
    return this._usage === undefined
      ? NO_CONVERSATION_USAGE
      : this._usage.final(this._config.responderNames);
  }
  responderSignal(): AbortSignal {
    if (this._controller === undefined) {
      this._controller = new AbortController();
      if (this._interruption !== undefined) this._controller.abort(this.abortReason());
    }
    return this._controller.signal;
  }
  protected abortReason(): unknown {
    const interruption = this._interruption;
    return interruption instanceof ConversationAbortedError ? interruption.cause : interruption;
  }
  protected abortedError(): ConversationAbortedError<S, C> {
    return new ConversationAbortedError(this.endState(), this.elapsed(), this._signal?.reason);
  }
  protected drainedError(): ConversationAbortedError<S, C> {
    return new ConversationAbortedError(this.endState(), this.elapsed(), this._drain?.reason);
  }
  protected clearDeadline(): void {
    if (this._deadline !== undefined) {
      clearTimeout(this._deadline);
      this._deadline = undefined;
    }
  }
  /** The state as it is now: the last dispatch's snapshot if nothing moved since, else a fresh one. */
  protected endState(): ConversationState<S, C> {
    const state = this._state;
    if (
      state !== undefined &&
      state.queueDepth === this._queue.length &&
      state.dispatchCount === this._dispatchCount &&
      state.lastMessage === this._lastMessage &&
      state.projection === this._projection &&
      state.usage === this._usageTotals
    ) {
      return state;
    }
    return this.snapshot(this._dispatchCount);
  }
  protected snapshot(dispatchCount: number): ConversationState<S, C> {
    return {
      conversationId: this._conversationId,
      projection: this._projection,
      lastMessage: this._lastMessage,
      queueDepth: this._queue.length,
      dispatchCount,
      history: this._history === undefined ? NO_HISTORY : this._history.toArray(),
      usage: this._usageTotals,
    };
  }
  protected elapsed(): number {
    return performance.now() - this._startedAt;
  }
}
