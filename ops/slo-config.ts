/**
 * The checks of the SLO options: objectives in (0, 1), reasons the telemetry can report, a
 * latency threshold that is a bucket boundary, burn-rate windows that nest within every period.
 * A config that fails one would render rules that cannot mean what they say: it is refused
 * before anything is written.
 */
import { isReasonName } from '../src/core/spi/policy.ts';
import { BUILT_IN_REASONS } from '../src/observability/metrics.ts';
import {
  describe,
  duration,
  durationSeconds,
  expect,
  OpsConfigError,
  plainObject,
  ratio,
  unknownKeys,
} from './check.ts';
import type { BurnRateAlertConfig, OpsConfig } from './config-types.ts';

const SEVERITIES = ['critical', 'warning'];
const BURN_RATE_KEYS = ['severity', 'burnRate', 'longWindow', 'shortWindow', 'for'];

/** The error budget of an objective, without the float noise of `1 - 0.95`. */
export function errorBudget(objective: number): number {
  return Number((1 - objective).toPrecision(12));
}

function reasons(what: string, value: unknown, known: ReadonlySet<string>, empty: boolean): void {
  expect(
    Array.isArray(value) &&
      (empty || value.length > 0) &&
      new Set(value).size === value.length &&
      value.every((r) => typeof r === 'string'),
    what,
    `an array of distinct reasons${empty ? '' : ', at least one'}`,
    value,
  );
  const unknown = (value as string[]).find((r) => !known.has(r));
  if (unknown !== undefined) {
    throw new OpsConfigError(
      `Expected \`${what}\` to hold reasons the telemetry reports (built-in: ${[...BUILT_IN_REASONS].map((r) => `\`${r}\``).join(', ')}; or one of \`customReasons\`), got ${describe(unknown)}`,
    );
  }
}

function burnRateAlert(what: string, value: unknown, config: OpsConfig): void {
  plainObject(what, value);
  const a = value as BurnRateAlertConfig;
  unknownKeys(`${what}.`, a, BURN_RATE_KEYS);
  expect(
    SEVERITIES.includes(a.severity),
    `${what}.severity`,
    '`critical` or `warning`',
    a.severity,
  );
  expect(
    typeof a.burnRate === 'number' && Number.isFinite(a.burnRate) && a.burnRate > 0,
    `${what}.burnRate`,
    'a positive number',
    a.burnRate,
  );
  duration(`${what}.longWindow`, a.longWindow);
  duration(`${what}.shortWindow`, a.shortWindow);
  duration(`${what}.for`, a.for);
  expect(
    durationSeconds(a.shortWindow) < durationSeconds(a.longWindow),
    `${what}.shortWindow`,
    `shorter than its \`longWindow\` (${a.longWindow})`,
    a.shortWindow,
  );
  for (const [name, slo] of Object.entries(config.slos)) {
    expect(
      durationSeconds(a.longWindow) <= durationSeconds(slo.period),
      `${what}.longWindow`,
      `within the period of \`slos.${name}\` (${slo.period})`,
      a.longWindow,
    );
    // Above an error ratio of 1 the alert could never fire.
    const threshold = a.burnRate * errorBudget(slo.objective);
    expect(
      threshold < 1,
      `${what}.burnRate`,
      `below 1 / the error budget of \`slos.${name}\` (1 / ${errorBudget(slo.objective)} = ${Number((1 / errorBudget(slo.objective)).toPrecision(6))}): a higher burn would need more than every event to be bad`,
      a.burnRate,
    );
  }
}

/** Throws an `OpsConfigError` for the first SLO option that is wrong. */
export function checkSlos(config: OpsConfig): void {
  const buckets = config.conversationDurationBuckets;
  expect(
    Array.isArray(buckets) &&
      buckets.length > 0 &&
      buckets.every(
        (b, i) =>
          typeof b === 'number' &&
          Number.isFinite(b) &&
          b > 0 &&
          (i === 0 || b > (buckets[i - 1] as number)),
      ),
    'conversationDurationBuckets',
    'an increasing array of positive numbers of seconds',
    buckets,
  );
  const custom = config.customReasons;
  expect(
    Array.isArray(custom) &&
      new Set(custom).size === custom.length &&
      custom.every((r) => isReasonName(r) && !BUILT_IN_REASONS.has(r)),
    'customReasons',
    'an array of distinct snake_case reasons of 1-40 characters, none of them built in',
    custom,
  );
  const known = new Set([...BUILT_IN_REASONS, ...custom]);
  const { convergence, convergenceLatency } = config.slos;
  for (const [name, slo] of Object.entries(config.slos)) {
    ratio(`slos.${name}.objective`, slo.objective);
    duration(`slos.${name}.period`, slo.period);
  }
  reasons('slos.convergence.goodReasons', convergence.goodReasons, known, false);
  reasons('slos.convergence.excludedReasons', convergence.excludedReasons, known, true);
  const both = convergence.excludedReasons.find((r) => convergence.goodReasons.includes(r));
  expect(
    both === undefined,
    'slos.convergence.excludedReasons',
    'reasons that are not also good ones',
    both,
  );
  const threshold = convergenceLatency.thresholdSeconds;
  expect(
    buckets.includes(threshold),
    'slos.convergenceLatency.thresholdSeconds',
    `a bucket boundary of orchestrator_conversation_duration_seconds (\`conversationDurationBuckets\`: ${buckets.join(', ')})`,
    threshold,
  );
  const alerts = config.burnRateAlerts;
  expect(Array.isArray(alerts) && alerts.length > 0, 'burnRateAlerts', 'a non-empty array', alerts);
  for (const [i, a] of alerts.entries()) burnRateAlert(`burnRateAlerts[${i}]`, a, config);
}
