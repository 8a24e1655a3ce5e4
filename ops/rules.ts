/**
 * The Prometheus rules: recording rules (`level:metric:operations`), the SLOs' burn-rate alerts
 * (ops/slo.ts) and the threshold alerts that add signal beside them, from the config. The same groups go into prometheus/rules/orchestrator.rules.yml and into the
 * Kubernetes PrometheusRule.
 */
import { endReasons } from '../src/core/spi/end-reasons.ts';
import {
  METRIC_CONVERSATION_DISPATCHES,
  METRIC_CONVERSATION_DURATION,
  METRIC_CONVERSATIONS_ENDED,
  METRIC_CONVERSATIONS_IN_PROGRESS,
  METRIC_DISPATCH_DURATION,
  METRIC_DISPATCHES,
  METRIC_LISTENER_ERRORS,
  METRIC_RESPONDER_ERRORS,
} from '../src/observability/semconv.ts';
import type { OpsConfig } from './config-types.ts';
import { durableAlerts } from './durable.ts';
import { endingAlerts } from './endings.ts';
import { byOrchestrator, byResponder, humanDuration, recordName } from './names.ts';
import { type AlertingRule, alertRule, type RecordingRule, type Rules } from './rule-model.ts';
import { sloAlerts, sloRecordingRules } from './slo.ts';
import { usageAlerts, usageRecordingRules } from './usage.ts';

export type { AlertingRule, RecordingRule, RuleGroup, Rules } from './rule-model.ts';
export { humanDuration };

/** Reasons that mean the agents did not agree: gave up or failed. */
const UNCONVERGED = endReasons((r) => r.unconverged).join('|');
/** Reasons that mean the conversation failed. */
const FAILED = endReasons((r) => r.failed).join('|');

/** The recording rules' names, for the alerts here and the dashboards. */
export function recordedNames(config: OpsConfig) {
  const O = byOrchestrator(config);
  const R = byResponder(config);
  const W = config.rateWindow;
  return {
    dispatchRate: recordName(O, 'orchestrator_dispatches', `rate${config.dispatchWindow}`),
    responderDispatchRate: recordName(R, 'orchestrator_dispatches', `rate${W}`),
    endedByReason: recordName([...O, 'reason'], 'orchestrator_conversations_ended', `rate${W}`),
    ended: recordName(O, 'orchestrator_conversations_ended', `rate${W}`),
    convergedRatio: recordName(O, 'orchestrator_conversations_converged', `ratio_rate${W}`),
    unconvergedRatio: recordName(O, 'orchestrator_conversations_unconverged', `ratio_rate${W}`),
    failedRatio: recordName(O, 'orchestrator_conversations_failed', `ratio_rate${W}`),
    convergedDurationQuantile: recordName(
      O,
      'orchestrator_conversation_duration_seconds_converged',
      `histogram_quantile_rate${W}`,
    ),
    convergedDispatchesQuantile: recordName(
      O,
      'orchestrator_conversation_dispatches_converged',
      `histogram_quantile_rate${W}`,
    ),
    responderDurationQuantile: recordName(
      R,
      'orchestrator_dispatch_duration_seconds',
      `histogram_quantile_rate${W}`,
    ),
    inProgress: recordName(O, 'orchestrator_conversations_in_progress', 'sum'),
    responderErrors: recordName(R, 'orchestrator_responder_errors', `rate${W}`),
    listenerErrors: recordName(O, 'orchestrator_listener_errors', `rate${W}`),
  } as const;
}

