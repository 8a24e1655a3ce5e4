/**
 * The ConversationOrchestrator: holds the validated, immutable configuration. Each `run()` gets a
 * `ConversationRun` of its own, so concurrent conversations share nothing mutable.
 */

import { bounded, type CheckpointCodec } from './durable/checkpoint.ts';
import { type CheckpointOptions, type DurableConfig, durableConfig } from './durable/config.ts';
import { isCancelOwner } from './durable/lease-owner.ts';
import {
  ALREADY_ENDED,
  endedByOtherCancel,
  ownConversation,
  resumeStored,
} from './durable/resume.ts';
import { durabilityOpener } from './durable/session.ts';
import type { ResponderFailurePolicy, RunConfig } from './loop/config.ts';
import { type CallOptions, ConversationRun } from './loop/run.ts';
import {
  boundedName,
  conversationId,
  fail,
  guardedOptions,
  isFunction,
  nonNegativeInteger,
  nonNegativeNumber,
  positiveInteger,
  readList,
  readPart,
  timerDelay,
} from './shared/validate.ts';
import { rateLimitedWarning } from './shared/warnings.ts';
import {
  ConversationAbortedError,
  ConversationLeaseError,
  describeValue as describe,
  OrchestratorConfigError,
} from './spi/errors.ts';
import type { ConversationObserver } from './spi/observer.ts';
import type { TerminationPolicy, TurnFunction, TurnPolicy } from './spi/policy.ts';
import type { ConversationStore, Durability } from './spi/store.ts';
import type {
  CancelOptions,
  ConversationListener,
  ConversationResult,
  Message,
  Projection,
  RecoverOptions,
  RecoverResult,
  Responder,
  ResumeOptions,
  RunOptions,
} from './spi/types.ts';

/**
 * What `new ConversationOrchestrator(options)` takes. `S` is the projection's state, `C` the
 * messages' content. Every option is checked at construction; a bad one throws an
 * `OrchestratorConfigError` naming it, what was expected and what came.
 */
export interface OrchestratorOptions<S, C = unknown> {
  /**
   * A bounded name: 1-64 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a
   * letter, a digit or `_`. It becomes the `orchestrator` metric label.
   */
  readonly name: string;
  /** The agents. Names must be unique. */
  readonly responders: readonly Responder<S, C>[];
  /** Who answers the message at the head of the queue: `roundRobin()`, `broadcast()`, `addressed()` or a function. */
  readonly turnPolicy: TurnPolicy<S, C> | TurnFunction<S, C>;
  /** The fold of messages into the conversation's state. */
  readonly projection: Projection<S, C>;
  /** Evaluated after every successful dispatch. */
  readonly termination: TerminationPolicy<S, C>;
  /** Called once per successful dispatch, after its termination decision. */
  readonly listener?: ConversationListener<S, C>;
  /** Lifecycle plugins such as the telemetry from `conversation-orchestrator/observability`. */
  readonly observers?: readonly ConversationObserver<S, C>[];
  /**
   * Deadline for one responder invocation (and for an async turn policy). Past it the
   * responder's signal aborts and the run rejects with a `DispatchDeadlineError`.
   * @default undefined (no deadline)
   */
  readonly dispatchTimeoutMs?: number;
  /**
   * Most messages the queue may hold; past it the run rejects with a `QueueOverflowError`
   * (a broadcast among many agents grows the queue fast).
   * @default 10000
   */
  readonly maxQueueLength?: number;
  /**
   * Messages kept in `state.history` (at most 10,000). 0 keeps none: memory stays flat however
   * long the run. Each snapshot copies the history, so a dispatch costs O(historySize).
   * @default 0
   */
  readonly historySize?: number;
  /**
   * `stop` rejects the run with a `ResponderError`; `skip` drops that invocation (it is not a
   * dispatch) and goes on; a function decides per failure.
   * @default 'stop'
   */
  readonly onResponderError?: ResponderFailurePolicy<S, C>;
  /**
   * Receives errors thrown (or rejected) by the listener; they never change the run's result.
   * @default a process warning, at most one per minute per orchestrator, with the count held back
   */
  readonly onListenerError?: (error: unknown) => void;
  /**
   * A conversation whose responders answer synchronously yields to the event loop after this
   * long, so timers and exporters keep running. 0 yields after every dispatch.
   * @default 5
   */
  readonly yieldIntervalMs?: number;
  /**
   * Where conversations are checkpointed (`createMemoryStore()`, the SQLite, PostgreSQL or Redis
   * stores): with one, `run()` commits as `durability` says, and `resume()` and `recover()`
   * continue stored conversations. See docs/durability.md.
   * @default undefined (conversations live in memory only; nothing changes)
   */
  readonly store?: ConversationStore;
  /**
   * When checkpoints are committed: `sync` before the next responder is invoked, `async` behind
   * the loop (one commit in flight per conversation, newer ones coalescing), `exit` only when the
   * conversation suspends or ends. Needs a `store`.
   * @default 'sync'
   */
  readonly durability?: Durability;
  /**
   * How long a process holds a conversation without a commit or a renewal: past it, another
   * process may take it over (renewed at each commit, and every `leaseMs / 3` while no commit is
   * in flight). Between 100 and 600000; at least twice `storeTimeoutMs`.
   * @default 10000
   */
  readonly leaseMs?: number;
  /**
   * Every store call is bounded by this: a store that does not answer in time fails the
   * conversation with a `CheckpointError` (never a hang). At most `leaseMs / 2`, so that a lease
   * renewal lands before the lease expires.
   * @default 5000, or `leaseMs / 2` when that is less
   */
  readonly storeTimeoutMs?: number;
  /**
   * Encodes checkpoints (projection, messages, payloads, policy and observer state) as text.
   * @default jsonCodec (JSON, refusing with their path the values it cannot store faithfully)
   */
  readonly codec?: CheckpointCodec;
  /**
   * How a long conversation is checkpointed on a store that takes entries: a commit writes what
   * the dispatches since the previous one added, a snapshot of the whole state now and then.
   * Needs a `store`. See docs/durability.md, "What a checkpoint holds".
   * @default { incremental: true, snapshotEveryDispatches: 10000, maxConversationBytes: 268435456 }
   */
  readonly checkpoints?: CheckpointOptions;
}

