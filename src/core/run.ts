/**
 * One conversation: the queue loop of DESIGN §1. This is the hot path: per dispatch it does one
 * responder call, the fold, one snapshot allocation, the termination check, the observers and the
 * listener, and nothing else unless a signal, a deadline or history asks for it.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import {
  CONTINUE,
  type TerminationCheck,
  type TerminationPolicy,
} from '../policies/termination.ts';
import type { TurnFunction, TurnPolicy, TurnSelection } from '../policies/turn.ts';
import {
  ConversationAbortedError,
  ConversationError,
  DispatchDeadlineError,
  describeCause,
  describeValue,
  PolicyError,
  QueueOverflowError,
  ResponderError,
} from './errors.ts';
import { Observations } from './observations.ts';
import type { ConversationEnd, ConversationObserver, DispatchInfo } from './observer.ts';
import type { ResponderFailurePolicy } from './orchestrator.ts';
import { History, MessageQueue } from './queue.ts';
import type {
  ConversationListener,
  ConversationResult,
  ConversationState,
  Message,
  Projection,
  Responder,
  ResponderContext,
  RunOptions,
  TerminationDecision,
} from './types.ts';

/** The orchestrator's validated configuration, shared read-only by its runs. */
export interface RunConfig<S, C> {
  readonly name: string;
  readonly responders: readonly Responder<S, C>[];
  readonly responderNames: readonly string[];
  readonly responderIndex: ReadonlyMap<Responder<S, C> | string, number>;
  readonly turnPolicy: TurnPolicy<S, C> | TurnFunction<S, C>;
  readonly projection: Projection<S, C>;
  readonly termination: TerminationPolicy<S, C>;
  readonly listener: ConversationListener<S, C> | undefined;
  readonly observers: readonly ConversationObserver<S, C>[];
  readonly dispatchTimeoutMs: number | undefined;
  readonly maxQueueLength: number;
  readonly historySize: number;
  readonly onResponderError: ResponderFailurePolicy<S, C>;
  readonly onListenerError: (error: unknown) => void;
  readonly yieldIntervalMs: number;
}

const QUEUE_EXHAUSTED: TerminationDecision = Object.freeze({
  terminate: true,
  reason: 'queue_exhausted',
});
const NO_HISTORY: readonly never[] = Object.freeze([]);
/** What #invoke answers when the responder threw synchronously and the failure was handled. */
const FAILED = Symbol('failed');

/** Thrown inside the loop when the caller aborts or a deadline passes; turned into an error. */
class Interrupt {
  constructor(
    readonly kind: 'aborted' | 'deadline',
    /** The abort's reason, or the responder whose deadline passed (undefined: the turn policy). */
    readonly cause: unknown,
  ) {}
}

function isThenable<T>(value: unknown): value is PromiseLike<T> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as PromiseLike<T>).then === 'function'
  );
}

export class ConversationRun<S, C> {
  readonly #config: RunConfig<S, C>;
  readonly #input: Message<C>;
  readonly #conversationId: string;
  readonly #signal: AbortSignal | undefined;
  /** Made when a responder first reads `context.signal`: most never do, and one costs ~1 µs. */
  #controller: AbortController | undefined;
  readonly #queue = new MessageQueue<Message<C>>();
  readonly #history: History<Message<C>> | undefined;
  #observations!: Observations<S, C>;
  #projection!: S;
  #state!: ConversationState<S, C>;
  #lastMessage: Message<C>;
  #dispatchCount = 0;
  #startedAt = 0;
  #interrupted: Interrupt | undefined;

  constructor(config: RunConfig<S, C>, input: Message<C>, options: RunOptions) {
    this.#config = config;
    this.#input = input;
    this.#lastMessage = input;
    this.#conversationId = options.conversationId ?? randomUUID();
    this.#signal = options.signal;
    this.#history = config.historySize > 0 ? new History(config.historySize) : undefined;
  }

