/**
 * One conversation: the queue loop of DESIGN §1. This is the hot path: per dispatch it does one
 * responder call, the fold, one snapshot allocation, the termination check, the observers and the
 * listener, and nothing else unless a signal, a deadline or history asks for it.
 *
 * How to read it:
 * - `#pump()` runs `#step()` until a step must wait for a promise, the run ends, or the event loop
 *   is owed a turn (every `yieldIntervalMs`, on every path: sync answers, already-resolved
 *   promises and async turn policies alike, since promise continuations never let timers run).
 * - `#step()` is one step: take the next message and ask the turn policy who answers it
 *   (`#selectNext`), or invoke the next selected responder (`#dispatch`) and complete its dispatch
 *   (`#completeDispatch`: fold, decide, tell the observers, call the listener).
 * - When a step gets a promise it answers WAIT; the promise's callbacks (`#afterWait`) finish the
 *   same step and go back to `#pump()`.
 * - Failures travel one way: thrown as a `ConversationError` (built in errors.ts) and handed to
 *   `#fail()`. Aborts and deadlines arrive from outside the loop and call `#fail()` directly.
 * - Once the run has settled (`#settled`), nothing more happens for it: every step checks after
 *   calling user code (which may abort the run), and late promise answers are ignored.
 * - Token usage joins in one place, `reportUsage()`, called by the contexts responders and the turn
 *   policy get (context.ts); the ledger that counts it (usage.ts) is made on the first report, so
 *   a conversation where nothing reports only copies one shared zero totals object per snapshot.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { rateLimitedWarning, warnUnsaved } from '../shared/warnings.ts';
import {
  badPolicyAnswer,
  badResponderOutput,
  ConversationAbortedError,
  ConversationError,
  DispatchDeadlineError,
  describeCause,
  type FailurePoint,
  PolicyError,
  policyFailed,
  queueOverflow,
  responderFailed,
  settleUsage,
  unexpectedFailure,
  unknownResponder,
} from '../spi/errors.ts';
import type { ConversationEnd, ConversationResume, DispatchInfo } from '../spi/observer.ts';
import {
  CONTINUE,
  decisionExpected,
  isDecision,
  isReasonName,
  REASON_EXPECTED,
  type TerminationCheck,
  type TurnFunction,
  type TurnSelection,
} from '../spi/policy.ts';
import { isSuspend } from '../spi/suspend.ts';
import type {
  ConversationListener,
  ConversationResult,
  ConversationState,
  ConversationSuspension,
  ConversationUsage,
  Message,
  Responder,
  ResponderContext,
  TerminationDecision,
  UsageTotals,
} from '../spi/types.ts';
import type { RunConfig } from './config.ts';
import { type ContextHost, InvocationContext } from './context.ts';
import type {
  CutPoint,
  DurabilityOpener,
  DurableHost,
  LoopPosition,
  Resumption,
  RunDurability,
} from './durability.ts';
import { lateListenerFailure, Observations } from './observations.ts';
import { History, MessageQueue } from './queue.ts';
import { onAbort } from './signals.ts';
import { NO_CONVERSATION_USAGE, NO_USAGE, readUsage, UsageLedger } from './usage.ts';

const QUEUE_EXHAUSTED: TerminationDecision = Object.freeze({
  terminate: true,
  reason: 'queue_exhausted',
});
const NO_HISTORY: readonly never[] = Object.freeze([]);
/** What a settled run resolves or rejects: nothing more. */
const settledAlready = (): void => {};
/** What a settled run observes: nobody. */
const NO_OBSERVATIONS = new Observations<unknown, unknown>([], {
  orchestrator: '',
  conversationId: '',
  input: { sender: '', content: undefined },
  responders: [],
  startTimeMs: 0,
});

/** What one step of the loop answers. */
type Step = typeof NEXT | typeof WAIT | typeof ENDED;

/**
 * The run ended while a responder or the turn policy was still being called (it aborted the run
 * itself): its promise, if it gave one, is ignored, and a rejection of it is not left unhandled.
 */
function ignoreLate(answer: unknown, pending: boolean): typeof ENDED {
  if (pending) Promise.resolve(answer as PromiseLike<unknown>).then(undefined, () => undefined);
  return ENDED;
}

/** What `#waitingFor` holds while the awaited promise is the turn policy's selection. */
const WAITING_FOR_TURN = -1;
/** What `#waitingFor` holds while the awaited promise is a commit (a point the store can hold). */
const WAITING_FOR_COMMIT = -2;
/** Go on with the next step. */
const NEXT = 0;
/** A promise will resume the loop. */
const WAIT = 1;
/** The run has settled. */
const ENDED = 2;

const nativeThen = Promise.prototype.then;
// Reports a throwing onResponderError function without flooding the log.
const warnFailurePolicy = rateLimitedWarning('ConversationResponderErrorPolicyWarning');
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