export function rules(config: OpsConfig): Rules {
  const S = config.selector;
  const W = config.rateWindow;
  const O = byOrchestrator(config).join(', ');
  const R = byResponder(config).join(', ');
  const OI = [...byOrchestrator(config), 'instance'].join(', ');
  const names = recordedNames(config);
  const ratio = (reasons: string) =>
    [
      `sum by (${O}) (rate(${METRIC_CONVERSATIONS_ENDED}{${S},${reasons}}[${W}]))`,
      '/',
      `sum by (${O}) (rate(${METRIC_CONVERSATIONS_ENDED}{${S}}[${W}]))`,
      '',
    ].join('\n');
  const quantile = (q: string, metric: string, by: string, extra = '') =>
    `histogram_quantile(${q}, sum by (${by}, le) (rate(${metric}_bucket{${S}${extra}}[${W}])))`;
  const recording: RecordingRule[] = [
    {
      record: names.dispatchRate,
      expr: `sum by (${O}) (rate(${METRIC_DISPATCHES}{${S}}[${config.dispatchWindow}]))`,
    },
    {
      record: names.responderDispatchRate,
      expr: `sum by (${R}) (rate(${METRIC_DISPATCHES}{${S}}[${W}]))`,
    },
    {
      record: names.endedByReason,
      expr: `sum by (${O}, reason) (rate(${METRIC_CONVERSATIONS_ENDED}{${S}}[${W}]))`,
    },
    {
      record: names.ended,
      expr: `sum by (${O}) (rate(${METRIC_CONVERSATIONS_ENDED}{${S}}[${W}]))`,
    },
    { record: names.convergedRatio, expr: ratio('reason="converged"') },
    // Ended without converging: gave up (max_dispatches, timeout) or failed (error, deadline,
    // queue_overflow). queue_exhausted and aborted are the caller's doing, not the agents'.
    { record: names.unconvergedRatio, expr: ratio(`reason=~"${UNCONVERGED}"`) },
    { record: names.failedRatio, expr: ratio(`reason=~"${FAILED}"`) },
    ...['0.5', '0.95', '0.99'].map((q) => ({
      record: names.convergedDurationQuantile,
      expr: quantile(q, METRIC_CONVERSATION_DURATION, O, ',reason="converged"'),
      labels: { quantile: q },
    })),
    {
      record: names.convergedDispatchesQuantile,
      expr: quantile('0.95', METRIC_CONVERSATION_DISPATCHES, O, ',reason="converged"'),
      labels: { quantile: '0.95' },
    },
    {
      record: names.responderDurationQuantile,
      expr: quantile('0.95', METRIC_DISPATCH_DURATION, R),
      labels: { quantile: '0.95' },
    },
    {
      record: names.inProgress,
      expr: `sum by (${O}) (${METRIC_CONVERSATIONS_IN_PROGRESS}{${S}})`,
    },
    {
      record: names.responderErrors,
      expr: `sum by (${R}) (rate(${METRIC_RESPONDER_ERRORS}{${S}}[${W}]))`,
    },
    {
      record: names.listenerErrors,
      expr: `sum by (${O}) (rate(${METRIC_LISTENER_ERRORS}{${S}}[${W}]))`,
    },
  ];

  const alerts: AlertingRule[] = [
    alertRule(config, {
      alert: 'OrchestratorStalledConversations',
      // Per instance: conversations live in one process, so one stuck replica is stalled even
      // while the others dispatch (a sum over the job would hide it).
      expr: [
        `sum by (${OI}) (${METRIC_CONVERSATIONS_IN_PROGRESS}{${S}}) > 0`,
        `unless on (${OI})`,
        `sum by (${OI}) (rate(${METRIC_DISPATCHES}{${S}}[${config.dispatchWindow}])) > 0`,
        '',
      ].join('\n'),
      // stalledConversations.for: how long conversations may sit without a single dispatch.
      for: config.stalledConversations.for,
      severity: 'critical',
      summary: 'Conversations are in progress but nothing is being dispatched.',
      description:
        'Orchestrator {{ $labels.orchestrator }} on {{ $labels.instance }} has {{ $value }} ' +
        `conversations in progress and has dispatched nothing for ${humanDuration(config.stalledConversations.for)}.`,
    }),
    alertRule(config, {
      alert: 'OrchestratorListenerErrors',
      expr: `${names.listenerErrors} > 0\n`,
      for: config.listenerErrors.for,
      severity: 'warning',
      summary: 'A conversation listener keeps failing.',
      description:
        'Listeners of orchestrator {{ $labels.orchestrator }} fail {{ $value | humanize }} times ' +
        'a second; their updates are lost (the conversations themselves are unaffected).',
    }),
    alertRule(config, {
      alert: 'OrchestratorTargetDown',
      expr: `up{${S}} == 0 # selector: the service's scrape targets\n`,
      for: config.targetDown.for,
      // One replica of several: the others still serve. It inhibits nothing (OrchestratorJobDown
      // does, when every replica is gone).
      severity: 'warning',
      summary: 'Prometheus cannot scrape an instance of the conversation service.',
      description:
        'The scrape of {{ $labels.instance }} (job {{ $labels.job }}) has failed for ' +
        `${humanDuration(config.targetDown.for)}: the instance is down or unreachable, and its ` +
        'conversations are unobserved.',
    }),
    alertRule(config, {
      alert: 'OrchestratorJobDown',
      // Every target of the job fails, or discovery finds none at all (absent() carries the
      // selector's equality matchers, `job` among them, so the inhibition can match it).
      expr: [`sum by (job) (up{${S}}) == 0`, 'or', `absent(up{${S}})`, ''].join('\n'),
      for: config.jobDown.for,
      severity: 'critical',
      summary: 'No instance of the conversation service can be scraped.',
      description:
        'Prometheus has scraped no instance of job {{ $labels.job }} for ' +
        `${humanDuration(config.jobDown.for)}: every instance is down or unreachable, or service ` +
        "discovery finds none. The job's other alerts are inhibited meanwhile.",
    }),
  ];

  return {
    groups: [
      { name: 'orchestrator.recording', rules: recording },
      // One group: rules of a group run in order at each evaluation, so the alerts read the
      // ratios recorded at the same instant (across groups they may read the previous ones).
      { name: 'orchestrator.slo', rules: [...sloRecordingRules(config), ...sloAlerts(config)] },
      {
        name: 'orchestrator.usage',
        rules: [...usageRecordingRules(config), ...usageAlerts(config)],
      },
      { name: 'orchestrator.alerts', rules: [...alerts, ...endingAlerts(config)] },
      { name: 'orchestrator.durable', rules: durableAlerts(config) },
    ],
  };
}
