/**
 * Reading what the app hands the plugin: message content, `stateAttributes` results and thrown
 * values. Any of them may be hostile (a cyclic null-prototype object, a revoked Proxy, a getter or
 * an `ownKeys` trap that throws, 30,000 keys, 9 MB), so every read happens inside a guard and
 * within a budget: a failure costs the one attribute it concerns (or puts a short placeholder in
 * its place), and it is reported through the logger, rate-limited per kind of failure.
 */
import type { Attributes, AttributeValue, DiagLogger } from '@opentelemetry/api';
import { RateLimit } from '../core/shared/rate-limit.ts';
import { OrchestratorError } from '../core/spi/errors.ts';
import {
  ATTR_DECISION_LIMIT,
  ATTR_DECISION_OBSERVED,
  ATTR_DECISION_REASON,
  ATTR_DECISION_TERMINATE,
  ATTR_DISPATCH_CONTENT,
  ATTR_DISPATCH_COUNT,
  ATTR_DISPATCH_DURATION_MS,
  ATTR_DISPATCH_ELAPSED_MS,
  ATTR_DISPATCH_USAGE_INPUT_TOKENS,
  ATTR_DISPATCH_USAGE_OUTPUT_TOKENS,
  ATTR_GEN_AI_AGENT_NAME,
  ERROR_TYPE_OTHER,
} from './semconv.ts';

/** What a content that cannot be read becomes (the failure's class follows the colon). */
export const UNSERIALISABLE = '[unserialisable content';

/** The kinds of failure, each with a rate limit of its own (one kind never silences another). */
export interface FailureReports {
  /** `captureContent` met a content it cannot serialise. */
  readonly content: (error: unknown) => void;
  /** `stateAttributes` threw, returned no object, or its result could not be read. */
  readonly stateAttributes: (error: unknown) => void;
  /** A thrown value (a responder's error) could not be read. */
  readonly thrown: (error: unknown) => void;
  /** `stateAttributes` returned one of the plugin's own event attributes (said once per name). */
  readonly clash: (key: string) => void;
}

/**
 * A reporter that says the first failure at once and then at most one line per `intervalMs`
 * with how many were left unsaid: a hook failing on every dispatch must not flood the log, and
 * must not go silent either.
 */
export function rateLimited(
  logger: DiagLogger,
  message: string,
  intervalMs = 10_000,
  now: () => number = Date.now,
): (error: unknown) => void {
  const limit = new RateLimit(intervalMs, now);
  return (error) => {
    const unsaid = limit.pass();
    if (unsaid === undefined) return;
    const more = unsaid > 0 ? ` (${unsaid} more since the last report)` : '';
    try {
      logger.warn(`${message}${more}`, error);
    } catch {
      // A logger that throws must not break what it reports on.
    }
  };
}

export function failureReports(logger: DiagLogger): FailureReports {
  return {
    content: rateLimited(
      logger,
      `conversation-orchestrator: a message content could not be serialised; it is recorded as \`${UNSERIALISABLE}: <class>]\``,
    ),
    stateAttributes: rateLimited(
      logger,
      'conversation-orchestrator: stateAttributes failed; the dispatch event is recorded without them',
    ),
    thrown: rateLimited(
      logger,
      'conversation-orchestrator: a thrown value could not be read; it is recorded as what could be',
    ),
    clash: oncePerName(logger),
  };
}

/**
 * A report of each of the plugin's own names that `stateAttributes` tried to set, the first time
 * only: the names are a fixed set of 11, so this says at most 11 lines in a telemetry's life.
 */
function oncePerName(logger: DiagLogger): (key: string) => void {
  const said = new Set<string>();
  return (key) => {
    if (said.has(key)) return;
    said.add(key);
    try {
      logger.warn(
        `conversation-orchestrator: stateAttributes returned \`${key}\`, an attribute of the plugin's own; the plugin's value is kept and this one dropped (said once)`,
      );
    } catch {
      // A logger that throws must not break what it reports on.
    }
  };
}

/**
 * Every attribute the plugin may put on a dispatch event itself. A state attribute never takes
 * one of these names (the plugin's value wins, the clash is reported once) nor their room: the
 * copy of `stateAttributes` stops early enough that all of them fit under the event limit.
 */
