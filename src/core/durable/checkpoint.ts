/**
 * Checkpoints of durable conversations: what the core stores of a conversation (its current
 * state only, replaced on each commit), the codec that turns it into text, and `suspend()`. The
 * check of a stored state read back is in checkpoint-check.ts.
 */
import type { LoopPosition, StoredUsage } from '../loop/durability.ts';
import { bounded as boundedCall } from '../shared/bounded.ts';
import { describeValue, markLibraryError } from '../spi/errors.ts';
import type {
  AcquireOutcome,
  CommitOutcome,
  ConversationStatus,
  ConversationStore,
  CreateOutcome,
  Lease,
  StoredConversation,
} from '../spi/store.ts';

export { isSuspend, type Suspend, suspend } from '../spi/suspend.ts';

import type { Message } from '../spi/types.ts';

/**
 * Turns a checkpoint's values into the text a store keeps, and back. The default is JSON, checked
 * first so that nothing is silently changed (a Map would become `{}`, NaN `null`): a value it
 * cannot store fails the conversation with a `CheckpointError` naming its path.
 */
export interface CheckpointCodec {
  /** The text of `value`; throw (an Error naming what) when it cannot be encoded. */
  encode(value: unknown): string;
  /** The value back from `encode`'s text. */
  decode(text: string): unknown;
}

/** Thrown by the JSON codec: which value cannot be stored, and where. */
export class UnstorableValueError extends TypeError {
  /** The class's name, for logs and `error.type`. */
  override name = 'UnstorableValueError';
  /** Stable: see `OrchestratorError`. */
  readonly code: string = 'ERR_UNSTORABLE_VALUE';
  constructor(
    /** Where: `projection.quotes[2]`, `queue[0].content`. */
    readonly path: string,
    what: string,
  ) {
    super(`${path} is ${what}, which JSON cannot store (give the orchestrator a \`codec\`)`);
  }
}
markLibraryError(UnstorableValueError);

function kindOf(value: object): string | undefined {
  const prototype: unknown = Object.getPrototypeOf(value);
  if (prototype === Object.prototype || prototype === null) return undefined;
  if (Array.isArray(value)) {
    // An array (of this realm or another), not an instance of an Array subclass, whose methods
    // and class would be gone on resume.
    if (prototype === Array.prototype) return undefined;
    const above = Object.getPrototypeOf(prototype as object);
    if (above !== null && Object.getPrototypeOf(above) === null) return undefined;
    const name = (value as { constructor?: { name?: string } }).constructor?.name;
    return `an instance of ${typeof name === 'string' && name !== '' ? name : 'a class'} (an Array subclass)`;
  }
  const tag = Object.prototype.toString.call(value).slice(8, -1);
  return `a ${tag === 'Object' ? ((value as { constructor?: { name?: string } }).constructor?.name ?? 'class instance') : tag}`;
}

/**
 * Where a value sits, built only when one is refused: a step per object descended into, so that
 * checking a checkpoint makes no path string (measured: the eager strings and the identifier test
 * of every key were about a third of the check).
 */
class Step {
  constructor(
    readonly parent: Step | undefined,
    readonly key: string | number,
  ) {}
}

/** `projection.quotes[2]`, `queue[0]["a key"]`: the path of `key` under `parent`. */
function pathOf(parent: Step | undefined, key: string | number): string {
  const keys: (string | number)[] = [key];
  for (let step = parent; step !== undefined; step = step.parent) keys.push(step.key);
  let path = String(keys[keys.length - 1]);
  for (let i = keys.length - 2; i >= 0; i--) {
    const k = keys[i] as string | number;
    path +=
      typeof k === 'number'
        ? `[${k}]`
        : /^[A-Za-z_$][\w$]*$/.test(k)
          ? `.${k}`
          : `[${JSON.stringify(k)}]`;
  }
  return path;
}

/** `object[key]`; a getter (or Proxy trap) that throws is refused naming its path. */
function read(object: object, key: string | number, parent: Step | undefined): unknown {
  try {
    return (object as Record<string | number, unknown>)[key];
  } catch (error) {
    throw new UnstorableValueError(
      pathOf(parent, key),
      `a property whose read threw (${error instanceof Error ? error.message : describeValue(error)})`,
    );
  }
}

