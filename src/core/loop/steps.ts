/**
 * A conversation's run, part 2 of 3: the steps of the queue loop (DESIGN §1), the hot path. Per
 * dispatch: one responder call, the fold, one snapshot allocation, the termination check, the
 * observers and the listener, and nothing else unless a signal, a deadline or history asks for it.
 * The start and the endings (`fail`, `succeed`, what follows a dispatch with a store) are run.ts's.
 */
import { performance } from 'node:perf_hooks';
import { rateLimitedWarning } from '../shared/warnings.ts';
import {
  badPolicyAnswer,
  badResponderOutput,
  type ConversationError,
  DispatchDeadlineError,
  describeCause,
  policyFailed,
  queueOverflow,
  responderFailed,
} from '../spi/errors.ts';
import {
  decisionExpected,
  isDecision,
  isReasonName,
  REASON_EXPECTED,
  type TurnSelection,
} from '../spi/policy.ts';
import { isSuspend } from '../spi/suspend.ts';
import type {
  ConversationListener,
  ConversationState,
  Message,
  Responder,
  ResponderContext,
  TerminationDecision,
} from '../spi/types.ts';
import { InvocationContext } from './context.ts';
import { lateListenerFailure } from './observations.ts';
import { RunState, WAITING_FOR_TURN } from './run-state.ts';

const QUEUE_EXHAUSTED: TerminationDecision = Object.freeze({
  terminate: true,
  reason: 'queue_exhausted',
});
/** What one step of the loop answers. */
export type Step = typeof NEXT | typeof WAIT | typeof ENDED;

/**
 * The run ended while a responder or the turn policy was still being called (it aborted the run
 * itself): its promise, if it gave one, is ignored, and a rejection of it is not left unhandled.
 */
function ignoreLate(answer: unknown, pending: boolean): typeof ENDED {
  if (pending) Promise.resolve(answer as PromiseLike<unknown>).then(undefined, () => undefined);
  return ENDED;
}

/** Go on with the next step. */
export const NEXT = 0;
/** A promise will resume the loop. */
export const WAIT = 1;
/** The run has settled. */
export const ENDED = 2;

const nativeThen = Promise.prototype.then;
// Reports a throwing onResponderError function without flooding the log.
const warnFailurePolicy = rateLimitedWarning('ConversationResponderErrorPolicyWarning');
/** A message has a string `sender`; a value whose property reads throw is not one. */
function isMessage(value: unknown): value is Message {
  if (typeof value !== 'object' || value === null) return false;
  try {
    return typeof (value as Message).sender === 'string';
  } catch {
    return false;
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    value !== null &&
    (typeof value === 'object' || typeof value === 'function') &&
    typeof (value as PromiseLike<unknown>).then === 'function'
  );
}

export abstract class LoopSteps<S, C> extends RunState<S, C> {
  abstract interrupt(error: ConversationError<S, C>): void;
  protected abstract afterDispatchSlow(decision: TerminationDecision): Step;
  protected abstract succeed(decision: TerminationDecision): void;
  protected abstract fail(thrown: unknown): void;