export const DISPATCH_EVENT_OWN_ATTRIBUTES: ReadonlySet<string> = new Set([
  ATTR_DISPATCH_COUNT,
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_DISPATCH_ELAPSED_MS,
  ATTR_DISPATCH_DURATION_MS,
  ATTR_DECISION_TERMINATE,
  ATTR_DECISION_REASON,
  ATTR_DECISION_OBSERVED,
  ATTR_DECISION_LIMIT,
  ATTR_DISPATCH_USAGE_INPUT_TOKENS,
  ATTR_DISPATCH_USAGE_OUTPUT_TOKENS,
  ATTR_DISPATCH_CONTENT,
]);

/** The class of a thrown value, never throwing: its `name`, or `_OTHER` for a non-Error. */
export function errorType(error: unknown): string {
  try {
    if (error instanceof Error) {
      const name = error.name || error.constructor.name;
      return typeof name === 'string' && name !== '' ? name : ERROR_TYPE_OTHER;
    }
  } catch {
    // A revoked Proxy answers nothing, not even `instanceof`.
  }
  return ERROR_TYPE_OTHER;
}

/** A short description of any thrown value; never throws. */
export function describeThrown(error: unknown): string {
  try {
    if (error instanceof Error) return `${error.name}: ${error.message}`;
    if (typeof error === 'string') return error.length > 200 ? `${error.slice(0, 199)}…` : error;
    return Object.prototype.toString.call(error);
  } catch {
    return '(a value that cannot be described)';
  }
}

/** At most this many characters of a thrown value's message reach a span (status, exception). */
export const MAX_EXCEPTION_MESSAGE = 2_048;
/** At most this many characters of a thrown value's stack reach a span. */
export const MAX_EXCEPTION_STACK = 8_192;

/** `text` cut to `max` characters, marked with `…` when cut: a 9 MB message costs 2 KB. */
function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** A thrown value as the SDK's `recordException` reads it: plain strings only. */
export interface ExceptionRecord {
  message: string;
  name?: string;
  stack?: string;
  code?: string;
}

/**
 * What `span.recordException` gets for `error`: its name, message, stack (and `code`, which the
 * SDK prefers as `exception.type`), each read inside a guard. A value whose reads throw gives
 * what could be read; a non-Error gives its string form as the message.
 */
export function exceptionRecord(error: unknown, report: (error: unknown) => void): ExceptionRecord {
  const record: ExceptionRecord = { message: '' };
  let isError: boolean;
  try {
    isError = error instanceof Error;
  } catch (failure) {
    report(failure);
    return { name: ERROR_TYPE_OTHER, message: '(a value that cannot be read)' };
  }
  if (!isError) {
    let message: string;
    try {
      message = typeof error === 'string' ? error : String(error);
    } catch (failure) {
      report(failure);
      message = '(a value that cannot be read)';
    }
    record.message = clip(message, MAX_EXCEPTION_MESSAGE);
    return record;
  }
  const read = (key: 'name' | 'message' | 'stack' | 'code'): string | undefined => {
    try {
      const value: unknown = (error as unknown as Record<string, unknown>)[key];
      if (typeof value === 'string') return value;
      if (typeof value === 'number' && key === 'code') return String(value);
      return undefined;
    } catch (failure) {
      report(failure);
      return undefined;
    }
  };
  const name = read('name');
  const message = read('message');
  const stack = read('stack');
  const code = read('code');
  if (name !== undefined) record.name = clip(name, 200);
  record.message = clip(message ?? '', MAX_EXCEPTION_MESSAGE);
  if (stack !== undefined) record.stack = clip(stack, MAX_EXCEPTION_STACK);
  // The library's own errors keep their class as `exception.type` (their `code` is for callers to
  // branch on); another error's code (`ECONNREFUSED`) is what the SDK records, as it always did.
  if (code !== undefined && code !== '' && !isLibraryError(error)) record.code = code;
  if (name === undefined && code === undefined) record.name = ERROR_TYPE_OTHER;
  return record;
}

function isLibraryError(error: unknown): boolean {
  try {
    return error instanceof OrchestratorError;
  } catch {
    return false;
  }
}

/** The status message of a thrown value; never throws. */
export function errorMessage(error: unknown): string {
  try {
    if (error instanceof Error) {
      const message: unknown = error.message;
      return typeof message === 'string' ? clip(message, MAX_EXCEPTION_MESSAGE) : '';
    }
    return clip(String(error), MAX_EXCEPTION_MESSAGE);
  } catch {
    return '(a value that cannot be read)';
  }
}

