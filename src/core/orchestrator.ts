/**
 * The ConversationOrchestrator: holds the validated, immutable configuration. Each `run()` gets a
 * `ConversationRun` of its own, so concurrent conversations share nothing mutable.
 */
import { type CheckpointCodec, jsonCodec } from './checkpoint.ts';
import type { DurableConfig, ResponderFailurePolicy, RunConfig } from './config.ts';
import { describeValue as describe, OrchestratorConfigError } from './errors.ts';
import type { ConversationObserver } from './observer.ts';
import type { TerminationPolicy, TurnFunction, TurnPolicy } from './policy.ts';
import { ConversationRun } from './run.ts';
import type { ConversationStore, Durability } from './store.ts';
import type {
  ConversationListener,
  ConversationResult,
  Message,
  Projection,
  Responder,
  RunOptions,
} from './types.ts';
import {
  boundedName,
  conversationId,
  fail,
  isFunction,
  nonNegativeInteger,
  nonNegativeNumber,
  positiveInteger,
  positiveNumber,
} from './validate.ts';
import { rateLimitedWarning } from './warnings.ts';

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
   * process may take it over (renewed at each commit, and every `leaseMs / 3` while a responder
   * runs long). Between 100 and 600000.
   * @default 10000
   */
  readonly leaseMs?: number;
  /**
   * Every store call is bounded by this: a store that does not answer in time fails the
   * conversation with a `CheckpointError` (never a hang). Between 1 and 2147483647.
   * @default 5000
   */
  readonly storeTimeoutMs?: number;
  /**
   * Encodes checkpoints (projection, messages, payloads, policy and observer state) as text.
   * @default jsonCodec (JSON, refusing with their path the values it cannot store faithfully)
   */
  readonly codec?: CheckpointCodec;
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

  constructor(options: OrchestratorOptions<S, C>) {
    if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
    this.name = boundedName('name', options.name);
    const responders = validateResponders<S, C>(options.responders);
    const turnPolicy = options.turnPolicy;
    if (
      typeof turnPolicy !== 'function' &&
      (typeof turnPolicy !== 'object' ||
        turnPolicy === null ||
        typeof turnPolicy.start !== 'function')
    ) {
      fail(
        'turnPolicy',
        'a turn policy (roundRobin(), broadcast(), addressed()) or a function',
        turnPolicy,
      );
    }
    const projection = options.projection;
    if (
      typeof projection !== 'object' ||
      projection === null ||
      typeof projection.initial !== 'function' ||
      typeof projection.fold !== 'function'
    ) {
      fail(
        'projection',
        'an object with `initial(input)` and `fold(state, message)` functions',
        projection,
      );
    }
    const termination = options.termination;
    if (
      typeof termination !== 'object' ||
      termination === null ||
      typeof termination.start !== 'function'
    ) {
      fail(
        'termination',
        'a termination policy (maxDispatches(), converged(), anyOf() ...)',
        termination,
      );
    }
    if (options.listener !== undefined) isFunction('listener', options.listener);
    const observers = options.observers ?? [];
    if (!Array.isArray(observers)) fail('observers', 'an array of observers', observers);
    observers.forEach((o: unknown, i) => {
      if (
        typeof o !== 'object' ||
        o === null ||
        typeof (o as ConversationObserver).startConversation !== 'function'
      ) {
        fail(`observers[${i}]`, 'an object with a `startConversation` function', o);
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
      durable: durableConfig(options),
    };
  }

  /** The responders' names, in construction order. */
  get responderNames(): readonly string[] {
    return this.#config.responderNames;
  }

  /**
   * Runs one conversation from `input` to its end. Resolves with the result; rejects with a
   * `ConversationError` (carrying the state reached) on failure, abort or deadline.
   */
  run(input: Message<C>, options: RunOptions = {}): Promise<ConversationResult<S, C>> {
    try {
      validateInput(input, options);
    } catch (error) {
      return Promise.reject(error);
    }
    return new ConversationRun(this.#config, input, options).execute();
  }
}

function validateResponders<S, C>(value: unknown): readonly Responder<S, C>[] {
  if (!Array.isArray(value) || value.length === 0) {
    fail('responders', 'a non-empty array of responders', value);
  }
  const seen = new Set<string>();
  value.forEach((r: unknown, i) => {
    if (typeof r !== 'object' || r === null)
      fail(`responders[${i}]`, 'an object { name, respond }', r);
    const { name, respond } = r as Partial<Responder<S, C>>;
    boundedName(`responders[${i}].name`, name);
    if (typeof respond !== 'function') fail(`responders[${i}].respond`, 'a function', respond);
    const { provider } = r as Partial<Responder<S, C>>;
    // It becomes `gen_ai.provider.name` on every responder span: the name rule (aws.bedrock fits).
    if (provider !== undefined) boundedName(`responders[${i}].provider`, provider);
    if (seen.has(name as string))
      fail(`responders[${i}].name`, 'a name not used by another responder', name);
    seen.add(name as string);
  });
  return Object.freeze([...value]);
}

function validateInput(input: unknown, options: RunOptions): void {
  if (
    typeof input !== 'object' ||
    input === null ||
    typeof (input as Message).sender !== 'string'
  ) {
    throw new OrchestratorConfigError(
      `Expected \`input\` to be a message ({ sender: string, content }), got ${describe(input)}`,
    );
  }
  if (typeof options !== 'object' || options === null) {
    throw new OrchestratorConfigError(
      `Expected run \`options\` to be an object, got ${describe(options)}`,
    );
  }
  if (options.signal !== undefined && !(options.signal instanceof AbortSignal)) {
    throw new OrchestratorConfigError(
      `Expected \`signal\` to be an AbortSignal, got ${describe(options.signal)}`,
    );
  }
  if (options.conversationId !== undefined) {
    conversationId('conversationId', options.conversationId);
  }
}

const STORE_METHODS = [
  'create',
  'acquire',
  'commit',
  'renew',
  'release',
  'get',
  'delete',
  'list',
] as const;

/** The durable options, checked; `undefined` without a store (and then none of them may be set). */
function durableConfig<S, C>(options: OrchestratorOptions<S, C>): DurableConfig | undefined {
  const { store, durability, leaseMs, storeTimeoutMs, codec } = options;
  if (store === undefined) {
    if (durability !== undefined) fail('durability', 'set only with a `store`', durability);
    return undefined;
  }
  if (typeof store !== 'object' || store === null) {
    fail('store', 'a ConversationStore (createMemoryStore() …)', store);
  }
  for (const method of STORE_METHODS) {
    if (typeof store[method] !== 'function') {
      fail(
        `store.${method}`,
        'a function (the store must implement ConversationStore)',
        store[method],
      );
    }
  }
  const mode = durability ?? 'sync';
  if (mode !== 'sync' && mode !== 'async' && mode !== 'exit') {
    fail('durability', "'sync', 'async' or 'exit'", durability);
  }
  const lease = positiveNumber('leaseMs', leaseMs ?? 10_000);
  if (lease < 100 || lease > 600_000)
    fail('leaseMs', 'between 100 and 600000 milliseconds', leaseMs);
  const timeoutMs = timerDelay('storeTimeoutMs', storeTimeoutMs ?? 5_000);
  const chosen = codec ?? jsonCodec;
  if (
    typeof chosen !== 'object' ||
    chosen === null ||
    typeof chosen.encode !== 'function' ||
    typeof chosen.decode !== 'function'
  ) {
    fail('codec', 'an object with `encode(value)` and `decode(text)` functions', codec);
  }
  const max = store.maxCheckpointBytes;
  return {
    store,
    durability: mode,
    leaseMs: lease,
    storeTimeoutMs: timeoutMs,
    codec: chosen,
    maxCheckpointBytes: typeof max === 'number' && max > 0 ? max : Number.POSITIVE_INFINITY,
  };
}

function historySize(value: unknown): number {
  const size = nonNegativeInteger('historySize', value);
  if (size > 10_000) fail('historySize', 'at most 10000', value);
  return size;
}

/** setTimeout fires at once past 2^31 - 1 ms (about 24.8 days): refuse what it cannot wait. */
function timerDelay(option: string, value: unknown): number {
  const ms = positiveNumber(option, value);
  if (ms > 2_147_483_647) fail(option, 'a positive number of milliseconds up to 2147483647', value);
  return ms;
}
