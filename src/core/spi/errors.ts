/**
 * Errors. Every failure of a running conversation is a `ConversationError` carrying the state the
 * conversation reached and its dispatch count, so nothing it produced is lost.
 * Configuration mistakes are `OrchestratorConfigError`s, thrown at construction.
 */
import type { ConversationState, ConversationUsage } from './types.ts';

/** Marks the library's errors, also those of a second copy of the package in the same process. */
const LIBRARY_ERROR: unique symbol = Symbol.for('conversation-orchestrator.error');

/**
 * The base of every error the library throws (core, stores, fleet, replay): a stable `code` to
 * branch on (`ERR_RESPONDER`, `ERR_CONVERSATION_NOT_FOUND` …) where messages may change, and a
 * `name` for logs and `error.type`. `instanceof OrchestratorError` also holds for the two that
 * extend `TypeError` to stay what they were (`OrchestratorConfigError`, `UnstorableValueError`),
 * and for errors of another copy of the package.
 */
export class OrchestratorError extends Error {
  /** The class's name, for logs and `error.type`. */
  override name = 'OrchestratorError';
  /** Stable: the same for the class's whole life, unlike its message. */
  readonly code: string = 'ERR_ORCHESTRATOR';

  /**
   * `instanceof OrchestratorError` is true for every error of the library, also one from another
   * copy of the package (a registered mark); a subclass keeps the ordinary prototype check.
   */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class `instanceof` was asked about; a subclass keeps the ordinary prototype check
    if (this !== OrchestratorError) return Function.prototype[Symbol.hasInstance].call(this, value);
    return typeof value === 'object' && value !== null && LIBRARY_ERROR in value;
  }
}
Object.defineProperty(OrchestratorError.prototype, LIBRARY_ERROR, { value: true });

/**
 * Marks a class that cannot extend `OrchestratorError` (it is a `TypeError`) as one of the
 * library's errors: `instanceof OrchestratorError` holds for its instances.
 */
export function markLibraryError(type: { prototype: object }): void {
  Object.defineProperty(type.prototype, LIBRARY_ERROR, { value: true });
}

/**
 * Thrown at construction for an invalid option: names it, says what was expected and what came.
 * A `TypeError` (as it always was) and an `OrchestratorError` (`code` `ERR_ORCHESTRATOR_CONFIG`).
 */
export class OrchestratorConfigError extends TypeError {
  /** The class's name, so that logs and `error.type` show which error it is. */
  override name = 'OrchestratorConfigError';
  /** Stable: see `OrchestratorError`. */
  readonly code: string = 'ERR_ORCHESTRATOR_CONFIG';
}
markLibraryError(OrchestratorConfigError);

/** Base class of every failure of a running conversation. */
export class ConversationError<S = unknown, C = unknown> extends OrchestratorError {
  /** The class's name (`ResponderError`, `PolicyError` …): what the telemetry records as `error.type`. */
  override name = 'ConversationError';
  override readonly code: string = 'ERR_CONVERSATION';
  /** The ending's reason: `error`, `aborted`, `deadline` or `queue_overflow`. */
  readonly reason: string;
  /** The id of the conversation that failed (the one `run()` was given, or the generated one). */
  readonly conversationId: string;
  /** The state the conversation reached: everything folded before the failure. */
  readonly state: ConversationState<S, C>;
  /** Dispatches completed before the failure (a dispatch counts once its decision is made). */
  readonly dispatchCount: number;
  /** Milliseconds from the start of the conversation to the failure. */
  readonly elapsedMs: number;
  /**
   * Tokens reported until the failure, in total and per responder (tokens of the invocation that
   * failed included). The run fills in the per-responder detail as it settles.
   */
  readonly usage: ConversationUsage;

  constructor(
    message: string,
    reason: string,
    state: ConversationState<S, C>,
    elapsedMs: number,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.reason = reason;
    this.conversationId = state.conversationId;
    this.state = state;
    this.dispatchCount = state.dispatchCount;
    this.elapsedMs = elapsedMs;
    this.usage = Object.freeze({
      inputTokens: state.usage?.inputTokens ?? 0,
      outputTokens: state.usage?.outputTokens ?? 0,
      ...withoutUndefined(state.usage),
      byResponder: Object.freeze(Object.create(null)),
    });
  }
}