  /** Runs the conversation; settles exactly once. */
  execute(): Promise<ConversationResult<S, C>> {
    return new Promise<ConversationResult<S, C>>((resolve, reject) => {
      this.#settle = (outcome) => {
        if (outcome.ok) resolve(outcome.result);
        else reject(outcome.error);
      };
      this.#begin();
    });
  }

  // The loop is a pump: it runs synchronously until an answer is a promise, then resumes from that
  // promise's callback. Resuming an `await` in a big async function costs ~200 ns per dispatch
  // here (the frame's registers are restored); a prebound callback costs a promise reaction only.
  #settle!: (end: ConversationEnd<S, C>) => void;
  #settled = false;
  #check!: TerminationCheck<S, C>;
  #turn!: TurnFunction<S, C>;
  #lastTick = 0;
  #lastYield = 0;
  #context!: ResponderContext & { dispatchNumber: number };
  #info!: { -readonly [K in keyof DispatchInfo<S, C>]: DispatchInfo<S, C>[K] };
  #message!: Message<C>;
  #selection: TurnSelection<S, C> | undefined;
  #selected = 0;
  #pendingIndex = 0;
  #timer: NodeJS.Timeout | undefined;
  readonly #onAbort = () => this.#interrupt(new Interrupt('aborted', this.#signal?.reason));
  readonly #resume = () => this.#pump();
  readonly #onSelection = (selection: TurnSelection<S, C>) => {
    if (this.#settled) return;
    this.#clearTimer();
    this.#lastTick = performance.now();
    try {
      this.#useSelection(selection);
    } catch (error) {
      this.#fail(error);
      return;
    }
    this.#pump();
  };
  readonly #onSelectionError = (error: unknown) => {
    if (this.#settled) return;
    this.#clearTimer();
    this.#fail(new PolicyError('turn', this.#state, this.#elapsed(), error));
  };
  readonly #onAnswer = (output: unknown) => {
    if (this.#settled) return;
    this.#clearTimer();
    try {
      if (this.#complete(this.#pendingIndex, output).terminate) return;
    } catch (error) {
      this.#fail(error);
      return;
    }
    this.#pump();
  };
  readonly #onAnswerError = (error: unknown) => {
    if (this.#settled) return;
    this.#clearTimer();
    try {
      this.#failed(this.#pendingIndex, error);
    } catch (thrown) {
      this.#fail(thrown);
      return;
    }
    this.#pump();
  };

  #begin(): void {
    const config = this.#config;
    this.#startedAt = performance.now();
    this.#observations = new Observations(config.observers, {
      orchestrator: config.name,
      conversationId: this.#conversationId,
      input: this.#input,
      responders: config.responderNames,
      startTimeMs: performance.timeOrigin + this.#startedAt,
    });
    try {
      try {
        this.#projection = config.projection.initial(this.#input);
      } catch (error) {
        this.#state = this.#snapshot();
        throw new PolicyError('projection', this.#state, 0, error);
      }
      this.#history?.push(this.#input);
      this.#state = this.#snapshot();
      if (this.#signal !== undefined) {
        if (this.#signal.aborted) throw new Interrupt('aborted', this.#signal.reason);
        this.#signal.addEventListener('abort', this.#onAbort, { once: true });
      }
      this.#check = config.termination.start();
      this.#turn =
        typeof config.turnPolicy === 'function'
          ? config.turnPolicy
          : config.turnPolicy.start(config.responders);
    } catch (error) {
      this.#fail(error);
      return;
    }
    const run = this;
    this.#context = {
      get signal(): AbortSignal {
        return run.#responderSignal();
      },
      dispatchNumber: 0,
    };
    this.#info = {
      state: this.#state,
      decision: CONTINUE,
      dispatchCount: 0,
      elapsedMs: 0,
      responderIndex: 0,
      durationMs: 0,
    };
    // One clock read per dispatch (performance.now() costs ~55 ns here): a dispatch's duration
    // runs from the previous clock read to the end of its answer.
    this.#lastTick = this.#lastYield = this.#startedAt;
    this.#queue.push(this.#input);
    this.#observations.enter(this.#resume);
  }

  /** Runs dispatches until the conversation ends or must wait for a promise. */
  #pump(): void {
    try {
      const queue = this.#queue;
      const yieldIntervalMs = this.#config.yieldIntervalMs;
      for (;;) {
        if (this.#interrupted !== undefined) throw this.#interrupted;
        let selection = this.#selection;
        if (selection === undefined) {
          if (queue.length === 0) {
            this.#succeed(QUEUE_EXHAUSTED);
            return;
          }
          this.#message = queue.shift();
          const selected = this.#select(this.#turn, this.#message);
          if (isThenable(selected)) {
            this.#await(selected, undefined, this.#onSelection, this.#onSelectionError);
            return;
          }
          selection = this.#useSelection(selected);
        }
        if (this.#selected >= selection.length) {
          this.#selection = undefined;
          continue;
        }
        const index = this.#resolve(selection[this.#selected++]);
        const output = this.#invoke(index, this.#message);
        if (isThenable(output)) {
          this.#pendingIndex = index;
          this.#await(
            output,
            this.#config.responderNames[index],
            this.#onAnswer,
            this.#onAnswerError,
          );
          return;
        }
        if (output === FAILED) continue;
        if (this.#complete(index, output).terminate) return;
        // Sync responders never give the event loop a turn; timers and exporters need one.
        if (this.#lastTick - this.#lastYield >= yieldIntervalMs) {
          this.#lastYield = this.#lastTick;
          setImmediate(this.#resume);
          return;
        }
      }
    } catch (error) {
      this.#fail(error);
    }
  }

  /** Waits for `promise`; an abort or the dispatch deadline settles the run without it. */
  #await<T>(
    promise: PromiseLike<T>,
    /** The responder awaited; undefined for the turn policy. */
    responder: string | undefined,
    onValue: (value: T) => void,
    onError: (error: unknown) => void,
  ): void {
    const deadlineMs = this.#config.dispatchTimeoutMs;
    if (deadlineMs !== undefined) {
      this.#timer = setTimeout(
        () => this.#interrupt(new Interrupt('deadline', responder)),
        deadlineMs,
      );
    }
    promise.then(onValue, onError);
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer);
      this.#timer = undefined;
    }
  }

  #interrupt(reason: Interrupt): void {
    if (this.#interrupted !== undefined || this.#settled) return;
    this.#interrupted = reason;
    this.#clearTimer();
    this.#controller?.abort(this.#abortReason(reason));
    // Settle now: a responder that ignores its signal must not hold the run open.
    this.#fail(reason);
  }

  #responderSignal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#interrupted !== undefined)
        this.#controller.abort(this.#abortReason(this.#interrupted));
    }
    return this.#controller.signal;
  }

  #abortReason(reason: Interrupt): unknown {
    return reason.kind === 'aborted' ? reason.cause : new Error('Dispatch deadline passed');
  }

  #succeed(decision: TerminationDecision): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#cleanup();
    const result: ConversationResult<S, C> = {
      conversationId: this.#conversationId,
      state: this.#state,
      decision,
      dispatchCount: this.#dispatchCount,
      elapsedMs: performance.now() - this.#startedAt,
    };
    this.#observations.ended({ ok: true, result });
    this.#settle({ ok: true, result });
  }

  #fail(thrown: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#cleanup();
    const error = this.#toConversationError(thrown);
    this.#observations.ended({ ok: false, error });
    this.#settle({ ok: false, error });
  }

  #cleanup(): void {
    this.#clearTimer();
    this.#signal?.removeEventListener('abort', this.#onAbort);
  }

  #select(
    turn: TurnFunction<S, C>,
    message: Message<C>,
  ): TurnSelection<S, C> | PromiseLike<TurnSelection<S, C>> {
    try {
      return turn(message, this.#state, this.#config.responders);
    } catch (error) {
      throw new PolicyError('turn', this.#state, this.#elapsed(), error);
    }
  }

  #resolve(selected: Responder<S, C> | string | undefined): number {
    const index = this.#config.responderIndex.get(selected as Responder<S, C> | string);
    if (index === undefined) throw this.#unknownResponder(selected);
    return index;
  }

  /** Invokes a responder; a synchronous failure is handled here and answered with FAILED. */
  #invoke(index: number, message: Message<C>): unknown {
    const responder = this.#config.responders[index] as Responder<S, C>;
    const context = this.#context;
    context.dispatchNumber = this.#dispatchCount + 1;
    this.#observations.responderStarted(index, message);
    try {
      // No closure per dispatch unless an observer wraps the call.
      if (!this.#observations.wrapsResponders) {
        return responder.respond(message, this.#state, context);
      }
      return this.#observations.invoke(index, () =>
        responder.respond(message, this.#state, context),
      );
    } catch (error) {
      this.#failed(index, error);
      return FAILED;
    }
  }

  /** A responder failed: tell the observers, then skip it or stop the run. */
  #failed(index: number, error: unknown): void {
    const responder = this.#config.responderNames[index] as string;
    const now = performance.now();
    const durationMs = now - this.#lastTick;
    this.#lastTick = now;
    this.#observations.responderFailed(index, durationMs, error);
    if (this.#decideOnFailure(this.#config.onResponderError, error, responder) === 'skip') return;
    throw new ResponderError(
      `Responder \`${responder}\` failed: ${describeCause(error)}`,
      responder,
      this.#state,
      this.#elapsed(),
      error,
    );
  }

  /** A successful answer: fold it, decide, tell the observers and the listener. */
  #complete(index: number, output: unknown): TerminationDecision {
    const ended = performance.now();
    const started = this.#lastTick;
    this.#lastTick = ended;
    const config = this.#config;
    this.#fold(output, config.responderNames[index] as string, config.maxQueueLength, ended);
    const dispatchCount = ++this.#dispatchCount;
    const elapsedMs = ended - this.#startedAt;
    const state = this.#snapshot();
    this.#state = state;
    let decision: TerminationDecision;
    try {
      decision = this.#check(state, elapsedMs);
    } catch (error) {
      throw new PolicyError('termination', state, elapsedMs, error);
    }
    if (this.#observations.watchDispatches) {
      const info = this.#info;
      info.state = state;
      info.decision = decision;
      info.dispatchCount = dispatchCount;
      info.elapsedMs = elapsedMs;
      info.responderIndex = index;
      info.durationMs = ended - started;
      this.#observations.dispatched(info);
    }
    const listener = config.listener;
    if (listener !== undefined)
      this.#callListener(listener, state, decision, dispatchCount, elapsedMs);
    if (decision.terminate) this.#succeed(decision);
    return decision;
  }

  /** The turn policy's answer (sync or awaited) becomes the responders to invoke, in order. */
  #useSelection(selection: unknown): TurnSelection<S, C> {
    if (!Array.isArray(selection)) throw this.#badSelection(selection);
    this.#selection = selection;
    this.#selected = 0;
    return selection;
  }

  #badSelection(selection: unknown): PolicyError<S, C> {
    return new PolicyError(
      'turn',
      this.#state,
      this.#elapsed(),
      new TypeError(
        `Expected the turn policy to return an array of responders or names, got ${describeValue(selection)}`,
      ),
    );
  }

  #fold(output: unknown, responder: string, maxQueueLength: number, now: number): void {
    if (output === undefined || output === null) return;
    if (Array.isArray(output)) {
      for (const message of output) this.#foldOne(message, responder, maxQueueLength, now);
    } else this.#foldOne(output, responder, maxQueueLength, now);
  }

  #foldOne(message: unknown, responder: string, maxQueueLength: number, now: number): void {
    if (
      typeof message !== 'object' ||
      message === null ||
      typeof (message as Message).sender !== 'string'
    ) {
      throw new ResponderError(
        `Expected responder \`${responder}\` to return a message ({ sender: string, content }), an array of messages or nothing, got ${describeValue(message)}`,
        responder,
        this.#snapshot(),
        now - this.#startedAt,
      );
    }
    if (this.#queue.length >= maxQueueLength) {
      throw new QueueOverflowError(maxQueueLength, this.#snapshot(), now - this.#startedAt);
    }
    try {
      this.#projection = this.#config.projection.fold(this.#projection, message as Message<C>);
    } catch (error) {
      throw new PolicyError('projection', this.#snapshot(), now - this.#startedAt, error);
    }
    this.#queue.push(message as Message<C>);
    this.#history?.push(message as Message<C>);
    this.#lastMessage = message as Message<C>;
  }

  #snapshot(): ConversationState<S, C> {
    return {
      conversationId: this.#conversationId,
      projection: this.#projection,
      lastMessage: this.#lastMessage,
      queueDepth: this.#queue.length,
      dispatchCount: this.#dispatchCount,
      history: this.#history === undefined ? NO_HISTORY : this.#history.toArray(),
    };
  }

  #decideOnFailure(
    policy: ResponderFailurePolicy<S, C>,
    error: unknown,
    responder: string,
  ): 'stop' | 'skip' {
    if (typeof policy !== 'function') return policy;
    try {
      return policy(error, responder, this.#state) === 'skip' ? 'skip' : 'stop';
    } catch {
      return 'stop';
    }
  }

  #callListener(
    listener: ConversationListener<S, C>,
    state: ConversationState<S, C>,
    decision: TerminationDecision,
    dispatchCount: number,
    elapsedMs: number,
  ): void {
    try {
      const returned = listener(state, decision, dispatchCount, elapsedMs);
      if (returned !== undefined && isThenable(returned)) {
        returned.then(undefined, (error: unknown) => this.#listenerError(error));
      }
    } catch (error) {
      this.#listenerError(error);
    }
  }

  #listenerError(error: unknown): void {
    this.#observations.listenerFailed(error);
    try {
      this.#config.onListenerError(error);
    } catch {
      // The error handler's failure must not break the run either.
    }
  }

  #toConversationError(thrown: unknown): ConversationError<S, C> {
    if (thrown instanceof ConversationError) return thrown as ConversationError<S, C>;
    const elapsedMs = this.#elapsed();
    if (thrown instanceof Interrupt) {
      return thrown.kind === 'aborted'
        ? new ConversationAbortedError(this.#state, elapsedMs, thrown.cause)
        : new DispatchDeadlineError(
            thrown.cause as string | undefined,
            this.#config.dispatchTimeoutMs ?? 0,
            this.#state,
            elapsedMs,
          );
    }
    return new ConversationError(
      `Conversation failed: ${describeCause(thrown)}`,
      'error',
      this.#state,
      elapsedMs,
      {
        cause: thrown,
      },
    );
  }

  #elapsed(): number {
    return performance.now() - this.#startedAt;
  }

  #unknownResponder(selected: unknown): PolicyError<S, C> {
    const shown =
      typeof selected === 'object' && selected !== null
        ? (selected as Responder<S, C>).name
        : selected;
    return new PolicyError(
      'turn',
      this.#state,
      this.#elapsed(),
      new TypeError(
        `The turn policy selected ${describeValue(shown)}, which is not a responder of \`${this.#config.name}\` (known: ${this.#config.responderNames.join(', ')})`,
      ),
    );
  }
}