/**
 * Runs conversations between responders: a FIFO queue of messages, a turn policy choosing who
 * answers each, a projection folding every answer into the state, and a termination policy
 * checked after every dispatch. One orchestrator runs any number of conversations at once, each
 * with its own queue, state and policy state.
 *
 * @typeParam S - the projection's state
 * @typeParam C - the content of the messages
 */
export class ConversationOrchestrator<S, C = unknown> {
  /** The `name` it was built with: the `orchestrator` metric label. */
  readonly name: string;
  readonly #config: RunConfig<S, C>;
  /** The store and how it commits (undefined without a store). */
  readonly #store: DurableConfig | undefined;
  /** cancel() calls in flight in this process, by conversation id. */
  readonly #cancelling = new Map<string, Promise<boolean>>();

  constructor(options: OrchestratorOptions<S, C>) {
    if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
    // Every option below is read once, through the guard (a throwing getter, a revoked Proxy).
    options = guardedOptions('options', options);
    this.name = boundedName('name', options.name);
    const responders = validateResponders<S, C>(options.responders);
    const turnPolicy = options.turnPolicy;
    const turnExpected = 'a turn policy (roundRobin(), broadcast(), addressed()) or a function';
    if (
      typeof turnPolicy !== 'function' &&
      (typeof turnPolicy !== 'object' ||
        turnPolicy === null ||
        typeof readPart('turnPolicy', turnExpected, turnPolicy, 'start') !== 'function')
    ) {
      fail('turnPolicy', turnExpected, turnPolicy);
    }
    const projection = options.projection;
    const projectionExpected =
      'an object with `initial(input)` and `fold(state, message)` functions';
    if (
      typeof projection !== 'object' ||
      projection === null ||
      typeof readPart('projection', projectionExpected, projection, 'initial') !== 'function' ||
      typeof readPart('projection', projectionExpected, projection, 'fold') !== 'function'
    ) {
      fail('projection', projectionExpected, projection);
    }
    const termination = options.termination;
    const terminationExpected = 'a termination policy (maxDispatches(), converged(), anyOf() ...)';
    if (
      typeof termination !== 'object' ||
      termination === null ||
      typeof readPart('termination', terminationExpected, termination, 'start') !== 'function'
    ) {
      fail('termination', terminationExpected, termination);
    }
    if (options.listener !== undefined) isFunction('listener', options.listener);
    const observerList = options.observers ?? [];
    const observers = readList('observers', 'an array of observers', observerList) as
      | ConversationObserver<S, C>[]
      | undefined;
    if (observers === undefined) fail('observers', 'an array of observers', observerList);
    observers.forEach((o: unknown, i) => {
      const expected = 'an object with a `startConversation` function';
      if (
        typeof o !== 'object' ||
        o === null ||
        typeof readPart(`observers[${i}]`, expected, o, 'startConversation') !== 'function'
      ) {
        fail(`observers[${i}]`, expected, o);
      }
    });
    const onResponderError = options.onResponderError ?? 'stop';
    if (
      onResponderError !== 'stop' &&
      onResponderError !== 'skip' &&
      typeof onResponderError !== 'function'
    ) {
      fail('onResponderError', "'stop', 'skip' or a function", onResponderError);
    }
    if (options.onListenerError !== undefined)
      isFunction('onListenerError', options.onListenerError);
    // Rate-limited, not muted: a listener failing on every dispatch is reported once a minute
    // per orchestrator, with the count of failures since the last report.
    const warn = rateLimitedWarning('ConversationListenerWarning');
    const onListenerError =
      options.onListenerError ??
      ((error: unknown) =>
        warn(
          `A listener of orchestrator \`${this.name}\` failed: ${
            error instanceof Error ? error.stack : String(error)
          }`,
        ));

    const durable = durableConfig(options);
    this.#store = durable;
    this.#config = {
      name: this.name,
      responders,
      responderNames: responders.map((r) => r.name),
      providers: responders.map((r) => r.provider),
      responderIndex: new Map<Responder<S, C> | string, number>(
        responders.flatMap((r, i) => [[r, i] as const, [r.name, i] as const]),
      ),
      turnPolicy,
      projection,
      termination,
      listener: options.listener,
      observers,
      dispatchTimeoutMs:
        options.dispatchTimeoutMs === undefined
          ? undefined
          : timerDelay('dispatchTimeoutMs', options.dispatchTimeoutMs),
      maxQueueLength: positiveInteger('maxQueueLength', options.maxQueueLength ?? 10_000),
      historySize: historySize(options.historySize ?? 0),
      onResponderError,
      onListenerError,
      yieldIntervalMs: nonNegativeNumber('yieldIntervalMs', options.yieldIntervalMs ?? 5),
      durable: durable === undefined ? undefined : durabilityOpener<S, C>(durable, this.name),
    };
  }

  /** The responders' names, in construction order. */
  get responderNames(): readonly string[] {
    return this.#config.responderNames;
  }

  /**
   * Whether the orchestrator was built with a `store`: its conversations are checkpointed, can be
   * resumed, and can run on a fleet's workers.
   */
  get durable(): boolean {
    return this.#store !== undefined;
  }

  /**
   * Runs one conversation from `input` to its end. Resolves with the result; rejects with a
   * `ConversationError` (carrying the state reached) on failure, abort or deadline.
   */
  run(input: Message<C>, options: RunOptions = NO_OPTIONS): Promise<ConversationResult<S, C>> {
    let read: CallOptions<C>;
    try {
      validateInput(input);
      read = readCallOptions<C>('run', options);
    } catch (error) {
      return Promise.reject(error);
    }
    return new ConversationRun(this.#config, input, read).execute();
  }

  /**
   * Continues a stored conversation from its last checkpoint (crashed, suspended, or released by
   * an abort) and settles like `run()`. `options.input` is queued first (a person's answer to a
   * suspension). An ended conversation resolves with its stored result (or rejects with its
   * stored failure) and runs nothing; an unknown id rejects with `ConversationNotFoundError`;
   * one a live process holds rejects with `ConversationLeaseError`. Needs a `store`.
   */
  resume(id: string, options: ResumeOptions<C> = NO_OPTIONS): Promise<ConversationResult<S, C>> {
    const config = this.#config;
    const durable = this.#store;
    let read: CallOptions<C>;
    try {
      if (durable === undefined) {
        throw new OrchestratorConfigError(
          'Expected the orchestrator to have a `store` to resume conversations from, got none',
        );
      }
      conversationId('conversationId', id);
      read = readCallOptions<C>('resume', options);
    } catch (error) {
      return Promise.reject(error);
    }
    return ownConversation(config, durable, id, 'resumed').then(() =>
      resumeStored(config, durable, id, read),
    );
  }

  /**
   * Ends a stored conversation that no live process holds (suspended, or running after a crash or
   * an abort) as aborted, running nothing: its ending is committed with a
   * `ConversationAbortedError` whose cause is `options.reason`, the observers count it as an
   * ending (`reason="aborted"`), and a later `resume()` rejects with that error, carrying the
   * state it reached. Resolves `true` when this call ended it, `false` when it had already ended.
   * An unknown id rejects with `ConversationNotFoundError`; one a live process holds with
   * `ConversationLeaseError` (abort that run first: its abort releases it). Two cancel() calls at
   * once, in one process or in two, end it once: one resolves `true`, the other `false`.
   * Needs a `store`.
   */
  cancel(id: string, options: CancelOptions = NO_OPTIONS): Promise<boolean> {
    const _config = this.#config;
    const durable = this.#store;
    let reason: unknown;
    try {
      if (durable === undefined) {
        throw new OrchestratorConfigError(
          'Expected the orchestrator to have a `store` to cancel conversations in, got none',
        );
      }
      conversationId('conversationId', id);
      if (typeof options !== 'object' || options === null) {
        throw new OrchestratorConfigError(
          `Expected cancel \`options\` to be an object, got ${describe(options)}`,
        );
      }
      reason = guardedOptions('options', options as CancelOptions).reason;
    } catch (error) {
      return Promise.reject(error);
    }
    // A second cancel() of a conversation this orchestrator is cancelling waits for the first and
    // is told it had already ended (false), not that a live process holds it.
    const inflight = this.#cancelling.get(id);
    if (inflight !== undefined) {
      return inflight.then(
        () => false,
        () => this.cancel(id, options),
      );
    }
    const cancelled = this.#cancelStored(durable, id, reason, true);
    this.#cancelling.set(id, cancelled);
    const done = (): void => {
      if (this.#cancelling.get(id) === cancelled) this.#cancelling.delete(id);
    };
    cancelled.then(done, done);
    return cancelled;
  }

  /** cancel()'s work once its arguments are checked; `wait`: whether another's cancel is waited for. */
  #cancelStored(
    durable: DurableConfig,
    id: string,
    reason: unknown,
    wait: boolean,
  ): Promise<boolean> {
    const config = this.#config;
    return ownConversation(config, durable, id, 'cancelled')
      .then(() => resumeStored(config, durable, id, { cancel: { reason } }))
      .then(
        (result) => {
          // Only an ended conversation resolves: cancel() runs nothing.
          if (result !== ALREADY_ENDED) throw new Error('cancel() resumed a conversation');
          return false;
        },
        (error: unknown) => {
          if (error instanceof ConversationAbortedError) return true;
          // Another process's cancel() holds it for the one commit of its ending: wait for that
          // ending (false, as a second cancel() in this process is told), or, when that cancel
          // failed and let go, cancel it ourselves (once).
          if (wait && error instanceof ConversationLeaseError && isCancelOwner(error.holder)) {
            return endedByOtherCancel(durable, id).then((ended) =>
              ended ? false : this.#cancelStored(durable, id, reason, false),
            );
          }
          throw error;
        },
      );
  }

  /**
   * Resumes every conversation of this orchestrator that the store holds as running and that no
   * live process holds (at start-up, after a crash), `concurrency` at a time, paging through
   * `store.list()`. Resolves, once they have all settled, with how many it resumed and how they
   * ended. Needs a `store`.
   */
  async recover(options: RecoverOptions = {}): Promise<RecoverResult> {
    const config = this.#config;
    const durable = this.#store;
    if (durable === undefined) {
      throw new OrchestratorConfigError(
        'Expected the orchestrator to have a `store` to recover conversations from, got none',
      );
    }
    if (typeof options !== 'object' || options === null)
      fail('recover options', 'an object', options);
    const concurrency = positiveInteger('concurrency', options.concurrency ?? 8);
    const signal = options.signal;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      fail('signal', 'an AbortSignal', signal);
    }
    const counts = { resumed: 0, ended: 0, suspended: 0, failed: 0, skipped: 0 };
    const running = new Set<Promise<void>>();
    const one = async (id: string): Promise<void> => {
      try {
        const result = await resumeStored(config, durable, id, { signal }, true);
        if (result === undefined) counts.skipped++;
        else {
          counts.resumed++;
          if (result.suspended !== undefined) counts.suspended++;
          else counts.ended++;
        }
      } catch (error) {
        if (
          error instanceof ConversationLeaseError &&
          (error as ConversationLeaseError).dispatchCount === 0 &&
          (error as ConversationLeaseError).holder !== undefined
        ) {
          counts.skipped++;
        } else {
          counts.resumed++;
          counts.failed++;
        }
      }
    };
    let after: string | undefined;
    for (;;) {
      if (signal?.aborted) break;
      const page = await bounded(
        () =>
          durable.store.list({
            orchestrator: config.name,
            status: 'running',
            unleased: true,
            limit: 100,
            ...(after === undefined ? {} : { after }),
          }),
        durable.storeTimeoutMs,
        'list',
      );
      for (const stored of page) {
        if (signal?.aborted) break;
        while (running.size >= concurrency) await Promise.race(running);
        const task = one(stored.conversationId).finally(() => running.delete(task));
        running.add(task);
      }
      if (page.length < 100) break;
      after = page[page.length - 1]?.conversationId;
    }
    await Promise.all(running);
    return counts;
  }
}