/** The optional kinds of some totals, only those present. */
function withoutUndefined(totals: ConversationState<unknown>['usage'] | undefined): object {
  if (totals === undefined) return {};
  const kinds: Record<string, number> = {};
  if (totals.cacheReadInputTokens !== undefined)
    kinds.cacheReadInputTokens = totals.cacheReadInputTokens;
  if (totals.reasoningOutputTokens !== undefined)
    kinds.reasoningOutputTokens = totals.reasoningOutputTokens;
  return kinds;
}

/** The run's final usage, given to the error it settles with (the constructor knows only totals). */
export function settleUsage<S, C>(error: ConversationError<S, C>, usage: ConversationUsage): void {
  (error as { usage: ConversationUsage }).usage = usage;
}

/** A responder threw, rejected or returned something that is not a message. */
export class ResponderError<S = unknown, C = unknown> extends ConversationError<S, C> {
  override name = 'ResponderError';
  override readonly code: string = 'ERR_RESPONDER';
  /** The name of the responder that failed. */
  readonly responder: string;
  constructor(
    message: string,
    responder: string,
    state: ConversationState<S, C>,
    elapsedMs: number,
    cause?: unknown,
  ) {
    // Only a failure that threw has a cause, even when what it threw was `undefined`.
    // biome-ignore lint/complexity/noArguments: telling `throw undefined` from no cause at all
    super(message, 'error', state, elapsedMs, arguments.length > 4 ? { cause } : undefined);
    this.responder = responder;
  }
}

/** The turn policy, the projection's fold or the termination policy threw. */
export class PolicyError<S = unknown, C = unknown> extends ConversationError<S, C> {
  override name = 'PolicyError';
  override readonly code: string = 'ERR_POLICY';
  /** Which part failed. */
  readonly stage: 'turn' | 'projection' | 'termination';
  constructor(
    stage: 'turn' | 'projection' | 'termination',
    state: ConversationState<S, C>,
    elapsedMs: number,
    cause: unknown,
  ) {
    super(`The ${stage} policy failed: ${describeCause(cause)}`, 'error', state, elapsedMs, {
      cause,
    });
    this.stage = stage;
  }
}

/** The caller's signal aborted the run. */
export class ConversationAbortedError<S = unknown, C = unknown> extends ConversationError<S, C> {
  override name = 'ConversationAbortedError';
  override readonly code: string = 'ERR_CONVERSATION_ABORTED';
  constructor(state: ConversationState<S, C>, elapsedMs: number, cause?: unknown) {
    super(
      `Conversation ${state.conversationId} was aborted after ${state.dispatchCount} dispatches`,
      'aborted',
      state,
      elapsedMs,
      { cause },
    );
  }
}

/** A responder (or an async turn policy) ran past the per-dispatch deadline. */
export class DispatchDeadlineError<S = unknown, C = unknown> extends ConversationError<S, C> {
  override name = 'DispatchDeadlineError';
  override readonly code: string = 'ERR_DISPATCH_DEADLINE';
  constructor(
    /** The responder that did not answer; undefined when it was the turn policy. */
    readonly responder: string | undefined,
    /** The deadline it ran past: the orchestrator's `dispatchTimeoutMs`. */
    readonly deadlineMs: number,
    state: ConversationState<S, C>,
    elapsedMs: number,
  ) {
    super(
      `${responder === undefined ? 'The turn policy' : `Responder \`${responder}\``} did not answer within the ${deadlineMs} ms dispatch deadline`,
      'deadline',
      state,
      elapsedMs,
    );
  }
}

/** The queue would have grown past `maxQueueLength`. */
export class QueueOverflowError<S = unknown, C = unknown> extends ConversationError<S, C> {
  override name = 'QueueOverflowError';
  override readonly code: string = 'ERR_QUEUE_OVERFLOW';
  constructor(maxQueueLength: number, state: ConversationState<S, C>, elapsedMs: number) {
    super(
      `The queue of conversation ${state.conversationId} grew past maxQueueLength (${maxQueueLength})`,
      'queue_overflow',
      state,
      elapsedMs,
    );
  }
}

// Failures of a running conversation, built where the loop detects them. Each message says what was
// expected and what came, in the shape of the construction-time errors. The loop passes where it
// stands (`at`) rather than the state itself, so a throw site stays one short call on the hot path.

/** Where a running conversation stands when it fails: the state at the end, the time since the start. */
export interface FailurePoint<S, C> {
  state(): ConversationState<S, C>;
  elapsedMs(): number;
}

/** The turn policy, the projection's fold or the termination policy threw or rejected. */
export function policyFailed<S, C>(
  stage: PolicyError['stage'],
  cause: unknown,
  at: FailurePoint<S, C>,
): PolicyError<S, C> {
  return new PolicyError(stage, at.state(), at.elapsedMs(), cause);
}

/** A responder threw or rejected (and the failure policy said stop). */
export function responderFailed<S, C>(
  responder: string,
  cause: unknown,
  at: FailurePoint<S, C>,
): ResponderError<S, C> {
  return new ResponderError(
    `Responder \`${responder}\` failed: ${describeCause(cause)}`,
    responder,
    at.state(),
    at.elapsedMs(),
    cause,
  );
}

