/**
 * One conversation: the queue loop of DESIGN §1. This is the hot path: per dispatch it does one
 * responder call, the fold, one snapshot allocation, the termination check, the observers and the
 * listener, and nothing else unless a signal, a deadline or history asks for it.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { CONTINUE, type TerminationPolicy } from '../policies/termination.ts';
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
import type { ConversationObservation, ConversationObserver, DispatchInfo } from './observer.ts';
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

/** Thrown inside the loop when the caller aborts or a deadline passes; turned into an error. */
class Interrupt {
  constructor(
    readonly kind: 'aborted' | 'deadline',
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

let observerWarned = false;
/** A throwing observer hook never breaks the run; it is reported once per process. */
function observerFailed(error: unknown): void {
  if (observerWarned) return;
  observerWarned = true;
  process.emitWarning(
    `An observer hook failed (further failures are not reported): ${describeCause(error)}`,
    'ConversationObserverWarning',
  );
}

const yieldToEventLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

export class ConversationRun<S, C> {
  readonly #config: RunConfig<S, C>;
  readonly #input: Message<C>;
  readonly #conversationId: string;
  readonly #signal: AbortSignal | undefined;
  readonly #controller = new AbortController();
  readonly #queue = new MessageQueue<Message<C>>();
  readonly #history: History<Message<C>> | undefined;
  #observations: ConversationObservation<S, C>[] = [];
  #projection!: S;
  #state!: ConversationState<S, C>;
  #lastMessage: Message<C>;
  #dispatchCount = 0;
  #startedAt = 0;
  /** Rejects the promise being awaited, when the caller aborts or the deadline passes. */
  #interrupt: ((reason: Interrupt) => void) | undefined;
  #interrupted: Interrupt | undefined;
  #currentResponder = '';

  constructor(config: RunConfig<S, C>, input: Message<C>, options: RunOptions) {
    this.#config = config;
    this.#input = input;
    this.#lastMessage = input;
    this.#conversationId = options.conversationId ?? randomUUID();
    this.#signal = options.signal;
    this.#history = config.historySize > 0 ? new History(config.historySize) : undefined;
  }

  async execute(): Promise<ConversationResult<S, C>> {
    const config = this.#config;
    const startTimeMs = performance.timeOrigin + performance.now();
    this.#startedAt = performance.now();
    this.#startObservers(startTimeMs);
    const onAbort = () => this.#abort(new Interrupt('aborted', this.#signal?.reason));
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
        this.#signal.addEventListener('abort', onAbort, { once: true });
      }
      this.#queue.push(this.#input);
      const decision = await this.#loop();
      const result: ConversationResult<S, C> = {
        conversationId: this.#conversationId,
        state: this.#state,
        decision,
        dispatchCount: this.#dispatchCount,
        elapsedMs: performance.now() - this.#startedAt,
      };
      this.#end({ ok: true, result });
      return result;
    } catch (thrown) {
      const error = this.#toConversationError(thrown);
      this.#end({ ok: false, error });
      throw error;
    } finally {
      this.#signal?.removeEventListener('abort', onAbort);
    }
  }

  async #loop(): Promise<TerminationDecision> {
    const config = this.#config;
    const { responderIndex, listener, onResponderError, yieldIntervalMs, maxQueueLength } = config;
    const observations = this.#observations;
    const observed = observations.length > 0;
    const runners = observations.filter((o) => o.runResponder !== undefined);
    const queue = this.#queue;
    const check = config.termination.start();
    const turn =
      typeof config.turnPolicy === 'function'
        ? config.turnPolicy
        : config.turnPolicy.start(config.responders);
    const info = {
      state: this.#state,
      decision: CONTINUE,
      dispatchCount: 0,
      elapsedMs: 0,
      responderIndex: 0,
      durationMs: 0,
    } satisfies DispatchInfo<S, C>;
    let lastYield = this.#startedAt;

