/**
 * The SLOs as rules: each SLO's error ratio and event rate recorded over every burn-rate window
 * and over its period, and one multi-window, multi-burn-rate alert per SLO and window pair (the
 * SRE workbook's "Alerting on SLOs", as Sloth and Pyrra generate them).
 */
import {
  METRIC_CONVERSATION_DURATION,
  METRIC_CONVERSATIONS_ENDED,
} from '../src/observability/semconv.ts';
import { durationSeconds } from './check.ts';
import type { Duration, OpsConfig, SloConfig } from './config-types.ts';
import { byOrchestrator, humanDuration, percent, recordName } from './names.ts';
import { type AlertingRule, alertRule, type RecordingRule } from './rule-model.ts';
import { errorBudget } from './slo-config.ts';

/** What an SLO is called in labels (`slo`), alert names and prose. */
export interface Slo extends SloConfig {
  /** The `slo` label's value. */
  readonly name: 'convergence' | 'convergence_latency';
  /** The alert's name. */
  readonly alert: string;
  /** What it promises, for descriptions: "95% of conversations converge". */
  readonly promise: string;
  /** The bad events per second over a window, summed by `by`. */
  readonly errors: (window: Duration, by: string) => string;
  /** The events per second over a window, summed by `by`. */
  readonly events: (window: Duration, by: string) => string;
}

/** Regex alternatives of label values (reasons are snake_case: nothing to escape). */
function alternatives(values: readonly string[]): string {
  return values.join('|');
}

/**
 * The `le` matcher of a bucket boundary. Prometheus 2 keeps `le` as the exposition writes it
 * (`5`); Prometheus 3 normalises whole numbers to `5.0`: the matcher takes both.
 */
export function leMatcher(boundary: number): string {
  return Number.isInteger(boundary) ? `le=~"${boundary}(\\\\.0)?"` : `le="${boundary}"`;
}

export function slos(config: OpsConfig): readonly Slo[] {
  const S = config.selector;
  const { convergence, convergenceLatency } = config.slos;
  const excluded =
    convergence.excludedReasons.length > 0
      ? `,reason!~"${alternatives(convergence.excludedReasons)}"`
      : '';
  const good = `reason=~"${alternatives(convergence.goodReasons)}"`;
  const bad = `reason!~"${alternatives([...convergence.goodReasons, ...convergence.excludedReasons])}"`;
  const ended = (matchers: string, window: Duration, by: string) =>
    `sum by (${by}) (rate(${METRIC_CONVERSATIONS_ENDED}{${S}${matchers}}[${window}]))`;
  const converged = (series: string, window: Duration, by: string) =>
    `sum by (${by}) (rate(${METRIC_CONVERSATION_DURATION}_${series}[${window}]))`;
  const within = `bucket{${S},${good},${leMatcher(convergenceLatency.thresholdSeconds)}}`;
  return [
    {
      ...convergence,
      name: 'convergence',
      alert: 'OrchestratorConvergenceSLOBurn',
      promise: `${percent(convergence.objective)} of conversations converge`,
      errors: (w, by) => ended(`,${bad}`, w, by),
      events: (w, by) => ended(excluded, w, by),
    },
    {
      ...convergenceLatency,
      name: 'convergence_latency',
      alert: 'OrchestratorConvergenceLatencySLOBurn',
      promise: `${percent(convergenceLatency.objective)} of converged conversations converge within ${convergenceLatency.thresholdSeconds}s`,
      errors: (w, by) =>
        `(\n  ${converged(`count{${S},${good}}`, w, by)}\n  -\n  ${converged(within, w, by)}\n)`,
      events: (w, by) => converged(`count{${S},${good}}`, w, by),
    },
  ];
}

/** Every window a rule records: the burn-rate alerts' windows and the SLOs' periods, shortest first. */
export function sloWindows(config: OpsConfig): readonly Duration[] {
  const windows = new Set<Duration>();
  for (const a of config.burnRateAlerts) windows.add(a.shortWindow).add(a.longWindow);
  for (const slo of Object.values(config.slos)) windows.add(slo.period);
  // Two spellings of one duration (`60m`, `1h`) are one window: keep the first.
  const bySeconds = new Map<number, Duration>();
  for (const w of windows)
    if (!bySeconds.has(durationSeconds(w))) bySeconds.set(durationSeconds(w), w);
  return [...bySeconds.entries()].sort(([a], [b]) => a - b).map(([, w]) => w);
}