/** A responder answered something that is not a message, an array of messages or nothing. */
export function badResponderOutput<S, C>(
  responder: string,
  output: unknown,
  at: FailurePoint<S, C>,
  /** Where in an array answer the bad element sits. */
  index?: number,
): ResponderError<S, C> {
  const where = index === undefined ? '' : ` at index ${index} of its array`;
  return new ResponderError(
    `Expected responder \`${responder}\` to return a message ({ sender: string, content }), an array of messages or nothing, got ${describeValue(output)}${where}`,
    responder,
    at.state(),
    at.elapsedMs(),
  );
}

/** A policy answered something other than what it must: `Expected …, got …`, as a PolicyError. */
export function badPolicyAnswer<S, C>(
  stage: PolicyError['stage'],
  expected: string,
  answer: unknown,
  at: FailurePoint<S, C>,
): PolicyError<S, C> {
  return policyFailed(
    stage,
    new TypeError(`Expected ${expected}, got ${describeValue(answer)}`),
    at,
  );
}

/** The turn policy selected something that is not one of the orchestrator's responders. */
export function unknownResponder<S, C>(
  selected: unknown,
  orchestrator: string,
  known: readonly string[],
  at: FailurePoint<S, C>,
): PolicyError<S, C> {
  let what: string;
  if (typeof selected === 'object' && selected !== null) {
    let name: unknown;
    try {
      name = (selected as { name?: unknown }).name;
    } catch {
      name = undefined;
    }
    what = `a responder object named ${describeValue(name)} that is not one of \`${orchestrator}\`'s (select by name, or pass the orchestrator's own responder objects)`;
  } else {
    what = `${describeValue(selected)}, which is not a responder of \`${orchestrator}\``;
  }
  return policyFailed(
    'turn',
    new TypeError(`The turn policy selected ${what} (known: ${known.join(', ')})`),
    at,
  );
}

/** The queue would have grown past `maxQueueLength`. */
export function queueOverflow<S, C>(
  maxQueueLength: number,
  at: FailurePoint<S, C>,
): QueueOverflowError<S, C> {
  return new QueueOverflowError(maxQueueLength, at.state(), at.elapsedMs());
}

/** Anything else that escaped the loop: still a ConversationError carrying the state reached. */
export function unexpectedFailure<S, C>(
  cause: unknown,
  at: FailurePoint<S, C>,
): ConversationError<S, C> {
  return new ConversationError(
    `Conversation failed: ${describeCause(cause)}`,
    'error',
    at.state(),
    at.elapsedMs(),
    { cause },
  );
}

/** A cause as text; never throws, whatever was thrown (a null-prototype object, a throwing getter). */
export function describeCause(cause: unknown): string {
  try {
    return cause instanceof Error ? String(cause.message) : String(cause);
  } catch {
    try {
      return Object.prototype.toString.call(cause);
    } catch {
      // A revoked Proxy, or one whose traps throw: nothing about it can be read.
      return '(a value that cannot be described)';
    }
  }
}

