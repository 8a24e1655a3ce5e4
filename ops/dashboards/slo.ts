/**
 * Conversation orchestrator / SLOs: per SLO and orchestrator, the SLI now and over the period, the
 * error budget left, the burn rate over every window the alerts use, and how long the budget
 * lasts at the last hour's rate. It reads the SLO recording rules (per orchestrator, over every
 * replica: an SLO is the service's promise, not a pod's), so it has no instance variable.
 */
import {
  GraphThresholdsStyleConfigBuilder,
  GraphThresholdsStyleMode,
} from '@grafana/grafana-foundation-sdk/common';
import {
  type Dashboard,
  ThresholdsConfigBuilder,
  ThresholdsMode,
} from '@grafana/grafana-foundation-sdk/dashboard';
import type { PanelBuilder as StatPanel } from '@grafana/grafana-foundation-sdk/stat';
import { durationSeconds } from '../check.ts';
import type { BurnRateAlertConfig, OpsConfig } from '../config-types.ts';
import { humanDuration } from '../names.ts';
import { type Slo, sloRecordNames, slos, sloWindows } from '../slo.ts';
import { errorBudget } from '../slo-config.ts';
import { build, dashboard, labelVariable, series, stat, type Target, UNIT } from './common.ts';
import { groupLabelMatchers } from './promql.ts';
import { SLO_UID } from './uids.ts';

function thresholds(steps: readonly [number | null, string][]): ThresholdsConfigBuilder {
  return new ThresholdsConfigBuilder()
    .mode(ThresholdsMode.Absolute)
    .steps(steps.map(([value, color]) => ({ value, color })));
}

/** The selector's matchers that recorded series keep (those on group labels), and the variable. */
function recordedSelector(config: OpsConfig, slo: Slo): string {
  const onGroupLabels = groupLabelMatchers(config);
  return [`slo="${slo.name}"`, ...onGroupLabels, 'orchestrator=~"$orchestrator"'].join(',');
}

function sloPanels(config: OpsConfig, slo: Slo) {
  const names = sloRecordNames(config);
  const sel = recordedSelector(config, slo);
  const budget = errorBudget(slo.objective);
  const ratio = (window: string) => `${names.errorRatio(window)}{${sel}}`;
  const period = humanDuration(slo.period);
  const title = slo.name === 'convergence' ? 'Convergence' : 'Convergence latency';
  const remaining = `1 - ${ratio(slo.period)} / ${budget}`;
  const current = (config.burnRateAlerts[0] as BurnRateAlertConfig).longWindow;
  const windows = sloWindows(config).filter(
    (w) => durationSeconds(w) < durationSeconds(slo.period),
  );
  // The alerts' thresholds, lowest first: the burn-rate panel draws them as dashed lines.
  const levels = [...new Set(config.burnRateAlerts.map((a) => a.burnRate))].sort((a, b) => a - b);
  const colors = ['yellow', 'orange', 'red', 'dark-red', 'purple'];
  const burnRate = series(
    `${title}: burn rate per window`,
    UNIT.burnRate,
    16,
    windows.map((w): Target => [`${ratio(w)} / ${budget}`, `{{orchestrator}} ${w}`]),
    `How many times faster than the objective allows the budget burns (1 spends it over ${period}). The dashed levels are the alerts' thresholds: a page needs its long and its short window above its level (${levels.at(-1)} over 1 hour by default), a ticket above ${levels[0]} over days.`,
  )
    .thresholdsStyle(new GraphThresholdsStyleConfigBuilder().mode(GraphThresholdsStyleMode.Dashed))
    .thresholds(
      thresholds([
        [null, 'transparent'],
        ...levels.map((l, i): [number, string] => [l, colors[i] ?? 'red']),
      ]),
    );
  const objective = thresholds([
    [null, 'red'],
    [slo.objective, 'green'],
  ]);
  return [
    sloStat(
      `${title}: SLI, last ${humanDuration(windows[0] ?? slo.period)}`,
      UNIT.ratio,
      `1 - ${ratio(windows[0] ?? slo.period)}`,
      `The share of good events over the shortest window (the objective: ${slo.promise}). It moves fast: judge the SLO by the period and the burn rates.`,
    ).thresholds(objective),
    sloStat(
      `${title}: SLI over ${period}`,
      UNIT.ratio,
      `1 - ${ratio(slo.period)}`,
      `The share of good events over the SLO's period; the objective: ${slo.promise}.`,
    ).thresholds(objective),
    sloStat(
      `${title}: error budget remaining`,
      UNIT.ratio,
      remaining,
      `What is left of the period's error budget (1 - objective = ${budget} of the events may be bad): below 0 it is spent.`,
    ).thresholds(
      thresholds([
        [null, 'red'],
        [0, 'orange'],
        [0.25, 'green'],
      ]),
    ),
    sloStat(
      `${title}: time until the budget is spent`,
      UNIT.seconds,
      `clamp_min(${remaining}, 0) * ${durationSeconds(slo.period)} / (${ratio(current)} / ${budget})`,
      `At the burn rate of the last ${humanDuration(current)} (the first alert's long window), how long the remaining budget lasts (0: spent; infinite: nothing burns).`,
    ),
    burnRate,
    series(
      `${title}: error budget remaining over time`,
      UNIT.ratio,
      8,
      [[remaining, '{{orchestrator}}']],
      `The budget left over the ${period} before each moment.`,
    ),
  ];
}

/** The SLO dashboard's stats: taller, a legend by orchestrator. */
function sloStat(title: string, unit: string, expr: string, description: string): StatPanel {
  return stat(title, unit, expr, { description, height: 5, legend: '{{orchestrator}}' });
}

export function sloDashboard(config: OpsConfig): Dashboard {
  const names = sloRecordNames(config);
  const all = slos(config);
  const first = all[0] as Slo;
  const onGroupLabels = groupLabelMatchers(config).join(',');
  const builder = dashboard(SLO_UID, 'Conversation orchestrator / SLOs', [
    labelVariable('orchestrator', `${names.events(first.period)}{${onGroupLabels}}`),
  ])
    .time({ from: 'now-7d', to: 'now' })
    .refresh('1m');
  return build(
    builder,
    all.flatMap((slo) => sloPanels(config, slo)),
  );
}
