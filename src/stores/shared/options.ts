/**
 * Option checks the stores share: integers, the retention options, the network stores' client
 * forms, and URLs shown without their password. Values are shown by the core's `describeValue`, which
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

/** `value` when it is a string `ok` accepts, else a TypeError naming the option and the factory. */
export function checkString(
  factory: string,
  name: string,
  value: unknown,
  ok: (value: string) => boolean,
  expected: string,
): string {
  if (typeof value !== 'string' || !ok(value)) throw optionError(factory, name, expected, value);
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

/** The options every durable store takes for how long it keeps what it stores. */
export interface RetentionOptions {
  readonly retentionMs?: number | undefined;
  readonly purgeIntervalMs?: number | undefined;
  readonly maxCheckpointBytes?: number | undefined;
}

/** {@link RetentionOptions} checked, each defaulted from `defaults`. */
export function checkRetention(
  factory: string,
  options: RetentionOptions,
  defaults: Required<{ [K in keyof RetentionOptions]: number }>,
): Required<{ [K in keyof RetentionOptions]: number }> {
  return {
    retentionMs: checkInteger(
      factory,
      'retentionMs',
      options.retentionMs ?? defaults.retentionMs,
      0,
    ),
    purgeIntervalMs: checkInteger(
      factory,
      'purgeIntervalMs',
      options.purgeIntervalMs ?? defaults.purgeIntervalMs,
      0,
    ),
    maxCheckpointBytes: checkInteger(
      factory,
      'maxCheckpointBytes',
      options.maxCheckpointBytes ?? defaults.maxCheckpointBytes,
      1,
    ),
  };
}

/** The defaults the network stores (PostgreSQL, Redis) share; each store's options state them. */
export const NETWORK_DEFAULTS = {
  retentionMs: 7 * 24 * 60 * 60 * 1000,
  purgeIntervalMs: 10 * 60 * 1000,
  maxCheckpointBytes: 16 * 1024 * 1024,
  maxSnapshotBytes: 256 * 1024 * 1024,
  connectTimeoutMs: 5_000,
} as const;

/** One way to give a network store its client: the option and what it must be. */
export type ClientForm = readonly [option: string, expected: string];

/** The error of options in neither form: not an object, or an object with neither option. */
export function clientFormsError(
  factory: string,
  [[first, firstIs], [second, secondIs]]: readonly [ClientForm, ClientForm],
  options: unknown,
): TypeError {
  if (typeof options !== 'object' || options === null) {
    return new TypeError(
      `Expected ${factory} options { ${first} } or { ${second} }, got \`${String(options)}\``,
    );
  }
  return new TypeError(
    `Expected ${factory} options with \`${first}\` (${firstIs}) or \`${second}\` (${secondIs}), got keys ${JSON.stringify(Object.keys(options))}`,
  );
}

/** A connection URL without its password, for error messages; `fallback` when it is no URL. */
export function withoutPassword(url: string, fallback: string): string {
  try {
    const parsed = new URL(url);
    parsed.password = '';
    return parsed.toString();
  } catch {
    return fallback;
  }
}