/**
 * Adds a decision's `observed` and `limit` (finite numbers only), and its `policy` when
 * `policyKey` is given, to `attributes` under the given names; a decision whose reads throw (a
 * getter) adds nothing.
 */
export function addExplanation(
  attributes: Attributes,
  decision: object,
  observedKey: string,
  limitKey: string,
  policyKey?: string,
): void {
  try {
    const { observed, limit, policy } = decision as {
      observed?: unknown;
      limit?: unknown;
      policy?: unknown;
    };
    if (policyKey !== undefined && typeof policy === 'string') attributes[policyKey] = policy;
    if (typeof observed === 'number' && Number.isFinite(observed))
      attributes[observedKey] = observed;
    if (typeof limit === 'number' && Number.isFinite(limit)) attributes[limitKey] = limit;
  } catch {
    // A decision object that cannot be read explains nothing; its event is kept.
  }
}

/** The SDK's default `attributePerEventCountLimit`, when the span does not say its own. */
export const DEFAULT_EVENT_ATTRIBUTE_LIMIT = 128;

/**
 * The event attribute limit in force on `span`: the SDK span's `_spanLimits` (not public API,
 * read by shape), or the SDK's default. Past it the SDK drops an event's attributes anyway, so
 * copying more is work for nothing.
 */
export function eventAttributeLimit(span: object): number {
  try {
    const limits = (span as { _spanLimits?: { attributePerEventCountLimit?: unknown } })
      ._spanLimits;
    const limit = limits?.attributePerEventCountLimit;
    if (typeof limit === 'number' && limit >= 0 && Number.isFinite(limit)) return limit;
  } catch {
    // Not the SDK's span.
  }
  return DEFAULT_EVENT_ATTRIBUTE_LIMIT;
}

/**
 * How many state attributes a dispatch event on `span` has room for: the event attribute limit
 * in force less every attribute the plugin may write itself (11), so that the SDK, which keeps
 * an event's first attributes up to the limit, never drops one of the plugin's.
 */
export function stateAttributeRoom(span: object): number {
  return Math.max(0, eventAttributeLimit(span) - DISPATCH_EVENT_OWN_ATTRIBUTES.size);
}

/**
 * A copy of `attributes` taken now, at most `limit` keys, each key read inside its own guard (a
 * throwing getter costs its attribute); an object whose keys cannot be listed (an `ownKeys` trap
 * that throws, a revoked Proxy) costs what was not yet copied. The copy matters: the events are
 * written when the conversation ends, and a function that reuses and mutates one object must
 * not rewrite the earlier events. A key in `reserved` is not copied (and takes no room):
 * `clash` hears of it.
 */
export function copyAttributes(
  attributes: object,
  limit: number,
  report: (error: unknown) => void,
  reserved?: ReadonlySet<string>,
  clash?: (key: string) => void,
): Attributes {
  const copy: Attributes = {};
  if (limit <= 0) return copy;
  let copied = 0;
  try {
    for (const key in attributes) {
      if (reserved?.has(key)) {
        clash?.(key);
        continue;
      }
      try {
        const value = (attributes as Record<string, unknown>)[key];
        copy[key] = (Array.isArray(value) ? value.slice() : value) as AttributeValue;
      } catch (error) {
        report(error);
        continue;
      }
      if (++copied >= limit) break;
    }
  } catch (error) {
    report(error);
  }
  return copy;
}

/**
 * Content as a string of at most `max` UTF-16 code units, serialised within that budget: a
 * string as it is, anything else as JSON (a cycle shows as `"[Circular]"`), with the writing
 * stopped as soon as `max` is passed, so a 9 MB object costs what 1,024 characters cost. The
 * cut ends with `…`, never splits a surrogate pair, and lone surrogates become U+FFFD (valid
 * UTF-8). A content that cannot be read (a revoked Proxy, a getter that throws) becomes
 * `[unserialisable content: <class>]`, reported through `report`.
 */