function validateResponders<S, C>(value: unknown): readonly Responder<S, C>[] {
  const expected = 'a non-empty array of responders';
  const list = readList('responders', expected, value);
  if (list === undefined || list.length === 0) fail('responders', expected, value);
  const seen = new Set<string>();
  list.forEach((r: unknown, i) => {
    if (typeof r !== 'object' || r === null)
      fail(`responders[${i}]`, 'an object { name, respond }', r);
    const { name, respond, provider } = guardedOptions(
      `responders[${i}]`,
      r as Partial<Responder<S, C>>,
      (key) => `responders[${i}].${key}`,
      'an object { name, respond } that can be read',
    );
    boundedName(`responders[${i}].name`, name);
    if (typeof respond !== 'function') fail(`responders[${i}].respond`, 'a function', respond);
    // It becomes `gen_ai.provider.name` on every responder span: the name rule (aws.bedrock fits).
    if (provider !== undefined) boundedName(`responders[${i}].provider`, provider);
    if (seen.has(name as string))
      fail(`responders[${i}].name`, 'a name not used by another responder', name);
    seen.add(name as string);
  });
  return Object.freeze(list as Responder<S, C>[]);
}

/** A message: `{ sender: string, content }` (the input of run(), resume()'s `input`). */
function validateInput(input: unknown): void {
  if (
    typeof input !== 'object' ||
    input === null ||
    typeof (input as Message).sender !== 'string'
  ) {
    fail('input', 'a message ({ sender: string, content })', input);
  }
}

