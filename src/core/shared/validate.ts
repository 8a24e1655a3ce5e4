/** Construction-time validation: every failure names the option, what was expected and what came. */

import { describeCause, describeValue, OrchestratorConfigError } from '../spi/errors.ts';
import { CONVERSATION_ID_PATTERN, NAME_PATTERN } from './names.ts';

export function fail(option: string, expected: string, value: unknown): never {
  throw new OrchestratorConfigError(
    `Expected \`${option}\` to be ${expected}, got ${describeValue(value)}`,
  );
}

/** `value` when it is a number `is` accepts, else the failure of `option`: `expected`. */
function checkedNumber(
  option: string,
  value: unknown,
  expected: string,
  is: (n: number) => boolean,
): number {
  if (typeof value !== 'number' || !is(value)) fail(option, expected, value);
  return value;
}

function isPositiveInteger(n: number): boolean {
  return Number.isSafeInteger(n) && n >= 1;
}

function isNonNegativeInteger(n: number): boolean {
  return Number.isSafeInteger(n) && n >= 0;
}

function isPositiveNumber(n: number): boolean {
  return Number.isFinite(n) && n > 0;
}

function isNonNegativeNumber(n: number): boolean {
  return Number.isFinite(n) && n >= 0;
}

export function positiveInteger(option: string, value: unknown): number {
  return checkedNumber(option, value, 'a positive integer', isPositiveInteger);
}

export function nonNegativeInteger(option: string, value: unknown): number {
  return checkedNumber(option, value, 'a non-negative integer', isNonNegativeInteger);
}

export function positiveNumber(option: string, value: unknown): number {
  return checkedNumber(option, value, 'a positive finite number', isPositiveNumber);
}

export function nonNegativeNumber(option: string, value: unknown): number {
  return checkedNumber(option, value, 'a non-negative finite number', isNonNegativeNumber);
}

export function isFunction(option: string, value: unknown): void {
  if (typeof value !== 'function') fail(option, 'a function', value);
}

/** The name rule as error messages and the README state it (the first character included). */
export const NAME_EXPECTED =
  'a name of 1-64 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`';

/** The conversation id rule, likewise. */
export const CONVERSATION_ID_EXPECTED =
  'an id of 1-128 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`';

/** Whether `value` is a string `pattern` matches. */
function matches(value: unknown, pattern: RegExp): value is string {
  return typeof value === 'string' && pattern.test(value);
}

/** `value` when it is a string `pattern` matches, else the failure of `option`: `expected`. */
function matching(option: string, value: unknown, pattern: RegExp, expected: string): string {
  if (!matches(value, pattern)) fail(option, expected, value);
  return value;
}

/** Whether `value` is a name: metric label values and span names, short, printable, bounded. */
export function isBoundedName(value: unknown): value is string {
  return typeof value === 'string' && NAME_PATTERN.test(value);
}

/** Whether `value` is a conversation id: the one rule the core, the fleet and its payloads share. */
export function isConversationId(value: unknown): value is string {
  return typeof value === 'string' && CONVERSATION_ID_PATTERN.test(value);
}

export function boundedName(option: string, value: unknown): string {
  return matching(option, value, NAME_PATTERN, NAME_EXPECTED);
}

export function conversationId(option: string, value: unknown): string {
  return matching(option, value, CONVERSATION_ID_PATTERN, CONVERSATION_ID_EXPECTED);
}

/**
 * Whether `value` is a revoked Proxy: `Array.isArray` throws on one and on nothing else, so this
 * looks without running any trap of a live Proxy.
 */
function isRevokedProxy(value: object): boolean {
  try {
    Array.isArray(value);
    return false;
  } catch {
    return true;
  }
}

function unreadable(option: string, error: unknown): never {
  throw new OrchestratorConfigError(
    `Expected \`${option}\` to be readable, reading it threw: ${describeCause(error)}`,
  );
}

/**
 * The one guarded reader of an options object: a view of `value` through which every option is
 * read once (a getter runs once, a later read gets what the first one got) and whose reads never
 * throw an engine error. A getter that throws, or a Proxy whose `get` trap throws, gives an
 * `OrchestratorConfigError` naming the option (`optionName(key)`); a revoked Proxy as the options
 * object gives one naming `option` and saying what was `expected`. Only reads (`view.key`, destructuring) go through the guard:
 * the view is for validating at construction, and what is kept is what was read through it.
 * A value that is not an object is returned as it is, for the caller's own check to refuse.
 */
export function guardedOptions<T>(
  option: string,
  value: T,
  optionName: (key: string) => string = (key) => key,
  expected = 'an object whose options can be read',
): T {
  if ((typeof value !== 'object' && typeof value !== 'function') || value === null) return value;
  if (isRevokedProxy(value)) fail(option, expected, value);
  const read = new Map<string | symbol, unknown>();
  return new Proxy(Object.create(null) as object, {
    get(_target, key) {
      if (read.has(key)) return read.get(key);
      let got: unknown;
      try {
        got = Reflect.get(value, key);
      } catch (error) {
        unreadable(optionName(String(key)), error);
      }
      read.set(key, got);
      return got;
    },
  }) as T;
}

/**
 * `value[key]` read inside a guard, for the parts of an option (`turnPolicy.start`,
 * `responders[0].name`): a throwing getter gives an `OrchestratorConfigError` naming `option`
 * (the part's path), and a revoked Proxy one naming `owner` and saying what was `expected` of it.
 * `value` must be an object (or a function).
 */
export function readPart(
  owner: string,
  expected: string,
  value: object,
  key: string,
  option = `${owner}.${key}`,
): unknown {
  try {
    return (value as Record<string, unknown>)[key];
  } catch (error) {
    if (isRevokedProxy(value)) fail(owner, expected, value);
    unreadable(option, error);
  }
}

/**
 * The elements of an array option, each read once inside a guard, as a plain array; undefined
 * when `value` is not an array. A revoked Proxy fails as `owner`, an element whose read throws
 * (a Proxy's trap, a getter) as `owner[i]`.
 */
export function readList(owner: string, expected: string, value: unknown): unknown[] | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  if (isRevokedProxy(value)) fail(owner, expected, value);
  if (!Array.isArray(value)) return undefined;
  let length: number;
  try {
    length = value.length;
  } catch (error) {
    unreadable(`${owner}.length`, error);
  }
  const elements: unknown[] = [];
  for (let i = 0; i < length; i++) {
    try {
      elements.push(value[i]);
    } catch (error) {
      unreadable(`${owner}[${i}]`, error);
    }
  }
  return elements;
}

/** setTimeout fires at once past 2^31 - 1 ms (about 24.8 days): refuse what it cannot wait. */
export function timerDelay(option: string, value: unknown): number {
  const ms = positiveNumber(option, value);
  if (ms > 2_147_483_647) fail(option, 'a positive number of milliseconds up to 2147483647', value);
  return ms;
}