    while (queue.length > 0) {
      const message = queue.shift();
      let selection: TurnSelection<S, C>;
      try {
        const selected = turn(message, this.#state, config.responders);
        selection = isThenable(selected)
          ? await this.#interruptible(selected as Promise<TurnSelection<S, C>>, 'turn policy')
          : selected;
      } catch (error) {
        if (error instanceof Interrupt) throw error;
        throw new PolicyError('turn', this.#state, this.#elapsed(), error);
      }
      if (!Array.isArray(selection)) {
        throw new PolicyError(
          'turn',
          this.#state,
          this.#elapsed(),
          new TypeError(
            `Expected the turn policy to return an array of responders or names, got ${describeValue(selection)}`,
          ),
        );
      }

      for (let s = 0; s < selection.length; s++) {
        if (this.#interrupted !== undefined) throw this.#interrupted;
        const index = responderIndex.get(selection[s] as Responder<S, C> | string);
        if (index === undefined) throw this.#unknownResponder(selection[s]);
        const responder = config.responders[index] as Responder<S, C>;
        this.#currentResponder = responder.name;
        const context: ResponderContext = {
          signal: this.#controller.signal,
          dispatchNumber: this.#dispatchCount + 1,
        };
        if (observed) {
          for (const o of observations) {
            try {
              o.onResponderStart?.(index, message);
            } catch (error) {
              observerFailed(error);
            }
          }
        }

        const started = performance.now();
        let output: unknown;
        try {
          if (runners.length === 0) output = responder.respond(message, this.#state, context);
          else
            output = this.#runWrapped(runners, index, () =>
              responder.respond(message, this.#state, context),
            );
          if (isThenable(output)) output = await this.#interruptible(output, responder.name);
        } catch (error) {
          if (error instanceof Interrupt) throw error;
          const durationMs = performance.now() - started;
          if (observed) {
            for (const o of observations) {
              try {
                o.onResponderEnd?.(index, durationMs, error);
              } catch (hookError) {
                observerFailed(hookError);
              }
            }
          }
          if (this.#decideOnFailure(onResponderError, error, responder.name) === 'skip') continue;
          throw new ResponderError(
            `Responder \`${responder.name}\` failed: ${describeCause(error)}`,
            responder.name,
            this.#state,
            this.#elapsed(),
            error,
          );
        }
        const ended = performance.now();

        this.#fold(output, responder.name, maxQueueLength, ended);
        const dispatchCount = ++this.#dispatchCount;
        const elapsedMs = ended - this.#startedAt;
        const state = this.#snapshot();
        this.#state = state;
        let decision: TerminationDecision;
        try {
          decision = check(state, elapsedMs);
        } catch (error) {
          throw new PolicyError('termination', state, elapsedMs, error);
        }

        if (observed) {
          info.state = state;
          info.decision = decision;
          info.dispatchCount = dispatchCount;
          info.elapsedMs = elapsedMs;
          info.responderIndex = index;
          info.durationMs = ended - started;
          for (const o of observations) {
            try {
              o.onResponderEnd?.(index, info.durationMs);
              o.onDispatch?.(info);
            } catch (error) {
              observerFailed(error);
            }
          }
        }
        if (listener !== undefined)
          this.#callListener(listener, state, decision, dispatchCount, elapsedMs);
        if (decision.terminate) return decision;
        // Sync responders never give the event loop a turn; timers and exporters need one.
        if (ended - lastYield >= yieldIntervalMs) {
          await yieldToEventLoop();
          lastYield = performance.now();
          if (this.#interrupted !== undefined) throw this.#interrupted;
        }
      }
    }
    return QUEUE_EXHAUSTED;
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

  #runWrapped(
    runners: readonly ConversationObservation<S, C>[],
    index: number,
    invoke: () => unknown,
  ): unknown {
    let call = invoke;
    for (const runner of runners) {
      const inner = call;
      call = () => (runner.runResponder as NonNullable<typeof runner.runResponder>)(index, inner);
    }
    return call();
  }

  /** Awaits `promise`, unless the caller aborts or the dispatch deadline passes first. */
  #interruptible<T>(promise: PromiseLike<T>, what: string): Promise<T> | T {
    const deadlineMs = this.#config.dispatchTimeoutMs;
    if (this.#signal === undefined && deadlineMs === undefined) return promise as Promise<T>;
    if (this.#interrupted !== undefined) throw this.#interrupted;
    return new Promise<T>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const settle = () => {
        this.#interrupt = undefined;
        if (timer !== undefined) clearTimeout(timer);
      };
      this.#interrupt = (reason) => {
        settle();
        reject(reason);
      };
      if (deadlineMs !== undefined) {
        timer = setTimeout(() => this.#abort(new Interrupt('deadline', what)), deadlineMs);
      }
      promise.then(
        (value) => {
          settle();
          resolve(value);
        },
        (error: unknown) => {
          settle();
          reject(error);
        },
      );
    });
  }

  #abort(reason: Interrupt): void {
    if (this.#interrupted !== undefined) return;
    this.#interrupted = reason;
    this.#controller.abort(
      reason.kind === 'aborted' ? reason.cause : new Error(`Dispatch deadline passed`),
    );
    this.#interrupt?.(reason);
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
    for (const o of this.#observations) {
      try {
        o.onListenerError?.(error);
      } catch {
        // An observer's failure must not break the run.
      }
    }
    try {
      this.#config.onListenerError(error);
    } catch {
      // Nor may the error handler's.
    }
  }

  #startObservers(startTimeMs: number): void {
    const config = this.#config;
    for (const observer of config.observers) {
      try {
        const observation = observer.startConversation({
          orchestrator: config.name,
          conversationId: this.#conversationId,
          input: this.#input,
          responders: config.responderNames,
          startTimeMs,
        });
        if (observation !== undefined) this.#observations.push(observation);
      } catch (error) {
        process.emitWarning(
          `An observer failed to start: ${describeCause(error)}`,
          'ConversationObserverWarning',
        );
      }
    }
  }

  #end(end: Parameters<NonNullable<ConversationObservation<S, C>['onConversationEnd']>>[0]): void {
    for (const o of this.#observations) {
      try {
        o.onConversationEnd?.(end);
      } catch (error) {
        process.emitWarning(
          `An observer failed at conversation end: ${describeCause(error)}`,
          'ConversationObserverWarning',
        );
      }
    }
  }

  #toConversationError(thrown: unknown): ConversationError<S, C> {
    if (thrown instanceof ConversationError) return thrown as ConversationError<S, C>;
    const elapsedMs = this.#elapsed();
    if (thrown instanceof Interrupt) {
      return thrown.kind === 'aborted'
        ? new ConversationAbortedError(this.#state, elapsedMs, thrown.cause)
        : new DispatchDeadlineError(
            this.#currentResponder,
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