  // The callbacks the loop hands out, each made the first time it is needed: a conversation
  // parked on a promise holds only the two it waits with (measured: each closure ~40-70 bytes).
  protected readonly _onSettledValue = (value: unknown): void => this.afterWait(value, false);
  protected readonly _onSettledError = (error: unknown): void => this.afterWait(error, true);
  /** The listener's `reportError`, made at its first call. */
  protected _reportListenerError: ((error: unknown) => void) | undefined;
  protected get resumeLoop(): () => void {
    this._resumer ??= () => {
      this._immediate = undefined;
      if (!this._settled) this.pump();
    };
    return this._resumer;
  }
  protected deadlinePassed(): void {
    this._deadline = undefined;
    const responder =
      this._waitingFor < 0 ? undefined : this._config.responderNames[this._waitingFor];
    this.interrupt(
      new DispatchDeadlineError(
        responder,
        this._config.dispatchTimeoutMs ?? 0,
        this.endState(),
        this.elapsed(),
      ),
    );
  }
  /** Runs steps until one waits for a promise or the run ends; yields to the event loop on time. */
  protected pump(): void {
    const yieldIntervalMs = this._config.yieldIntervalMs;
    try {
      for (;;) {
        if (this.step() !== NEXT) return;
        // Checked after a step, so that every turn of the event loop sees progress.
        if (this._lastTick - this._lastYield >= yieldIntervalMs) {
          this.yieldToEventLoop();
          return;
        }
      }
    } catch (error) {
      this.fail(error);
    }
  }
  protected yieldToEventLoop(): void {
    this._lastYield = this._lastTick;
    this._immediate = setImmediate(this.resumeLoop);
  }
  /** One step: select responders for the next message, or run the next selected responder. */
  protected step(): Step {
    const selection = this._selection;
    if (selection !== undefined && this._nextSelected < selection.length) {
      return this.dispatch(this.responderIndexOf(selection[this._nextSelected++]));
    }
    return this.selectNext();
  }
  /** Takes the next message off the queue and asks the turn policy who answers it. */
  protected selectNext(): Step {
    if (this._queue.length === 0) {
      this.succeed(QUEUE_EXHAUSTED);
      return ENDED;
    }
    const message = this._queue.shift();
    this._message = message;
    let selected: TurnSelection<S, C> | PromiseLike<TurnSelection<S, C>>;
    let pending: boolean;
    try {
      selected = this._turn(message, this._state, this._config.responders, this._turnContext);
      pending = isThenable(selected);
    } catch (error) {
      throw policyFailed('turn', error, this);
    }
    if (this._settled) return ignoreLate(selected, pending);
    if (pending) return this.wait(selected as PromiseLike<unknown>, WAITING_FOR_TURN);
    this.useSelection(selected);
    return NEXT;
  }
  /** Invokes one responder and completes its dispatch, now or when its promise settles. */
  protected dispatch(index: number): Step {
    const responder = this._config.responders[index] as Responder<S, C>;
    const message = this._message;
    const context = this._contexts[index] ?? this.newContext(index);
    context.dispatchNumber = this._dispatchCount + 1;
    const invocation = ++this._invocations;
    context.invocation = invocation;
    const attempt = invocation === this._retryInvocation ? this._retryAttempt : 1;
    context.attempt = attempt;
    this._invoking = index;
    if (this._watchesStarts) this._observations.responderStarted(index, message, attempt);
    let output: unknown;
    let pending: boolean;
    try {
      // No closure per dispatch unless an observer wraps the call.
      output = this._wrapsResponders
        ? this.invokeWrapped(index, responder, message, context)
        : responder.respond(message, this._state, context);
      pending = isThenable(output);
    } catch (error) {
      return this._settled ? ENDED : this.responderFailed(index, error);
    }
    // The responder may have aborted the run itself: its answer then counts for nothing.
    if (this._settled) return ignoreLate(output, pending);
    if (pending) return this.wait(output as PromiseLike<unknown>, index);
    return this.completeDispatch(index, output);
  }
  protected newContext(index: number): InvocationContext {
    const context = new InvocationContext(this, index);
    this._contexts[index] = context;
    return context;
  }
  /** Calls the responder through the observers' `runResponder` (kept off the common path). */
  protected invokeWrapped(
    index: number,
    responder: Responder<S, C>,
    message: Message<C>,
    context: ResponderContext,
  ): unknown {
    return this._observations.invoke(index, () => responder.respond(message, this._state, context));
  }
  /** A successful answer: fold it, decide, tell the observers and the listener. */
  protected completeDispatch(index: number, output: unknown): Step {
    const ended = performance.now();
    const durationMs = ended - this._lastTick;
    this._lastTick = ended;
    const config = this._config;
    if (output !== undefined && output !== null) {
      const responder = config.responderNames[index] as string;
      if (Array.isArray(output)) {
        for (let i = 0; i < output.length; i++) this.fold(output[i], responder, i);
      } else this.fold(output, responder, undefined);
      if (this._settled) return ENDED;
    }
    // The dispatch counts once its termination decision is made: if the termination policy throws,
    // the error reports the previous count, and the listener and observers never see this one.
    const dispatchCount = this._dispatchCount + 1;
    const elapsedMs = ended - this._startedAt;
    const state = this.snapshot(dispatchCount);
    let decision: TerminationDecision;
    try {
      decision = this._check(state, elapsedMs);
    } catch (error) {
      throw policyFailed('termination', error, this);
    }
    if (this._settled) return ENDED;
    // Checked like the turn policy's answer: `true`, `undefined` or a string is a bug, not a "no".
    if (!isDecision(decision)) {
      throw badPolicyAnswer(
        'termination',
        decisionExpected(this._config.termination.name),
        decision,
        this,
      );
    }
    if (decision.terminate && !isReasonName(decision.reason)) {
      throw badPolicyAnswer(
        'termination',
        `termination policy \`${this._config.termination.name}\` to end with ${REASON_EXPECTED}`,
        decision.reason,
        this,
      );
    }
    this._dispatchCount = dispatchCount;
    this._state = state;
    // The dispatch has happened: the observers and the listener all hear of it. An abort raised
    // while they do (from an observer hook or the listener) lands right after.
    this._notifying = true;
    if (this._watchesDispatches) {
      const info = this._info;
      info.state = state;
      info.decision = decision;
      info.dispatchCount = dispatchCount;
      info.elapsedMs = elapsedMs;
      info.responderIndex = index;
      info.durationMs = durationMs;
      info.attempt = this._invocations === this._retryInvocation ? this._retryAttempt : 1;
      info.usage =
        this._usage === undefined ? undefined : this._usage.takeInvocation(index, dispatchCount);
      this._observations.dispatched(info);
    }
    const listener = config.listener;
    if (listener !== undefined)
      this.callListener(listener, state, decision, dispatchCount, elapsedMs);
    this._notifying = false;
    // A store, or a suspension: the one check the loop makes for them.
    if (this._slow) return this.afterDispatchSlow(decision);
    // The ending was decided before an abort raised while we told of it: the decision stands.
    if (decision.terminate) {
      this.succeed(decision);
      return ENDED;
    }
    if (this._abortedWhileNotifying) {
      this.interrupt(this.abortedError());
      return ENDED;
    }
    return NEXT;
  }
  /** Waits for a responder's answer (`index`) or the turn policy's selection (-1). */
  protected wait(promise: PromiseLike<unknown>, index: number): Step {
    this._waitingFor = index;
    this._waiting = true;
    const deadlineMs = this._config.dispatchTimeoutMs;
    if (deadlineMs !== undefined) {
      this._onDeadline ??= () => this.deadlinePassed();
      this._deadline = setTimeout(this._onDeadline, deadlineMs);
    }
    const onValue = this._onSettledValue;
    const onError = this._onSettledError;
    // Only the native `then` is trusted to settle once: a Promise subclass gets it called
    // directly, a foreign thenable is adopted by a native promise (a `then` that throws becomes a
    // rejection).
    if (promise instanceof Promise) {
      // The common case calls `then` directly, which the compiler inlines; `.call` it does not.
      if (promise.then === nativeThen) promise.then(onValue, onError);
      else nativeThen.call(promise, onValue, onError);
    } else Promise.resolve(promise).then(onValue, onError);
    return WAIT;
  }
  /** The awaited promise settled: finish the step it belongs to, then go on. */
  protected afterWait(value: unknown, rejected: boolean): void {
    if (this._settled || !this._waiting) return;
    this._waiting = false;
    this.clearDeadline();
    const index = this._waitingFor;
    let step: Step;
    try {
      if (index < 0) step = this.selectionArrived(value, rejected);
      else
        step = rejected ? this.responderFailed(index, value) : this.completeDispatch(index, value);
    } catch (error) {
      this.fail(error);
      return;
    }
    if (step !== NEXT) return;
    // Promise continuations never let timers run: yield here too, or a conversation whose every
    // step waits on an already-resolved promise would never give the event loop a turn.
    if (this._lastTick - this._lastYield >= this._config.yieldIntervalMs) this.yieldToEventLoop();
    else this.pump();
  }
  protected selectionArrived(selection: unknown, rejected: boolean): Step {
    this._lastTick = performance.now();
    if (rejected) throw policyFailed('turn', selection, this);
    this.useSelection(selection);
    return NEXT;
  }
  /** The turn policy's answer becomes the responders to invoke, in order. */
  protected useSelection(selection: unknown): void {
    if (!Array.isArray(selection)) {
      throw badPolicyAnswer(
        'turn',
        'the turn policy to return an array of responders or names',
        selection,
        this,
      );
    }
    this._selection = selection;
    this._nextSelected = 0;
  }
  /** A responder threw or rejected: tell the observers, then skip it (NEXT) or stop the run. */
  protected responderFailed(index: number, error: unknown): Step {
    const responder = this._config.responderNames[index] as string;
    const now = performance.now();
    const durationMs = now - this._lastTick;
    this._lastTick = now;
    // Its tokens were told to onUsage as reported; a retry's dispatch must not carry them.
    this._usage?.discardInvocation();
    this._observations.responderFailed(index, durationMs, error);
    if (this._settled) return ENDED;
    const decision = this.decideOnFailure(error, responder);
    if (this._settled) return ENDED;
    if (decision === 'skip') return NEXT;
    throw responderFailed(responder, error, this);
  }
  protected decideOnFailure(error: unknown, responder: string): 'stop' | 'skip' {
    const policy = this._config.onResponderError;
    if (typeof policy !== 'function') return policy;
    try {
      return policy(error, responder, this._state) === 'skip' ? 'skip' : 'stop';
    } catch (policyError) {
      warnFailurePolicy(
        `onResponderError of orchestrator \`${this._config.name}\` threw (the run stops): ${describeCause(policyError)}`,
      );
      return 'stop';
    }
  }
  /** Folds one message of an answer (`index`: its place in an array answer). */
  protected fold(message: unknown, responder: string, index: number | undefined): void {
    if (this._settled) return;
    if (!isMessage(message)) {
      if (index === undefined && isSuspend(message)) {
        this._suspension = { responder, payload: message.payload };
        this._slow = true;
        return;
      }
      throw badResponderOutput(responder, message, this, index);
    }
    const maxQueueLength = this._config.maxQueueLength;
    if (this._queue.length >= maxQueueLength) {
      throw queueOverflow(maxQueueLength, this);
    }
    try {
      this._projection = this._config.projection.fold(this._projection, message as Message<C>);
    } catch (error) {
      throw policyFailed('projection', error, this);
    }
    this._queue.push(message as Message<C>);
    this._history?.push(message as Message<C>);
    this._folded?.push(message as Message<C>);
    this._lastMessage = message as Message<C>;
  }
  protected callListener(
    listener: ConversationListener<S, C>,
    state: ConversationState<S, C>,
    decision: TerminationDecision,
    dispatchCount: number,
    elapsedMs: number,
  ): void {
    try {
      this._reportListenerError ??= (error: unknown) => this.listenerFailed(error);
      const returned = listener(
        state,
        decision,
        dispatchCount,
        elapsedMs,
        this._reportListenerError,
      );
      if (isThenable(returned)) {
        Promise.resolve(returned).then(undefined, (error: unknown) => this.listenerFailed(error));
      }
    } catch (error) {
      this.listenerFailed(error);
    }
  }
  /**
   * Observers hear of listener failures: while the run lives through its observations, after it
   * settled (a late rejection) through `onLateListenerError`. The handler always does.
   */
  protected listenerFailed(error: unknown): void {
    if (!this._settled) this._observations.listenerFailed(error);
    else
      lateListenerFailure(this._config.observers, this._config.name, this._conversationId, error);
    try {
      this._config.onListenerError(error);
    } catch {
      // The error handler's failure must not break the run either.
    }
  }
}
