/**
 * The config checks' shared vocabulary: every refusal says what was expected and what came, in
 * the p-queue style of `src/core/shared/validate.ts`.
 */

export class OpsConfigError extends Error {
  override name = 'OpsConfigError';
}

export function describe(value: unknown): string {
  return `\`${typeof value === 'string' ? value : JSON.stringify(value)}\` (${typeof value})`;
}

export function expect(ok: boolean, what: string, expected: string, value: unknown): void {
  if (!ok)
    throw new OpsConfigError(`Expected \`${what}\` to be ${expected}, got ${describe(value)}`);
}

/** An object that is neither `null` nor an array: what every nested option must be. */
export function plainObject(what: string, value: unknown): asserts value is object {
  expect(
    typeof value === 'object' && value !== null && !Array.isArray(value),
    what,
    'an object',
    value,
  );
}

/** Refuses a key `known` lacks: a misspelt option would otherwise be ignored in silence. */
export function unknownKeys(prefix: string, given: object, known: readonly string[]): void {
  for (const key of Object.keys(given)) {
    if (!known.includes(key)) {
      throw new OpsConfigError(
        `Unknown option \`${prefix}${key}\`; expected one of ${known
          .map((k) => `\`${prefix}${k}\``)
          .join(', ')}`,
      );
    }
  }
}

// Prometheus' own duration grammar (model.ParseDuration): each unit once, largest first.
const DURATION = /^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$/;

export function duration(what: string, value: unknown): void {
  expect(
    typeof value === 'string' && value !== '' && DURATION.test(value) && /[1-9]/.test(value),
    what,
    'a Prometheus duration such as `5m` or `1h30m` (units from y to ms, each once, largest first, more than zero)',
    value,
  );
}

const SECONDS: Readonly<Record<string, number>> = {
  y: 365 * 86_400,
  w: 7 * 86_400,
  d: 86_400,
  h: 3_600,
  m: 60,
  s: 1,
  ms: 0.001,
};

/** A duration `duration()` accepted, in seconds (Prometheus' year is 365 days). */
export function durationSeconds(value: string): number {
  let total = 0;
  for (const [, n, unit] of value.matchAll(/(\d+)(ms|y|w|d|h|m|s)/g)) {
    total += Number(n) * (SECONDS[unit as string] as number);
  }
  return total;
}

export function ratio(what: string, value: unknown): void {
  expect(
    typeof value === 'number' && value > 0 && value < 1,
    what,
    'a ratio between 0 and 1',
    value,
  );
}
