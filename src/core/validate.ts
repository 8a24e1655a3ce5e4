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

export function boundedName(option: string, value: unknown): string {
  if (typeof value !== 'string' || !NAME.test(value)) {
    fail(option, 'a name of 1-64 letters, digits, `_`, `.`, `:` or `-`', value);
  }
  return value;
}