/** Finds the first value JSON would refuse or silently change; throws naming its path. */
function check(
  value: unknown,
  parent: Step | undefined,
  key: string | number,
  seen: Set<object>,
): void {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return;
    case 'number':
      if (!Number.isFinite(value)) throw new UnstorableValueError(pathOf(parent, key), `${value}`);
      // JSON writes -0 as 0: a projection that tells them apart would change on resume.
      if (value === 0 && 1 / value < 0) throw new UnstorableValueError(pathOf(parent, key), '-0');
      return;
    case 'undefined':
      return;
    case 'bigint':
      throw new UnstorableValueError(pathOf(parent, key), `a BigInt (${value}n)`);
    case 'function':
      throw new UnstorableValueError(pathOf(parent, key), `a function`);
    case 'symbol':
      throw new UnstorableValueError(pathOf(parent, key), `a symbol`);
  }
  if (value === null) return;
  const object = value as object;
  if (seen.has(object)) {
    throw new UnstorableValueError(pathOf(parent, key), 'a cycle (a value containing itself)');
  }
  // A revoked Proxy (or one whose traps throw) answers none of these: refused with its path.
  let kind: string | undefined;
  let array: boolean;
  let keys: string[];
  let symbols: symbol[];
  try {
    // A Map or a Set would come back `{}`, a Date a string, a class instance a plain object.
    kind = kindOf(object);
    array = Array.isArray(object);
    keys = Object.keys(object);
    symbols = Object.getOwnPropertySymbols(object);
  } catch (error) {
    throw new UnstorableValueError(
      pathOf(parent, key),
      `an object that cannot be read (${error instanceof Error ? error.message : describeValue(error)})`,
    );
  }
  if (kind !== undefined) throw new UnstorableValueError(pathOf(parent, key), kind);
  // JSON writes what a toJSON method returns, enumerable or not (an enumerable one is refused
  // below as a function).
  const here = new Step(parent, key);
  if (typeof read(object, 'toJSON', here) === 'function') {
    throw new UnstorableValueError(
      pathOf(parent, key),
      'an object with a toJSON method (JSON would store what it returns)',
    );
  }
  seen.add(object);
  // JSON drops symbol-keyed properties: refused rather than lost on resume.
  for (const symbol of symbols) {
    if (Object.prototype.propertyIsEnumerable.call(object, symbol)) {
      throw new UnstorableValueError(
        `${pathOf(parent, key)}[${String(symbol)}]`,
        'a symbol-keyed property',
      );
    }
  }
  if (array) {
    const items = object as unknown[];
    for (let i = 0; i < items.length; i++) {
      const item: unknown = read(items, i, here);
      // JSON writes `null` for a hole or an `undefined` element.
      if (item === undefined) throw new UnstorableValueError(pathOf(here, i), 'undefined');
      check(item, here, i, seen);
    }
    // JSON writes an array's elements only: a named property (`Object.assign([], { note })`)
    // would be lost on resume.
    if (keys.length > items.length) {
      for (const name of keys) {
        if (String(Number(name)) !== name || Number(name) >= items.length)
          throw new UnstorableValueError(pathOf(here, name), "an array's named property");
      }
    }
  } else {
    for (const name of keys) check(read(object, name, here), here, name, seen);
  }
  seen.delete(object);
}

function checkAll(value: unknown): void {
  if (typeof value === 'object' && value !== null) {
    const seen = new Set<object>();
    for (const key of Object.keys(value)) check(read(value, key, undefined), undefined, key, seen);
  } else check(value, undefined, '$', new Set());
}