export class ConversationRun<S, C> implements ContextHost, FailurePoint<S, C>, DurableHost<S, C> {
  readonly #config: RunConfig<S, C>;
  #input: Message<C>;
  readonly #conversationId: string;
  readonly #signal: AbortSignal | undefined;
  readonly #queue = new MessageQueue<Message<C>>();
  readonly #history: History<Message<C>> | undefined;
  #observations!: Observations<S, C>;
  // Which observer hooks exist, read once: a conversation pays only for the hooks it has.
  #wrapsResponders = false;
  #watchesStarts = false;
  #watchesDispatches = false;
  #projection!: S;
  /** The snapshot of the last completed dispatch (or of the start). */
  #state!: ConversationState<S, C>;
  #lastMessage: Message<C>;
  #dispatchCount = 0;
  #startedAt = 0;
  /** Set by #begin once the policies started (a failure before leaves them undefined). */
  #check!: TerminationCheck<S, C>;
  #turn!: TurnFunction<S, C>;
  /** Each responder's context, made on its first invocation; the turn policy's. */
  readonly #contexts: (InvocationContext | undefined)[];
  #turnContext!: InvocationContext;
  /** The responder whose invocation is in progress (or was last). */
  #invoking = -1;
  /** Set when an abort raised while the observers heard of a dispatch cuts the run right after. */
  #cutAfterDispatch = false;
  /** Made on the first usage report: a conversation where nothing reports never has one. */
  #usage: UsageLedger | undefined;
  /** `state.usage`: shared by the snapshots until the next report. */
  #usageTotals: UsageTotals = NO_USAGE;
  #info!: { -readonly [K in keyof DispatchInfo<S, C>]: DispatchInfo<S, C>[K] };

  // Where the loop stands: the message being answered, its selected responders, the next one.
  #message!: Message<C>;
  #selection: TurnSelection<S, C> | undefined;
  #nextSelected = 0;
  /**
   * Set while a promise is awaited: the responder's index (>= 0), WAITING_FOR_TURN (the turn
   * policy's selection) or WAITING_FOR_COMMIT (a commit before the next step).
   */
  #waitingFor = WAITING_FOR_TURN;
  #waiting = false;

  // One clock read per dispatch (performance.now() costs ~55 ns here): a dispatch's duration
  // runs from the previous clock read to the end of its answer.
  #lastTick = 0;
  #lastYield = 0;

  #settled = false;
  #unsubscribe: (() => void) | undefined;
  #unsubscribeDrain: (() => void) | undefined;
  /** Set while the observers and the listener hear of a completed dispatch. */
  #notifying = false;
  #abortedWhileNotifying = false;
  /** Set when the `drain` signal aborts: the run hands back after the dispatch in flight. */
  #draining = false;
  readonly #drain: AbortSignal | undefined;
  #resolve!: (result: ConversationResult<S, C>) => void;
  #reject!: (error: ConversationError<S, C>) => void;
  #deadline: NodeJS.Timeout | undefined;
  #immediate: NodeJS.Immediate | undefined;
  /** Made when a responder first reads `context.signal`: most never do, and one costs ~1 µs. */
  #controller: AbortController | undefined;
  /** Why the responder's signal aborts (set when the run is aborted or a deadline passes). */
  #interruption: ConversationError<S, C> | undefined;

  // The callbacks the loop hands out, each made the first time it is needed: a conversation
  // parked on a promise holds only the two it waits with (measured: each closure ~40-70 bytes).
  readonly #onSettledValue = (value: unknown): void => this.#afterWait(value, false);
  readonly #onSettledError = (error: unknown): void => this.#afterWait(error, true);
  #resumer: (() => void) | undefined;
  #onDeadline: (() => void) | undefined;

  // Durable conversations (a store): none of this is touched per dispatch without one, apart
  // from `#slow`, the one check #completeDispatch makes (a store, or a suspension to settle).
  // The store session (core/durable/session.ts) does every store call; undefined without a store.
  #durable: RunDurability<S, C> | undefined;
  #slow: boolean;
  #suspension: ConversationSuspension | undefined;
  /** Responder invocations so far (idempotency keys), and which one is a re-run, how often. */
  #invocations = 0;
  #retryInvocation = 0;
  #retryAttempt = 1;
  /** The stored conversation this run continues (resume, recover, cancel); undefined: a new one. */
  readonly #resumption: Resumption<S, C> | undefined;
  /** Where its checkpoint left the loop (undefined: a fresh start). */
  readonly #restored: LoopPosition<S, C> | undefined;

  /** Where the loop stands, for the errors it builds: the state at the end (FailurePoint). */
  state(): ConversationState<S, C> {
    return this.#endState();
  }

  /** The conversation's id (ContextHost: the prefix of idempotency keys). */
  get conversationId(): string {
    return this.#conversationId;
  }

  // What the store session reads (DurableHost).
  get input(): Message<C> {
    return this.#input;
  }

  get settled(): boolean {
    return this.#settled;
  }

  get invocations(): number {
    return this.#invocations;
  }

  get dispatchCount(): number {
    return this.#dispatchCount;
  }

  get observations(): Observations<S, C> {
    return this.#observations;
  }

  interrupt(error: ConversationError<S, C>): void {
    this.#interrupt(error);
  }

  /** The time since the conversation started (FailurePoint). */
  elapsedMs(): number {
    return this.#elapsed();
  }