/** `` `-1` (number) `` — how validation errors show the value that came. Never throws. */
export function describeValue(value: unknown): string {
  let type: string;
  try {
    type = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
  } catch {
    // A revoked Proxy: `Array.isArray` (and every other look at it) throws.
    return `\`(a revoked Proxy)\` (${typeof value})`;
  }
  let shown: string;
  if (typeof value === 'function') shown = `[function ${functionName(value)}]`;
  else if (typeof value === 'bigint') shown = `${value}n`;
  else if (typeof value === 'number' || typeof value === 'symbol') shown = String(value);
  // A 5 MB string is shown cut like any other, without first serialising all of it.
  else if (typeof value === 'string' && value.length > 80)
    shown = JSON.stringify(value.slice(0, 80));
  else if (typeof value === 'object' && value !== null && !isPlain(value)) {
    // A Set, a Map, a class instance: JSON would show `{}`.
    shown = safeTag(value);
  } else {
    try {
      shown = JSON.stringify(value) ?? String(value);
    } catch {
      shown = describeCause(value);
    }
  }
  if (shown.length > 80) shown = `${shown.slice(0, 77)}...`;
  return `\`${shown}\` (${type})`;
}

function isPlain(value: object): boolean {
  try {
    if (Array.isArray(value)) return true;
    const prototype: unknown = Object.getPrototypeOf(value);
    return prototype === Object.prototype || prototype === null;
  } catch {
    // A Proxy whose getPrototypeOf trap throws: shown by its tag, which is guarded too.
    return false;
  }
}

/** A function's name, or `anonymous` (also when reading it throws: a Proxy's `get` trap). */
function functionName(value: { readonly name: unknown }): string {
  try {
    const name: unknown = value.name;
    return typeof name === 'string' && name !== '' ? name : 'anonymous';
  } catch {
    return 'anonymous';
  }
}

/** `[object Map]`, or what can be said when even that read throws (a `Symbol.toStringTag` getter). */
function safeTag(value: object): string {
  try {
    return Object.prototype.toString.call(value);
  } catch {
    return '(an object that cannot be read)';
  }
}

// Durable conversations (docs/durability.md).

/** `run(input, { conversationId })` with a store: that id is already stored. Never a second start. */
export class ConversationExistsError extends OrchestratorError {
  /** The class's name, for logs and `error.type`. */
  override name = 'ConversationExistsError';
  override readonly code: string = 'ERR_CONVERSATION_EXISTS';
  constructor(
    /** The id that is taken. */
    readonly conversationId: string,
  ) {
    super(
      `Conversation ${conversationId} already exists in the store: resume it with orchestrator.resume() or pick another id`,
    );
  }
}

/** `resume(conversationId)`: the store holds no such conversation (never stored, or deleted). */
export class ConversationNotFoundError extends OrchestratorError {
  /** The class's name, for logs and `error.type`. */
  override name = 'ConversationNotFoundError';
  override readonly code: string = 'ERR_CONVERSATION_NOT_FOUND';
  constructor(
    /** The id that was asked for. */
    readonly conversationId: string,
    /** Set when the store holds it for another orchestrator: that orchestrator's name. */
    readonly orchestrator?: string,
  ) {
    super(
      orchestrator === undefined
        ? `Conversation ${conversationId} is not in the store`
        : `Conversation ${conversationId} is not one of this orchestrator's: the store holds it for orchestrator \`${orchestrator}\``,
    );
  }
}

/**
 * Another process holds the conversation: `resume()` found a live lease, or a running
 * conversation's commit or lease renewal was refused (its lease expired and another process took
 * it). No responder is invoked after it; `state` is what this process reached (empty, with
 * dispatch count 0, when `resume()` was refused before loading anything).
 */
export class ConversationLeaseError<S = unknown, C = unknown> extends ConversationError<S, C> {
  override name = 'ConversationLeaseError';
  override readonly code: string = 'ERR_CONVERSATION_LEASE';
  constructor(
    message: string,
    state: ConversationState<S, C>,
    elapsedMs: number,
    /** The live holder, when the store told it (`{host}/{pid}/{token}`). */
    readonly holder?: string,
  ) {
    super(message, 'error', state, elapsedMs);
  }
}

/**
 * A checkpoint could not be stored: a value the codec cannot encode (a cycle, a BigInt, a
 * function, a Map …: `path` names it), a checkpoint past the store's `maxCheckpointBytes`, or a
 * store that threw or did not answer within `storeTimeoutMs`. The conversation fails at that
 * dispatch; `state` is the state reached. After a store failure the store keeps the last
 * committed checkpoint, so `recover()` can pick it up later; a state that can never be stored (the
 * codec refused it, or it is too large) ends the conversation as failed in the store with this
 * error instead, so that no `recover()` resumes it to fail again.
 */
