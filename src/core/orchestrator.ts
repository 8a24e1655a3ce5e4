/**
 * The ConversationOrchestrator: holds the validated, immutable configuration. Each `run()` gets a
 * `ConversationRun` of its own, so concurrent conversations share nothing mutable.
 */
import type { ResponderFailurePolicy, RunConfig } from './config.ts';
import { describeValue as describe, OrchestratorConfigError } from './errors.ts';
import type { ConversationObserver } from './observer.ts';
import type { TerminationPolicy, TurnFunction, TurnPolicy } from './policy.ts';
import { ConversationRun } from './run.ts';
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
  guardedOptions,
  isFunction,
  nonNegativeInteger,
  nonNegativeNumber,
  positiveInteger,
  positiveNumber,
  readList,
  readPart,
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