/** `parent.key`, `parent[2]`, `parent["a key"]` (no parent: the key alone), as pathOf writes them. */
function joinPath(parent: string | undefined, key: string, index: boolean): string {
  if (parent === undefined) return key;
  if (index) return `${parent}[${key}]`;
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${parent}.${key}` : `${parent}[${JSON.stringify(key)}]`;
}

/**
 * Where JSON.stringify fails on `value`: its walk followed with a replacer (called for every
 * property once JSON has read it), so a read that throws is the next key of the innermost object
 * still open. Undefined when JSON does not fail this time. Only called once JSON has failed.
 */
function jsonFailurePath(value: unknown): string | undefined {
  interface Open {
    readonly object: object;
    readonly path: string | undefined;
    readonly keys: readonly string[];
    readonly array: boolean;
    done: number;
  }
  const open: Open[] = [];
  let unwritable: string | undefined;
  function follow(this: unknown, key: string, child: unknown): unknown {
    while (open.length > 0 && (open[open.length - 1] as Open).object !== this) open.pop();
    const holder = open[open.length - 1];
    let path: string | undefined;
    if (holder !== undefined) {
      holder.done++;
      path = joinPath(holder.path, key, holder.array);
    }
    // JSON throws on a BigInt once the replacer has seen it: the failure is at this path.
    if (typeof child === 'bigint') unwritable = path;
    if (typeof child === 'object' && child !== null) {
      const array = Array.isArray(child);
      const keys = array
        ? Array.from({ length: (child as unknown[]).length }, (_, i) => String(i))
        : Object.keys(child);
      open.push({ object: child, path, keys, array, done: 0 });
    }
    return child;
  }
  try {
    JSON.stringify(value, follow);
    return undefined;
  } catch {
    if (unwritable !== undefined) return unwritable;
    const innermost = open[open.length - 1];
    if (innermost === undefined) return undefined;
    const key = innermost.keys[innermost.done];
    if (key === undefined) return innermost.path;
    return joinPath(innermost.path, key, innermost.array);
  }
}

/**
 * The default codec: JSON, checked first. Cycles, BigInts, functions, symbols, symbol-keyed
 * properties, non-finite numbers, -0, `undefined` array elements, an array's named properties,
 * Maps, Sets, Dates, class instances, properties whose getter throws and objects that cannot be
 * read (a revoked Proxy) are refused with their path (JSON would throw on some and silently
 * change the others). Values are read twice (checked, then written): a getter answering a value
 * JSON throws on at the second read is refused with its path too; one that answers another
 * storable value is stored as JSON read it.
 */
export const jsonCodec: CheckpointCodec = Object.freeze({
  encode(value: unknown): string {
    checkAll(value);
    try {
      return JSON.stringify(value);
    } catch (error) {
      // The check passed but JSON threw: a getter (or a Proxy) answered the check one value and
      // JSON another. JSON's own walk, followed, tells where; the check again says what (when it
      // sees it too); past that, refused as JSON told it, at the path JSON failed on.
      const path = jsonFailurePath(value);
      checkAll(value);
      throw new UnstorableValueError(
        path ?? '$',
        `a value that changed while it was written (${error instanceof Error ? error.message : describeValue(error)})`,
      );
    }
  },
  decode(text: string): unknown {
    return JSON.parse(text);
  },
});

export type { StoredUsage };

/** The conversation's current state as the checkpoint's `state` (encoded by the codec). */
export interface CheckpointState<S = unknown, C = unknown> extends LoopPosition<S, C> {
  /** Format version. */
  readonly v: 1;
  /** Which segment committed it: 1 for the first run. */
  readonly segment: number;
  /** Set when this is the last commit written again by a segment an abort cut (`AbortMark`). */
  readonly interrupted?: AbortMark | undefined;
}

/**
 * `'abort'`: the segment that held the conversation was aborted inside one of its steps, where
 * what it held in memory was half a step; it wrote its last commit again with this mark and let
 * go. The next holder goes on from it as after a crash (the call that was open runs again, its
 * attempt raised) and tells its observers `cause: 'abort'`: the aborted segment ended, and its
 * observers heard its end. The next commit, which is the loop's position, does not carry it.
 */
export type AbortMark = 'abort';

/** The first checkpoint of a conversation (`create`): nothing has run yet. */
export interface FreshState<C = unknown> {
  readonly v: 1;
  readonly input: Message<C>;
  readonly fresh: true;
  /** The attempt of the first invocation (more than 1 once a crash resume committed it). */
  readonly attempt?: number | undefined;
  readonly segment?: number | undefined;
  /** See `CheckpointState.interrupted`. */
  readonly interrupted?: AbortMark | undefined;
  /**
   * The observers' saved data by key at the creation (the telemetry's trace context): a crash
   * before any other commit resumes the conversation with it.
   */
  readonly observers?: Readonly<Record<string, unknown>> | undefined;
}

/**
 * An ended conversation's state: counters only. Its `result` (the `ConversationResult`, or the
 * failure) carries the projection, the last message and the history, so they are stored once: a
 * projection over half of `maxCheckpointBytes` can still end. Nothing resumes from it.
 */
export interface EndedState {
  readonly v: 1;
  readonly ended: true;
  readonly dispatchCount: number;
  readonly segment: number;
  readonly elapsedMs: number;
  /** Observers' saved data by key (small: trace context, sampling decisions). */
  readonly observers?: Readonly<Record<string, unknown>> | undefined;
}

/** What each store method the core reads must answer, as the errors say it. */
const OUTCOMES = {
  create: '{ created: true, lease } or { created: false }',
  acquire:
    "{ status: 'acquired', checkpoint, lease, takenOver, entries? (strings) }, { status: 'held', owner, leaseExpiresAt }, { status: 'ended', checkpoint } or { status: 'not_found' }",
  commit: "{ ok: true, lease } or { ok: false, reason: 'fenced' | 'sequence' | 'not_found' }",
  append: "{ ok: true, lease } or { ok: false, reason: 'fenced' | 'sequence' | 'not_found' }",
  renew: 'a lease { owner, epoch, expiresAt } or undefined',
  get: 'undefined or { conversationId, orchestrator, status, dispatchCount, seq, updatedAt }',
} as const;

/** The outcome each store method answers. */
interface Outcomes {
  create: CreateOutcome;
  acquire: AcquireOutcome;
  commit: CommitOutcome;
  append: CommitOutcome;
  renew: Lease | undefined;
  get: StoredConversation | undefined;
}

type Loose = Record<string, unknown>;

function isRecord(value: unknown): value is Loose {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function isLease(value: unknown): boolean {
  return (
    isRecord(value) &&
    typeof value.owner === 'string' &&
    Number.isFinite(value.epoch) &&
    Number.isFinite(value.expiresAt)
  );
}

const STATUSES: readonly unknown[] = ['running', 'suspended', 'ended'];

function isCheckpoint(value: unknown): boolean {
  return (
    isRecord(value) &&
    typeof value.conversationId === 'string' &&
    typeof value.orchestrator === 'string' &&
    STATUSES.includes(value.status) &&
    Number.isSafeInteger(value.seq) &&
    Number.isSafeInteger(value.dispatchCount) &&
    typeof value.state === 'string' &&
    (value.result === undefined || value.result === null || typeof value.result === 'string')
  );
}

function fits(method: keyof Outcomes, value: unknown): boolean {
  if (method === 'renew') return value === undefined || isLease(value);
  if (method === 'get') {
    return (
      value === undefined ||
      (isRecord(value) &&
        typeof value.conversationId === 'string' &&
        typeof value.orchestrator === 'string' &&
        STATUSES.includes(value.status))
    );
  }
  if (!isRecord(value)) return false;
  switch (method) {
    case 'create':
      return value.created === false || (value.created === true && isLease(value.lease));
    case 'commit':
    case 'append':
      return (
        (value.ok === true && isLease(value.lease)) ||
        (value.ok === false &&
          (value.reason === 'fenced' ||
            value.reason === 'sequence' ||
            value.reason === 'not_found'))
      );
    case 'acquire':
      switch (value.status) {
        case 'acquired':
          return (
            isCheckpoint(value.checkpoint) &&
            isLease(value.lease) &&
            typeof value.takenOver === 'boolean' &&
            (value.entries === undefined ||
              (Array.isArray(value.entries) &&
                value.entries.every((entry) => typeof entry === 'string')))
          );
        case 'held':
          return typeof value.owner === 'string' && Number.isFinite(value.leaseExpiresAt);
        case 'ended':
          return isCheckpoint(value.checkpoint);
        case 'not_found':
          return true;
      }
      return false;
  }
}

/**
 * A store method's answer, checked before the core reads it (the one place that does): a store
 * that answers something else (`undefined`, an old shape) throws a TypeError naming the store,
 * the method, what was expected and what came, which the caller turns into a `CheckpointError`.
 */
export function checkedOutcome<M extends keyof Outcomes>(
  store: ConversationStore,
  method: M,
  value: unknown,
): Outcomes[M] {
  let ok: boolean;
  try {
    ok = fits(method, value);
  } catch {
    // A getter or a Proxy trap that throws: not an outcome either.
    ok = false;
  }
  if (!ok) {
    let name: unknown;
    try {
      name = store.name;
    } catch {
      name = undefined;
    }
    throw new TypeError(
      `The store \`${String(name)}\` answered ${method}() with ${describeValue(value)}, expected ${OUTCOMES[method]}`,
    );
  }
  return value as Outcomes[M];
}

/**
 * Bounds a store call: rejects when it has not answered within `ms` (the timer is referenced, so
 * a caller awaiting it sees it settle even when nothing else keeps the process alive), and turns
 * a synchronous throw into a rejection.
 */
export function bounded<T>(call: () => Promise<T>, ms: number, what: string): Promise<T> {
  return boundedCall(
    call,
    ms,
    () => new Error(`The store did not answer ${what} within ${ms} ms (storeTimeoutMs)`),
  );
}

export type { ConversationStatus };