/** The spelling `sloWindows` records a window under. */
function recordedWindow(config: OpsConfig, window: Duration): Duration {
  const seconds = durationSeconds(window);
  return sloWindows(config).find((w) => durationSeconds(w) === seconds) as Duration;
}

/** The SLO recording rules' names, for the alerts and the dashboards. */
export function sloRecordNames(config: OpsConfig) {
  const O = byOrchestrator(config);
  return {
    errorRatio: (window: Duration) =>
      recordName(O, 'orchestrator_slo_errors', `ratio_rate${recordedWindow(config, window)}`),
    events: (window: Duration) =>
      recordName(O, 'orchestrator_slo_events', `rate${recordedWindow(config, window)}`),
  };
}

export function sloRecordingRules(config: OpsConfig): RecordingRule[] {
  const O = byOrchestrator(config).join(', ');
  const names = sloRecordNames(config);
  return slos(config).flatMap((slo) =>
    sloWindows(config).flatMap((w) => [
      {
        record: names.errorRatio(w),
        expr: `${slo.errors(w, O)}\n/\n${slo.events(w, O)}\n`,
        labels: { slo: slo.name },
      },
      { record: names.events(w), expr: `${slo.events(w, O)}\n`, labels: { slo: slo.name } },
    ]),
  );
}

export function sloAlerts(config: OpsConfig): AlertingRule[] {
  const by = byOrchestrator(config);
  const on = by.join(', ');
  const names = sloRecordNames(config);
  return slos(config).flatMap((slo) => {
    const budget = errorBudget(slo.objective);
    const selectSlo = `{slo="${slo.name}"}`;
    // The budget spent over the period, for the description: the template asks Prometheus.
    const spent = `${names.errorRatio(slo.period)}{slo=%q,${by.map((l) => `${l}=%q`).join(',')}} / ${budget}`;
    const spentArgs = [`\`${slo.name}\``, ...by.map((l) => `$labels.${l}`)].join(' ');
    return config.burnRateAlerts.map((a, i) => {
      const share = (a.burnRate * durationSeconds(a.longWindow)) / durationSeconds(slo.period);
      return alertRule(config, {
        alert: slo.alert,
        expr: [
          `${names.errorRatio(a.longWindow)}${selectSlo} / ${budget}`,
          `  > ${a.burnRate} # burnRateAlerts[${i}].burnRate over its longWindow (error budget ${budget})`,
          `and on (${on})`,
          `${names.errorRatio(a.shortWindow)}${selectSlo} / ${budget}`,
          `  > ${a.burnRate} # ... and over its shortWindow`,
          `and on (${on})`,
          `${names.events(a.longWindow)}${selectSlo}`,
          `  > ${config.minTraffic} # minTraffic: events per second over the longWindow`,
          '',
        ].join('\n'),
        for: a.for,
        severity: a.severity,
        labels: {
          slo: slo.name,
          long_window: a.longWindow,
          short_window: a.shortWindow,
        },
        summary: `The ${slo.name.replace('_', ' ')} SLO's error budget is burning too fast.`,
        description:
          `Orchestrator {{ $labels.orchestrator }} spends the error budget of its ${slo.name.replace('_', ' ')} SLO ` +
          `(objective: ${slo.promise}, over ${humanDuration(slo.period)}) {{ $value | humanize }} times as fast as the ` +
          `objective allows over the last ${humanDuration(a.longWindow)}, and still over the last ` +
          `${humanDuration(a.shortWindow)} (threshold ${a.burnRate}x: at that rate ${percent(share)} of the budget goes in ` +
          `${humanDuration(a.longWindow)}). Budget consumed over the last ${humanDuration(slo.period)}: ` +
          `{{ with printf \`${spent}\` ${spentArgs} | query }}{{ . | first | value | humanizePercentage }}{{ else }}unknown{{ end }}.`,
      });
    });
  });
}