export function boundedContent(
  content: unknown,
  max: number,
  report: (error: unknown) => void,
): string {
  let text: string;
  try {
    text = typeof content === 'string' ? content.slice(0, max + 1) : serialise(content, max + 1);
  } catch (error) {
    report(error);
    return `${UNSERIALISABLE}: ${errorType(error)}]`;
  }
  if (text.length > max) {
    let cut = max - 1;
    // A high surrogate just before the cut would lose its low half.
    const last = text.charCodeAt(cut - 1);
    if (last >= 0xd800 && last <= 0xdbff) cut--;
    text = `${text.slice(0, cut)}…`;
  }
  return wellFormed(text);
}

/** `boundedContent` of `message.content`, the read itself guarded (a getter may throw). */
export function messageContent(
  message: { readonly content: unknown },
  max: number,
  report: (error: unknown) => void,
): string {
  let content: unknown;
  try {
    content = message.content;
  } catch (error) {
    report(error);
    return `${UNSERIALISABLE}: ${errorType(error)}]`;
  }
  return boundedContent(content, max, report);
}

/** `String.prototype.toWellFormed` (ES2024, Node 20) without widening the compile target. */
function wellFormed(text: string): string {
  const s = text as string & { isWellFormed(): boolean; toWellFormed(): string };
  return s.isWellFormed() ? text : s.toWellFormed();
}

/** Thrown inside `serialise` once the budget is spent: what was written so far is the answer. */
class BudgetSpent {
  constructor(readonly text: string) {}
}

/**
 * JSON of `value` up to `budget` code units (more only by the last piece written), as
 * `JSON.stringify` writes it for ordinary values; values JSON cannot write at the top
 * (`undefined`, a function, a symbol) as their string form, a bigint as its digits.
 */
function serialise(value: unknown, budget: number): string {
  const top = typeof value;
  if (top === 'undefined' || top === 'function' || top === 'symbol') {
    const text = String(value);
    return text.length > budget ? text.slice(0, budget) : text;
  }
  const out = new Writer(budget);
  try {
    out.value(value, '', true);
  } catch (error) {
    if (error instanceof BudgetSpent) return error.text;
    throw error;
  }
  return out.text;
}

/** What JSON writes for `value`: its `toJSON(key)` when it has one (a Date's ISO string). */
function withToJSON(value: unknown, key: string): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  return typeof toJSON === 'function' ? toJSON.call(value, key) : value;
}

class Writer {
  text = '';
  /** The objects being written, innermost last: a cycle goes back to one of them. */
  readonly #ancestors: object[] = [];

  constructor(readonly budget: number) {}

  #put(piece: string): void {
    this.text += piece;
    if (this.text.length >= this.budget) throw new BudgetSpent(this.text);
  }

  /** Writes `value`; answers false when JSON leaves it out (undefined, a function, a symbol). */
  value(value: unknown, key: string, inArray: boolean, resolved = false): boolean {
    const v = resolved ? value : withToJSON(value, key);
    switch (typeof v) {
      case 'string':
        // Only what the budget can still take is escaped.
        this.#put(JSON.stringify(v.length > this.budget ? v.slice(0, this.budget) : v));
        return true;
      case 'number':
        this.#put(Number.isFinite(v) ? String(v) : 'null');
        return true;
      case 'boolean':
        this.#put(v ? 'true' : 'false');
        return true;
      case 'bigint':
        this.#put(String(v));
        return true;
      case 'object':
        if (v === null) {
          this.#put('null');
          return true;
        }
        this.#object(v);
        return true;
      default:
        if (inArray) this.#put('null');
        return inArray;
    }
  }

  #object(object: object): void {
    if (this.#ancestors.includes(object)) {
      this.#put('"[Circular]"');
      return;
    }
    this.#ancestors.push(object);
    if (Array.isArray(object)) {
      this.#put('[');
      for (let i = 0; i < object.length; i++) {
        if (i > 0) this.#put(',');
        this.value(object[i], String(i), true);
      }
      this.#put(']');
    } else {
      this.#put('{');
      let first = true;
      for (const key in object) {
        if (!Object.hasOwn(object, key)) continue;
        const child = withToJSON((object as Record<string, unknown>)[key], key);
        const kind = typeof child;
        if (kind === 'undefined' || kind === 'function' || kind === 'symbol') continue;
        const name = key.length > this.budget ? key.slice(0, this.budget) : key;
        this.#put(`${first ? '' : ','}${JSON.stringify(name)}:`);
        first = false;
        this.value(child, key, false, true);
      }
      this.#put('}');
    }
    this.#ancestors.pop();
  }
}
