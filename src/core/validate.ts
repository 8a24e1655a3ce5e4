/** Construction-time validation: every failure names the option, what was expected and what came. */
import { describeValue, OrchestratorConfigError } from './errors.ts';

export function fail(option: string, expected: string, value: unknown): never {
  throw new OrchestratorConfigError(
    `Expected \`${option}\` to be ${expected}, got ${describeValue(value)}`,
  );
}

export function positiveInteger(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    fail(option, 'a positive integer', value);
  }
  return value;
}

export function nonNegativeInteger(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    fail(option, 'a non-negative integer', value);
  }
  return value;
}

export function positiveNumber(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) {
    fail(option, 'a positive finite number', value);
  }
  return value;
}

export function nonNegativeNumber(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    fail(option, 'a non-negative finite number', value);
  }
  return value;
}

export function isFunction(option: string, value: unknown): void {
  if (typeof value !== 'function') fail(option, 'a function', value);
}

/** Names that become metric label values or span names: short, printable, bounded. */
const NAME = /^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}$/;

/** The name rule as error messages and the README state it (the first character included). */
export const NAME_EXPECTED =
  'a name of 1-64 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`';

export function isBoundedName(value: unknown): value is string {
  return typeof value === 'string' && NAME.test(value);
}

export function boundedName(option: string, value: unknown): string {
  if (!isBoundedName(value)) fail(option, NAME_EXPECTED, value);
  return value;
}

/** Conversation ids go onto every span and event: the name rule, up to 128 characters. */
const CONVERSATION_ID = /^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,127}$/;

export const CONVERSATION_ID_EXPECTED =
  'an id of 1-128 characters (ASCII letters, digits, `_`, `.`, `:` or `-`) starting with a letter, a digit or `_`';

export function conversationId(option: string, value: unknown): string {
  if (typeof value !== 'string' || !CONVERSATION_ID.test(value)) {
    fail(option, CONVERSATION_ID_EXPECTED, value);
  }
  return value;
}
