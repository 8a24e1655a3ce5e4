/**
 * Option checks the network stores share. Values are shown by the core's `describeValue`, which
 * bounds what it prints and survives hostile values (a revoked Proxy, a 5 MB string).
 */
import { describeValue } from '../../core/spi/errors.ts';

/** `value` as an integer of at least `min`, or a TypeError naming the option and the factory. */
export function checkInteger(factory: string, name: string, value: unknown, min: number): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < min) {
    throw optionError(factory, name, `an integer >= ${min}`, value);
  }
  return value;
}

/** The error of option `name` of `factory`: what was expected and what came. */
export function optionError(
  factory: string,
  name: string,
  expected: string,
  value: unknown,
): TypeError {
  return new TypeError(
    `Expected \`${name}\` to be ${expected}, got ${describeValue(value)} (${factory})`,
  );
}