export class CheckpointError<S = unknown, C = unknown> extends ConversationError<S, C> {
  override name = 'CheckpointError';
  override readonly code: string = 'ERR_CHECKPOINT';
  constructor(
    message: string,
    state: ConversationState<S, C>,
    elapsedMs: number,
    /** Where in the checkpoint the offending value sits (`projection.quotes[2]`), when one did. */
    readonly path?: string,
    cause?: unknown,
  ) {
    super(message, 'error', state, elapsedMs, cause === undefined ? undefined : { cause });
  }
}

/** What a failed conversation's stored ending keeps of its error: enough to rebuild its class. */
export interface StoredFailure {
  readonly name: string;
  readonly message: string;
  readonly reason: string;
  /** `ResponderError`, `DispatchDeadlineError`: the responder. */
  readonly responder?: string | undefined;
  /** `PolicyError`: which policy. */
  readonly stage?: 'turn' | 'projection' | 'termination' | undefined;
  /** `DispatchDeadlineError`: the deadline. */
  readonly deadlineMs?: number | undefined;
  /** `ConversationAbortedError`: the reason, when it was a string (`cancel(id, { reason })`). */
  readonly cause?: string | undefined;
}

/**
 * At most this many characters of a failure's message and of a string cause are stored: a
 * responder's error message (or a `cancel()` reason) of any size must not make the ending too big
 * for the store, which would leave the conversation running for `recover()` to fail it again.
 */
const MAX_STORED_FAILURE_TEXT = 2_000;

function boundedText(text: string): string {
  return text.length > MAX_STORED_FAILURE_TEXT
    ? `${text.slice(0, MAX_STORED_FAILURE_TEXT - 1)}…`
    : text;
}

/**
 * The stored form of a failure (its cause is not stored: it may be anything; its message and a
 * string cause are cut to `MAX_STORED_FAILURE_TEXT` characters).
 */
export function storedFailure(error: ConversationError<unknown, unknown>): StoredFailure {
  const failure: {
    -readonly [K in keyof StoredFailure]: StoredFailure[K];
  } = { name: error.name, message: boundedText(error.message), reason: error.reason };
  if (error instanceof ResponderError) failure.responder = error.responder;
  else if (error instanceof PolicyError) failure.stage = error.stage;
  else if (error instanceof ConversationAbortedError) {
    if (typeof error.cause === 'string') failure.cause = boundedText(error.cause);
  } else if (error instanceof DispatchDeadlineError) {
    failure.responder = error.responder;
    failure.deadlineMs = error.deadlineMs;
  }
  return failure;
}

/**
 * A stored failure as the error of its class (`instanceof ResponderError` holds after a resume in
 * another process), with the stored message; an unknown class (a newer version's) is a
 * `ConversationError` named as stored.
 */
export function restoredFailure<S, C>(
  stored: StoredFailure,
  state: ConversationState<S, C>,
  elapsedMs: number,
): ConversationError<S, C> {
  let error: ConversationError<S, C>;
  switch (stored.name) {
    case 'ResponderError':
      error = new ResponderError(stored.message, stored.responder ?? '', state, elapsedMs);
      break;
    case 'PolicyError':
      error = new PolicyError(stored.stage ?? 'turn', state, elapsedMs, undefined);
      break;
    case 'DispatchDeadlineError':
      error = new DispatchDeadlineError(stored.responder, stored.deadlineMs ?? 0, state, elapsedMs);
      break;
    case 'ConversationAbortedError':
      error = new ConversationAbortedError(state, elapsedMs, stored.cause);
      break;
    case 'QueueOverflowError':
      error = new QueueOverflowError(0, state, elapsedMs);
      break;
    case 'CheckpointError':
      // A state that could never be stored ended its conversation (the value's path is in the
      // message): resume() tells it again.
      error = new CheckpointError(stored.message, state, elapsedMs);
      break;
    default:
      error = new ConversationError(stored.message, stored.reason, state, elapsedMs);
      error.name = stored.name;
  }
  error.message = stored.message;
  (error as { reason: string }).reason = stored.reason;
  return error;
}