/** The default options of run() and resume(): nothing to read. */
const NO_OPTIONS: Readonly<Record<string, never>> = Object.freeze({});

/**
 * The one reader of run()'s and resume()'s options: each option read once through the guard (a
 * throwing getter or Proxy trap gives an `OrchestratorConfigError` naming it) and checked; what
 * the call goes on with is what was read here. run() takes `conversationId`, resume() `input`.
 */
function readCallOptions<C>(call: 'run' | 'resume', options: unknown): CallOptions<C> {
  if (options === NO_OPTIONS) return NO_OPTIONS;
  if (typeof options !== 'object' || options === null) {
    throw new OrchestratorConfigError(
      `Expected ${call} \`options\` to be an object, got ${describe(options)}`,
    );
  }
  const view = guardedOptions('options', options as RunOptions & ResumeOptions<C>);
  const signal = view.signal;
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    fail('signal', 'an AbortSignal', signal);
  }
  const drain = view.drain;
  if (drain !== undefined && !(drain instanceof AbortSignal)) {
    fail('drain', 'an AbortSignal', drain);
  }
  if (call === 'run') {
    const id = view.conversationId;
    if (id !== undefined) conversationId('conversationId', id);
    return { signal, drain, conversationId: id };
  }
  const input = view.input;
  if (input !== undefined) validateInput(input);
  return { signal, drain, input };
}

function historySize(value: unknown): number {
  const size = nonNegativeInteger('historySize', value);
  if (size > 10_000) fail('historySize', 'at most 10000', value);
  return size;
}
