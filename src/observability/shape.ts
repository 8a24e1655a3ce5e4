/**
 * Construction-time checks of what the app hands in by shape (an options object, an exporter, a
 * span processor, a store, a registry): duck-typed, so a second copy of a library works like the
 * first. Every failure names the option, what was expected and what came (`fail`).
 */
import { fail } from '../core/shared/validate.ts';

/** Throws unless a constructor's `options` is an object. */
export function optionsObject(options: unknown): void {
  if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
}

/** Whether `value` is an object whose `methods` are all functions (read in that order). */
export function hasMethods(value: unknown, methods: readonly string[]): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const record = value as Readonly<Record<string, unknown>>;
  for (const method of methods) if (typeof record[method] !== 'function') return false;
  return true;
}

/** Throws unless `value` (option `option`) has `methods`; `expected` says what it should be. */
export function withMethods(
  option: string,
  value: unknown,
  methods: readonly string[],
  expected: string,
): void {
  if (!hasMethods(value, methods)) fail(option, expected, value);
}