  get #resume(): () => void {
    this.#resumer ??= () => {
      this.#immediate = undefined;
      if (!this.#settled) this.#pump();
    };
    return this.#resumer;
  }

  #deadlinePassed(): void {
    this.#deadline = undefined;
    const responder =
      this.#waitingFor < 0 ? undefined : this.#config.responderNames[this.#waitingFor];
    this.#interrupt(
      new DispatchDeadlineError(
        responder,
        this.#config.dispatchTimeoutMs ?? 0,
        this.#endState(),
        this.#elapsed(),
      ),
    );
  }

  constructor(
    config: RunConfig<S, C>,
    input: Message<C>,
    options: CallOptions<C>,
    resumption?: Resumption<S, C>,
  ) {
    this.#config = config;
    this.#slow = config.durable !== undefined || resumption !== undefined;
    this.#resumption = resumption;
    this.#restored = resumption?.position;
    if (resumption !== undefined) {
      this.#invocations = resumption.invocations;
      this.#retryInvocation = this.#invocations + 1;
      this.#retryAttempt = resumption.attempt;
    }
    this.#input = input;
    this.#lastMessage = input;
    // randomUUID() builds its string from ~20 concatenated pieces (480 bytes held per waiting
    // conversation, measured); toLowerCase() of it is the same id as one flat string (54 bytes).
    this.#conversationId = options.conversationId ?? randomUUID().toLowerCase();
    this.#signal = options.signal;
    this.#drain = options.drain;
    this.#history = config.historySize > 0 ? new History(config.historySize) : undefined;
    // Sized once: filled by index, a `[]` would grow a 16-slot backing store (measured).
    this.#contexts = new Array(config.responders.length);
  }

  /** Runs the conversation; settles exactly once. */
  execute(): Promise<ConversationResult<S, C>> {
    return new Promise<ConversationResult<S, C>>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
      const resumption = this.#resumption;
      if (resumption !== undefined) {
        this.#durable = resumption.open(this);
        this.#begin();
        return;
      }
      const opener = this.#config.durable;
      if (opener === undefined) {
        this.#begin();
        return;
      }
      // A new durable conversation: stored (its id reserved, its lease taken) before anything runs.
      const durable = opener.open(this);
      durable
        .create()
        .then(
          () => {
            this.#durable = durable;
            this.#begin();
          },
          (error: unknown) => {
            this.#settled = true;
            this.#reject(error as ConversationError<S, C>);
          },
        )
        // Whatever escapes the handlers (a bug) settles the run rather than hanging it.
        .then(undefined, (error: unknown) => this.#fail(error));
    });
  }

  #begin(): void {
    const config = this.#config;
    const restored = this.#restored;
    const now = performance.now();
    // Elapsed counts active time only: a resumed conversation goes on from what was committed.
    this.#startedAt = restored === undefined ? now : now - restored.elapsedMs;
    // Without observers every run shares one empty set of them: nothing to start, nothing held.
    this.#observations =
      config.observers.length === 0
        ? (NO_OBSERVATIONS as Observations<S, C>)
        : new Observations(
            config.observers,
            {
              orchestrator: config.name,
              conversationId: this.#conversationId,
              input: this.#input,
              responders: config.responderNames,
              providers: config.providers,
              startTimeMs: performance.timeOrigin + now,
              store: config.durable?.storeName,
            },
            this.#resumption === undefined ? undefined : this.#resumeInfo(this.#resumption),
          );
    this.#wrapsResponders = this.#observations.wrapsResponders;
    this.#watchesStarts = this.#observations.watchesStarts;
    this.#watchesDispatches = this.#observations.watchDispatches;
    try {
      const cancelling = this.#resumption?.cancel !== undefined;
      if (restored === undefined) {
        try {
          this.#projection = config.projection.initial(this.#input);
        } catch (error) {
          // cancel() runs nothing of the app's that can stop it: a projection that cannot start
          // leaves the aborted ending's projection undefined.
          if (!cancelling) throw new PolicyError('projection', this.#snapshot(0), 0, error);
          this.#projection = undefined as S;
        }
        this.#history?.push(this.#input);
      } else this.#restore(restored);
      this.#state = this.#snapshot(this.#dispatchCount);
      const cancel = this.#resumption?.cancel;
      if (cancel !== undefined) {
        // Nothing runs: no policy starts, no responder; the ending is committed as aborted.
        this.#fail(new ConversationAbortedError(this.#state, this.#elapsed(), cancel.reason));
        return;
      }
      if (this.#resumption === undefined) {
        this.#check = this.#startPolicy('termination', () => config.termination.start());
      } else {
        const saved = restored?.termination;
        this.#check = this.#startPolicy('termination', () => config.termination.start(saved));
        if (
          restored !== undefined &&
          this.#check.save === undefined &&
          !config.termination.stateless
        )
          warnUnsaved('termination', config.termination.name);
      }
      const turnPolicy = config.turnPolicy;
      if (typeof turnPolicy === 'function') this.#turn = turnPolicy;
      else if (this.#resumption === undefined) {
        this.#turn = this.#startPolicy('turn', () => turnPolicy.start(config.responders));
      } else {
        const saved = restored?.turn;
        this.#turn = this.#startPolicy('turn', () => turnPolicy.start(config.responders, saved));
        if (restored !== undefined && this.#turn.save === undefined && !turnPolicy.stateless)
          warnUnsaved('turn', turnPolicy.name);
      }
      const drain = this.#drain;
      if (drain !== undefined) {
        // Only a durable run can hand back; without a store a drain is an abort at a step's end.
        if (drain.aborted) throw this.#drainedError();
        const unsubscribe = onAbort(drain, () => {
          this.#draining = true;
          // The dispatch path's one check for anything unusual now sees it (see #completeDispatch).
          this.#slow = true;
          // Not in a call nor a commit (yielded between steps): hand back now, at this point.
          if (!this.#waiting && !this.#notifying && this.#immediate !== undefined) {
            this.#cutAfterDispatch = true;
            this.#interrupt(this.#drainedError());
          }
        });
        this.#unsubscribeDrain = unsubscribe;
      }
      if (this.#signal !== undefined) {
        if (this.#signal.aborted) throw this.#abortedError();
        this.#unsubscribe = onAbort(this.#signal, () => {
          if (this.#notifying) this.#abortedWhileNotifying = true;
          else this.#interrupt(this.#abortedError());
        });
      }
    } catch (error) {
      this.#fail(error);
      return;
    }
    this.#turnContext = new InvocationContext(this, -1);
    if (this.#watchesDispatches) {
      this.#info = {
        state: this.#state,
        decision: CONTINUE,
        dispatchCount: 0,
        elapsedMs: 0,
        attempt: 1,
        responderIndex: 0,
        durationMs: 0,
        usage: undefined,
      };
    }
    this.#lastTick = this.#lastYield = now;
    if (restored === undefined) this.#queue.push(this.#input);
    const durable = this.#durable;
    if (durable === undefined) {
      // Observers may enter a context (the conversation span's) once for the whole loop.
      this.#observations.enter(() => this.#pump());
      return;
    }
    durable.begin();
    if (this.#resumption === undefined) this.#observations.enter(() => this.#pump());
    // A resumed segment commits first (running again, the person's answer, the attempt raised),
    // so a crash right after cannot lose them nor count the attempt twice.
    else this.#observations.enter(() => void this.#waitCommit(durable.commit()));
  }

  /** What a resumed segment's observers learn. */
  #resumeInfo(resumption: Resumption<S, C>): {
    readonly resume: Omit<ConversationResume, 'saved'>;
    readonly saved: Readonly<Record<string, unknown>> | undefined;
  } {
    const restored = resumption.position;
    return {
      resume: {
        cause: resumption.cause,
        segment: resumption.segment,
        dispatchCount: restored?.dispatchCount ?? 0,
        elapsedMs: restored?.elapsedMs ?? 0,
      },
      saved: restored?.observers,
    };
  }

  /** Puts the loop back where the checkpoint left it; then the person's answer, queued first. */
  #restore(restored: LoopPosition<S, C>): void {
    this.#projection = restored.projection;
    this.#lastMessage = restored.lastMessage;
    this.#dispatchCount = restored.dispatchCount;
    if (restored.history !== undefined) for (const m of restored.history) this.#history?.push(m);
    if (restored.usage !== undefined) {
      this.#usage = UsageLedger.fromStored(restored.usage);
      this.#usageTotals = this.#usage.totals;
    }
    const answering = restored.answering;
    if (answering !== undefined && answering.next.length > 0) {
      this.#message = answering.message;
      const names = this.#config.responderNames;
      this.#selection = answering.next.map((i) => names[i] as string);
      this.#nextSelected = 0;
    }
    const input = this.#resumption?.input;
    if (input !== undefined) {
      try {
        this.#projection = this.#config.projection.fold(this.#projection, input);
      } catch (error) {
        throw new PolicyError('projection', this.#snapshot(this.#dispatchCount), 0, error);
      }
      this.#lastMessage = input;
      this.#history?.push(input);
      this.#queue.push(input);
    }
    for (const message of restored.queue) this.#queue.push(message);
  }

  #startPolicy<T>(stage: 'turn' | 'termination', start: () => T): T {
    let started: T;
    try {
      started = start();
    } catch (error) {
      throw new PolicyError(stage, this.#state, this.#elapsed(), error);
    }
    if (typeof started !== 'function') {
      throw new PolicyError(
        stage,
        this.#state,
        this.#elapsed(),
        new TypeError(`Expected the ${stage} policy's start() to return a function`),
      );
    }
    return started;
  }

  /** Runs steps until one waits for a promise or the run ends; yields to the event loop on time. */
  #pump(): void {
    const yieldIntervalMs = this.#config.yieldIntervalMs;
    try {
      for (;;) {
        if (this.#step() !== NEXT) return;
        // Checked after a step, so that every turn of the event loop sees progress.
        if (this.#lastTick - this.#lastYield >= yieldIntervalMs) {
          this.#yieldToEventLoop();
          return;
        }
      }
    } catch (error) {
      this.#fail(error);
    }
  }

  #yieldToEventLoop(): void {
    this.#lastYield = this.#lastTick;
    this.#immediate = setImmediate(this.#resume);
  }

  /** One step: select responders for the next message, or run the next selected responder. */
  #step(): Step {
    const selection = this.#selection;
    if (selection !== undefined && this.#nextSelected < selection.length) {
      return this.#dispatch(this.#responderIndexOf(selection[this.#nextSelected++]));
    }
    return this.#selectNext();
  }

  /** Takes the next message off the queue and asks the turn policy who answers it. */
  #selectNext(): Step {
    if (this.#queue.length === 0) {
      this.#succeed(QUEUE_EXHAUSTED);
      return ENDED;
    }
    const message = this.#queue.shift();
    this.#message = message;
    let selected: TurnSelection<S, C> | PromiseLike<TurnSelection<S, C>>;
    let pending: boolean;
    try {
      selected = this.#turn(message, this.#state, this.#config.responders, this.#turnContext);
      pending = isThenable(selected);
    } catch (error) {
      throw policyFailed('turn', error, this);
    }
    if (this.#settled) return ignoreLate(selected, pending);
    if (pending) return this.#wait(selected as PromiseLike<unknown>, WAITING_FOR_TURN);
    this.#useSelection(selected);
    return NEXT;
  }

  /** Invokes one responder and completes its dispatch, now or when its promise settles. */
  #dispatch(index: number): Step {
    const responder = this.#config.responders[index] as Responder<S, C>;
    const message = this.#message;
    const context = this.#contexts[index] ?? this.#newContext(index);
    context.dispatchNumber = this.#dispatchCount + 1;
    const invocation = ++this.#invocations;
    context.invocation = invocation;
    const attempt = invocation === this.#retryInvocation ? this.#retryAttempt : 1;
    context.attempt = attempt;
    this.#invoking = index;
    if (this.#watchesStarts) this.#observations.responderStarted(index, message, attempt);
    let output: unknown;
    let pending: boolean;
    try {
      // No closure per dispatch unless an observer wraps the call.
      output = this.#wrapsResponders
        ? this.#invokeWrapped(index, responder, message, context)
        : responder.respond(message, this.#state, context);
      pending = isThenable(output);
    } catch (error) {
      return this.#settled ? ENDED : this.#responderFailed(index, error);
    }
    // The responder may have aborted the run itself: its answer then counts for nothing.
    if (this.#settled) return ignoreLate(output, pending);
    if (pending) return this.#wait(output as PromiseLike<unknown>, index);
    return this.#completeDispatch(index, output);
  }

  #newContext(index: number): InvocationContext {
    const context = new InvocationContext(this, index);
    this.#contexts[index] = context;
    return context;
  }

  /** Calls the responder through the observers' `runResponder` (kept off the common path). */
  #invokeWrapped(
    index: number,
    responder: Responder<S, C>,
    message: Message<C>,
    context: ResponderContext,
  ): unknown {
    return this.#observations.invoke(index, () => responder.respond(message, this.#state, context));
  }

  /** A successful answer: fold it, decide, tell the observers and the listener. */
  #completeDispatch(index: number, output: unknown): Step {
    const ended = performance.now();
    const durationMs = ended - this.#lastTick;
    this.#lastTick = ended;
    const config = this.#config;
    if (output !== undefined && output !== null) {
      const responder = config.responderNames[index] as string;
      if (Array.isArray(output)) {
        for (let i = 0; i < output.length; i++) this.#fold(output[i], responder, i);
      } else this.#fold(output, responder, undefined);
      if (this.#settled) return ENDED;
    }
    // The dispatch counts once its termination decision is made: if the termination policy throws,
    // the error reports the previous count, and the listener and observers never see this one.
    const dispatchCount = this.#dispatchCount + 1;
    const elapsedMs = ended - this.#startedAt;
    const state = this.#snapshot(dispatchCount);
    let decision: TerminationDecision;
    try {
      decision = this.#check(state, elapsedMs);
    } catch (error) {
      throw policyFailed('termination', error, this);
    }
    if (this.#settled) return ENDED;
    // Checked like the turn policy's answer: `true`, `undefined` or a string is a bug, not a "no".
    if (!isDecision(decision)) {
      throw badPolicyAnswer(
        'termination',
        decisionExpected(this.#config.termination.name),
        decision,
        this,
      );
    }
    if (decision.terminate && !isReasonName(decision.reason)) {
      throw badPolicyAnswer(
        'termination',
        `termination policy \`${this.#config.termination.name}\` to end with ${REASON_EXPECTED}`,
        decision.reason,
        this,
      );
    }
    this.#dispatchCount = dispatchCount;
    this.#state = state;
    // The dispatch has happened: the observers and the listener all hear of it. An abort raised
    // while they do (from an observer hook or the listener) lands right after.
    this.#notifying = true;
    if (this.#watchesDispatches) {
      const info = this.#info;
      info.state = state;
      info.decision = decision;
      info.dispatchCount = dispatchCount;
      info.elapsedMs = elapsedMs;
      info.responderIndex = index;
      info.durationMs = durationMs;
      info.attempt = this.#invocations === this.#retryInvocation ? this.#retryAttempt : 1;
      info.usage =
        this.#usage === undefined ? undefined : this.#usage.takeInvocation(index, dispatchCount);
      this.#observations.dispatched(info);
    }
    const listener = config.listener;
    if (listener !== undefined)
      this.#callListener(listener, state, decision, dispatchCount, elapsedMs);
    this.#notifying = false;
    // A store, or a suspension: the one check the loop makes for them.
    if (this.#slow) return this.#afterDispatchSlow(decision);
    // The ending was decided before an abort raised while we told of it: the decision stands.
    if (decision.terminate) {
      this.#succeed(decision);
      return ENDED;
    }
    if (this.#abortedWhileNotifying) {
      this.#interrupt(this.#abortedError());
      return ENDED;
    }
    return NEXT;
  }

  /** After a dispatch, with a store or a suspension: commit as `durability` says, or suspend. */
  #afterDispatchSlow(decision: TerminationDecision): Step {
    const suspension = this.#suspension;
    this.#suspension = undefined;
    if (decision.terminate) {
      this.#succeed(decision);
      return ENDED;
    }
    if (suspension !== undefined) {
      this.#settle(decision, suspension);
      return ENDED;
    }
    if (this.#abortedWhileNotifying || this.#draining) {
      // Right after a dispatch, a point the store can hold: it is committed, then handed back.
      this.#cutAfterDispatch = true;
      this.#interrupt(this.#abortedWhileNotifying ? this.#abortedError() : this.#drainedError());
      return ENDED;
    }
    const durable = this.#durable as RunDurability<S, C>;
    const mode = (this.#config.durable as DurabilityOpener<S, C>).mode;
    if (mode === 'sync') return this.#waitCommit(durable.commit());
    // Group commit: one in flight; the dispatches completing meanwhile go with the next one.
    if (mode === 'async' && durable.idle) {
      durable
        .commit()
        .then(undefined, (error: unknown) => this.#interrupt(error as ConversationError<S, C>));
    }
    return NEXT;
  }

  /** Waits for a commit before the next step (sync durability, a resumed segment's first commit). */
  #waitCommit(commit: Promise<void>): Step {
    this.#waiting = true;
    this.#waitingFor = WAITING_FOR_COMMIT;
    commit.then(
      () => {
        if (this.#settled || !this.#waiting) return;
        this.#waiting = false;
        if (this.#draining) {
          // Drained while the dispatch was committed: handed back at that commit.
          this.#cutAfterDispatch = true;
          this.#interrupt(this.#drainedError());
          return;
        }
        if (this.#lastTick - this.#lastYield >= this.#config.yieldIntervalMs)
          this.#yieldToEventLoop();
        else this.#pump();
      },
      (error: unknown) => this.#fail(error),
    );
    return WAIT;
  }

  /**
   * Where the loop stands, for the store session to commit (DurableHost). With `reopen`, a
   * responder's call is open (the run was cut while it ran): the position is the one before that
   * call, its attempt raised, so the call runs again with its key and attempt > 1.
   */
  position(reopen: boolean): LoopPosition<S, C> {
    const selection = this.#selection;
    const next: number[] = [];
    if (selection !== undefined) {
      for (
        let i = reopen ? this.#nextSelected - 1 : this.#nextSelected;
        i < selection.length;
        i++
      ) {
        next.push(this.#responderIndexOf(selection[i]));
      }
    }
    return {
      input: this.#input,
      projection: this.#projection,
      lastMessage: this.#lastMessage,
      queue: this.#queue.toArray(),
      history: this.#history?.toArray(),
      answering: next.length === 0 ? undefined : { message: this.#message, next },
      dispatchCount: this.#dispatchCount,
      invocations: reopen ? this.#invocations - 1 : this.#invocations,
      attempt: reopen
        ? (this.#invocations === this.#retryInvocation ? this.#retryAttempt : 1) + 1
        : this.#invocations + 1 === this.#retryInvocation
          ? this.#retryAttempt
          : 1,
      elapsedMs: this.#elapsed(),
      usage: reopen
        ? this.#usage?.toStored({
            index: this.#invoking,
            dispatchNumber: this.#dispatchCount + 1,
          })
        : this.#usage?.toStored(),
      // Undefined when the run failed before its policies started (its ending is committed).
      termination: (this.#check as TerminationCheck<S, C> | undefined)?.save?.(),
      turn: (this.#turn as TurnFunction<S, C> | undefined)?.save?.(),
      observers: this.#observations.save(),
      suspended: this.#suspension,
    };
  }

  /** Waits for a responder's answer (`index`) or the turn policy's selection (-1). */
  #wait(promise: PromiseLike<unknown>, index: number): Step {
    this.#waitingFor = index;
    this.#waiting = true;
    const deadlineMs = this.#config.dispatchTimeoutMs;
    if (deadlineMs !== undefined) {
      this.#onDeadline ??= () => this.#deadlinePassed();
      this.#deadline = setTimeout(this.#onDeadline, deadlineMs);
    }
    const onValue = this.#onSettledValue;
    const onError = this.#onSettledError;
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
  #afterWait(value: unknown, rejected: boolean): void {
    if (this.#settled || !this.#waiting) return;
    this.#waiting = false;
    this.#clearDeadline();
    const index = this.#waitingFor;
    let step: Step;
    try {
      if (index < 0) step = this.#selectionArrived(value, rejected);
      else
        step = rejected
          ? this.#responderFailed(index, value)
          : this.#completeDispatch(index, value);
    } catch (error) {
      this.#fail(error);
      return;
    }
    if (step !== NEXT) return;
    // Promise continuations never let timers run: yield here too, or a conversation whose every
    // step waits on an already-resolved promise would never give the event loop a turn.
    if (this.#lastTick - this.#lastYield >= this.#config.yieldIntervalMs) this.#yieldToEventLoop();
    else this.#pump();
  }

  #selectionArrived(selection: unknown, rejected: boolean): Step {
    this.#lastTick = performance.now();
    if (rejected) throw policyFailed('turn', selection, this);
    this.#useSelection(selection);
    return NEXT;
  }

  /** The turn policy's answer becomes the responders to invoke, in order. */
  #useSelection(selection: unknown): void {
    if (!Array.isArray(selection)) {
      throw badPolicyAnswer(
        'turn',
        'the turn policy to return an array of responders or names',
        selection,
        this,
      );
    }
    this.#selection = selection;
    this.#nextSelected = 0;
  }

  #responderIndexOf(selected: Responder<S, C> | string | undefined): number {
    const index = this.#config.responderIndex.get(selected as Responder<S, C> | string);
    if (index === undefined) {
      const config = this.#config;
      throw unknownResponder(selected, config.name, config.responderNames, this);
    }
    return index;
  }

  /** A responder threw or rejected: tell the observers, then skip it (NEXT) or stop the run. */
  #responderFailed(index: number, error: unknown): Step {
    const responder = this.#config.responderNames[index] as string;
    const now = performance.now();
    const durationMs = now - this.#lastTick;
    this.#lastTick = now;
    // Its tokens were told to onUsage as reported; a retry's dispatch must not carry them.
    this.#usage?.discardInvocation();
    this.#observations.responderFailed(index, durationMs, error);
    if (this.#settled) return ENDED;
    const decision = this.#decideOnFailure(error, responder);
    if (this.#settled) return ENDED;
    if (decision === 'skip') return NEXT;
    throw responderFailed(responder, error, this);
  }

  #decideOnFailure(error: unknown, responder: string): 'stop' | 'skip' {
    const policy = this.#config.onResponderError;
    if (typeof policy !== 'function') return policy;
    try {
      return policy(error, responder, this.#state) === 'skip' ? 'skip' : 'stop';
    } catch (policyError) {
      warnFailurePolicy(
        `onResponderError of orchestrator \`${this.#config.name}\` threw (the run stops): ${describeCause(policyError)}`,
      );
      return 'stop';
    }
  }

  /** Folds one message of an answer (`index`: its place in an array answer). */
  #fold(message: unknown, responder: string, index: number | undefined): void {
    if (this.#settled) return;
    if (!isMessage(message)) {
      if (index === undefined && isSuspend(message)) {
        this.#suspension = { responder, payload: message.payload };
        this.#slow = true;
        return;
      }
      throw badResponderOutput(responder, message, this, index);
    }
    const maxQueueLength = this.#config.maxQueueLength;
    if (this.#queue.length >= maxQueueLength) {
      throw queueOverflow(maxQueueLength, this);
    }
    try {
      this.#projection = this.#config.projection.fold(this.#projection, message as Message<C>);
    } catch (error) {
      throw policyFailed('projection', error, this);
    }
    this.#queue.push(message as Message<C>);
    this.#history?.push(message as Message<C>);
    this.#lastMessage = message as Message<C>;
  }

  #callListener(
    listener: ConversationListener<S, C>,
    state: ConversationState<S, C>,
    decision: TerminationDecision,
    dispatchCount: number,
    elapsedMs: number,
  ): void {
    try {
      this.#reportListenerError ??= (error: unknown) => this.#listenerFailed(error);
      const returned = listener(
        state,
        decision,
        dispatchCount,
        elapsedMs,
        this.#reportListenerError,
      );
      if (isThenable(returned)) {
        Promise.resolve(returned).then(undefined, (error: unknown) => this.#listenerFailed(error));
      }
    } catch (error) {
      this.#listenerFailed(error);
    }
  }

  /** The listener's `reportError`, made at its first call. */
  #reportListenerError: ((error: unknown) => void) | undefined;

  /**
   * Observers hear of listener failures: while the run lives through its observations, after it
   * settled (a late rejection) through `onLateListenerError`. The handler always does.
   */
  #listenerFailed(error: unknown): void {
    if (!this.#settled) this.#observations.listenerFailed(error);
    else
      lateListenerFailure(this.#config.observers, this.#config.name, this.#conversationId, error);
    try {
      this.#config.onListenerError(error);
    } catch {
      // The error handler's failure must not break the run either.
    }
  }

  /** A report through a context: checked (a bad value throws to the reporter), then counted. */
  reportUsage(index: number, value: unknown, dispatchNumber: number): void {
    if (this.#settled) return;
    const usage = readUsage(value);
    // Reading the report ran the app's getters, which may have ended the run.
    if (this.#settled) return;
    this.#usage ??= new UsageLedger();
    const ledger = this.#usage;
    ledger.add(index, usage, dispatchNumber, index >= 0 && index === this.#invoking);
    this.#usageTotals = ledger.totals;
    // The turn policy's context keeps no number: its reports belong to the dispatch to come.
    this.#observations.usageReported(
      index,
      usage,
      index < 0 ? this.#dispatchCount + 1 : dispatchNumber,
    );
  }

  /** The usage `run()` ends with. */
  #finalUsage(): ConversationUsage {
    return this.#usage === undefined
      ? NO_CONVERSATION_USAGE
      : this.#usage.final(this.#config.responderNames);
  }

  responderSignal(): AbortSignal {
    if (this.#controller === undefined) {
      this.#controller = new AbortController();
      if (this.#interruption !== undefined) this.#controller.abort(this.#abortReason());
    }
    return this.#controller.signal;
  }

  #abortReason(): unknown {
    const interruption = this.#interruption;
    return interruption instanceof ConversationAbortedError ? interruption.cause : interruption;
  }

  #abortedError(): ConversationAbortedError<S, C> {
    return new ConversationAbortedError(this.#endState(), this.#elapsed(), this.#signal?.reason);
  }

  #drainedError(): ConversationAbortedError<S, C> {
    return new ConversationAbortedError(this.#endState(), this.#elapsed(), this.#drain?.reason);
  }

  /** The caller aborted or a deadline passed: settle now, then abort the running responder. */
  #interrupt(error: ConversationError<S, C>): void {
    if (this.#settled) return;
    this.#interruption = error;
    // Settle first: a responder that ignores its signal must not hold the run open, and one that
    // reacts to it must find the run already over.
    this.#fail(error);
    this.#controller?.abort(this.#abortReason());
  }

  #succeed(decision: TerminationDecision): void {
    this.#settle(decision, undefined);
  }

  /** Ends the run with a result: ended, or suspended (committed first with a store). */
  #settle(decision: TerminationDecision, suspension: ConversationSuspension | undefined): void {
    if (this.#settled) return;
    this.#settled = true;
    this.#cleanup();
    const result: ConversationResult<S, C> = {
      conversationId: this.#conversationId,
      // The last dispatch's snapshot, unless something moved since (the queue ran dry, a late report).
      state: this.#endState(),
      decision,
      dispatchCount: this.#dispatchCount,
      elapsedMs: this.#elapsed(),
      usage: this.#finalUsage(),
      ...(suspension === undefined ? {} : { suspended: suspension }),
    };
    const durable = this.#durable;
    if (durable === undefined) {
      this.#finish({ ok: true, result, ended: undefined });
      return;
    }
    // The question waits in the store with the conversation (a payload JSON cannot hold fails it).
    this.#suspension = suspension;
    let settled: Promise<void>;
    try {
      settled = durable.settle(result, suspension);
    } catch (error) {
      this.#finishFailed(error);
      return;
    }
    settled.then(
      () => this.#finish({ ok: true, result, ended: suspension === undefined }),
      (error: unknown) => this.#finishFailed(error),
    );
  }

  #fail(thrown: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    // Where the run was cut, read before #cleanup() clears the yield: a point the store could hold
    // as it is (waiting for a responder's promise or a commit, yielded between steps, right after
    // a dispatch), or inside a step (a responder's synchronous call, a fold, a termination or turn
    // policy), where the state in memory is half of one step and is never committed.
    const cutAt: CutPoint =
      this.#waiting && this.#waitingFor >= 0
        ? 'call'
        : (this.#waiting && this.#waitingFor === WAITING_FOR_COMMIT) ||
            this.#immediate !== undefined ||
            this.#cutAfterDispatch
          ? 'between'
          : 'inside';
    this.#cleanup();
    const error =
      thrown instanceof ConversationError
        ? (thrown as ConversationError<S, C>)
        : unexpectedFailure(thrown, this);
    if (this.#usage !== undefined) settleUsage(error, this.#finalUsage());
    const durable = this.#durable;
    const handled = durable?.fail(error, cutAt, this.#draining);
    if (handled === undefined) {
      // A durable run that failed before its creation landed stored nothing: no ending either.
      this.#finish({
        ok: false,
        error,
        ended: this.#config.durable === undefined ? undefined : false,
      });
      return;
    }
    handled.then(
      (ended) => this.#finish({ ok: false, error, ended }),
      (failed: unknown) => this.#finishFailed(failed),
    );
  }

  /** A durable ending's commit failed: the run rejects with that failure. */
  #finishFailed(thrown: unknown): void {
    const error =
      thrown instanceof ConversationError
        ? (thrown as ConversationError<S, C>)
        : unexpectedFailure(thrown, this);
    if (this.#usage !== undefined) settleUsage(error, this.#finalUsage());
    const done = (): void => this.#finish({ ok: false, error, ended: false });
    const released = (this.#durable as RunDurability<S, C>).failedEnding(error);
    if (released === undefined) done();
    else released.then(done, done);
  }

  /** Tells the observers how it ended, lets go, settles the run's promise. */
  #finish(end: ConversationEnd<S, C>): void {
    this.#durable?.end();
    const resolve = this.#resolve;
    const reject = this.#reject;
    try {
      this.#observations.ended(end);
    } finally {
      // Settles whatever the observers did: the run's promise never hangs.
      this.#letGo();
      if (end.ok) resolve(end.result);
      else reject(end.error);
    }
  }

  /**
   * A settled run keeps no hold on what its observers made for it (the telemetry's span and its
   * events) nor on its promise (and through it, the result or the error, whose stack may hold
   * the observers). The run object itself may outlive the conversation for a while: measured with
   * V8, what a finished run still pointed to survived young-generation collections until the next
   * full one, which made a span of 100 events cost twice as much to write.
   */
  #letGo(): void {
    this.#observations = NO_OBSERVATIONS as Observations<S, C>;
    this.#resolve = settledAlready;
    this.#reject = settledAlready;
  }

  /** Leaves nothing behind: no timer, no immediate, no abort listener. */
  #cleanup(): void {
    this.#clearDeadline();
    this.#durable?.stop();
    if (this.#immediate !== undefined) {
      clearImmediate(this.#immediate);
      this.#immediate = undefined;
    }
    this.#unsubscribe?.();
    this.#unsubscribeDrain?.();
    this.#unsubscribe = undefined;
  }

  #clearDeadline(): void {
    if (this.#deadline !== undefined) {
      clearTimeout(this.#deadline);
      this.#deadline = undefined;
    }
  }

  /** The state as it is now: the last dispatch's snapshot if nothing moved since, else a fresh one. */
  #endState(): ConversationState<S, C> {
    const state = this.#state;
    if (
      state !== undefined &&
      state.queueDepth === this.#queue.length &&
      state.dispatchCount === this.#dispatchCount &&
      state.lastMessage === this.#lastMessage &&
      state.projection === this.#projection &&
      state.usage === this.#usageTotals
    ) {
      return state;
    }
    return this.#snapshot(this.#dispatchCount);
  }

  #snapshot(dispatchCount: number): ConversationState<S, C> {
    return {
      conversationId: this.#conversationId,
      projection: this.#projection,
      lastMessage: this.#lastMessage,
      queueDepth: this.#queue.length,
      dispatchCount,
      history: this.#history === undefined ? NO_HISTORY : this.#history.toArray(),
      usage: this.#usageTotals,
    };
  }

  #elapsed(): number {
    return performance.now() - this.#startedAt;
  }
}
