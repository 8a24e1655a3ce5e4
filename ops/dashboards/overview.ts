/**
 * Conversation orchestrator / Overview: how many conversations end, how, how fast they converge,
 * and the alerts. Metric names come from the plugin's semconv constants, so a rename cannot leave
 * a panel behind.
 */
import type { Dashboard } from '@grafana/grafana-foundation-sdk/dashboard';
import {
  METRIC_CONVERSATION_DISPATCHES,
  METRIC_CONVERSATION_DURATION,
  METRIC_CONVERSATIONS_ENDED,
  METRIC_CONVERSATIONS_IN_PROGRESS,
  METRIC_CONVERSATIONS_STARTED,
  METRIC_DISPATCHES,
  METRIC_LISTENER_ERRORS,
  METRIC_RESPONDER_DEADLINES,
  METRIC_SAMPLER_DECISIONS,
} from '../../src/observability/semconv.ts';
import type { OpsConfig } from '../config-types.ts';
import { build, dashboard, heatmap, labelVariable, series, stat, table, UNIT } from './common.ts';
import { groupLabelMatchers, histogramQuantile, RATE, selector } from './promql.ts';
import { OVERVIEW_UID } from './uids.ts';

function alertSelector(config: OpsConfig): string {
  const onGroupLabels = groupLabelMatchers(config);
  return [
    'alertname=~"Orchestrator.*"',
    ...onGroupLabels,
    'orchestrator=~"$orchestrator|"',
    'instance=~"$instance|"',
  ].join(',');
}

export function overviewDashboard(config: OpsConfig): Dashboard {
  const O = selector(config, ['orchestrator']);
  const OI = selector(config, ['orchestrator', 'instance']);
  const I = selector(config, ['instance']);
  const ended = `${METRIC_CONVERSATIONS_ENDED}{${OI}}`;
  const converged = `${METRIC_CONVERSATIONS_ENDED}{${OI},reason="converged"}`;
  const quantile = (q: string) =>
    histogramQuantile(q, METRIC_CONVERSATION_DURATION, `${OI},reason="converged"`);
  const perOrchestrator = (expr: string) => `sum by (orchestrator) (${expr})`;
  return build(
    dashboard(OVERVIEW_UID, 'Conversation orchestrator / Overview', [
      labelVariable('orchestrator', `${METRIC_CONVERSATIONS_STARTED}{${config.selector}}`),
      labelVariable('instance', `${METRIC_CONVERSATIONS_STARTED}{${O}}`),
    ]),
    [
      stat('Conversations ended / s', UNIT.conversationsPerSecond, `sum(rate(${ended}[${RATE}]))`),
      stat(
        'Share converged',
        UNIT.ratio,
        `sum(rate(${converged}[${RATE}])) / sum(rate(${ended}[${RATE}]))`,
      )
        .min(0)
        .max(1),
      stat('In progress', UNIT.conversations, `sum(${METRIC_CONVERSATIONS_IN_PROGRESS}{${OI}})`),
      stat(
        'Listener errors / s',
        UNIT.errorsPerSecond,
        `sum(rate(${METRIC_LISTENER_ERRORS}{${OI}}[${RATE}]))`,
      ),
      series('Conversations ended per second by reason', UNIT.conversationsPerSecond, 12, [
        [`sum by (reason) (rate(${ended}[${RATE}]))`, '{{reason}}'],
      ]),
      series(
        'Time to converge (p50 / p95 / p99)',
        UNIT.seconds,
        12,
        [
          [quantile('0.5'), 'p50'],
          [quantile('0.95'), 'p95', { exemplar: true }],
          [quantile('0.99'), 'p99'],
        ],
        'Elapsed time of conversations that converged. Exemplars link to the trace in Jaeger.',
      ),
      heatmap(
        'Dispatches per conversation',
        UNIT.dispatches,
        `sum by (le) (increase(${METRIC_CONVERSATION_DISPATCHES}_bucket{${OI}}[${RATE}]))`,
        'Distribution of the dispatches a conversation took, all reasons.',
      ),
      series(
        'Share converged by orchestrator',
        UNIT.ratio,
        12,
        [
          [
            `${perOrchestrator(`rate(${converged}[${RATE}])`)} / ${perOrchestrator(`rate(${ended}[${RATE}])`)}`,
            '{{orchestrator}}',
          ],
        ],
        'Conversations that converged, as a share of those that ended, over the selected instances.',
      )
        .min(0)
        .max(1),
      series('In progress by orchestrator', UNIT.conversations, 8, [
        [perOrchestrator(`${METRIC_CONVERSATIONS_IN_PROGRESS}{${OI}}`), '{{orchestrator}}'],
      ]),
      series('Dispatches per second by orchestrator', UNIT.dispatchesPerSecond, 8, [
        [perOrchestrator(`rate(${METRIC_DISPATCHES}{${OI}}[${RATE}])`), '{{orchestrator}}'],
      ]),
      series('Listener errors per second', UNIT.errorsPerSecond, 8, [
        [perOrchestrator(`rate(${METRIC_LISTENER_ERRORS}{${OI}}[${RATE}])`), '{{orchestrator}}'],
      ]),
      series(
        'Tail sampler decisions per second by rule',
        UNIT.decisionsPerSecond,
        12,
        [
          [
            `sum by (decision, rule) (rate(${METRIC_SAMPLER_DECISIONS}{${I}}[${RATE}]))`,
            '{{decision}} / {{rule}}',
          ],
        ],
        'What the conversation sampler (createConversationSampler) decided at each conversation end: keep or drop, and the rule that decided. It sees every conversation of its process, so it follows the instance variable only.',
      ),
      series(
        'Dispatch deadlines per second by responder',
        UNIT.errorsPerSecond,
        12,
        [
          [
            `sum by (orchestrator, responder) (rate(${METRIC_RESPONDER_DEADLINES}{${OI}}[${RATE}]))`,
            '{{orchestrator}} / {{responder}}',
          ],
        ],
        'Responders that ran past dispatchTimeoutMs (the conversation fails with reason deadline): which responder hits the deadline.',
      ),
      // Alerts carry the group labels (the selector's matchers on them apply) and, where they
      // have them, `orchestrator` and `instance`: an alert of the whole job (no orchestrator, no
      // instance) shows whatever is selected.
      table(
        'Orchestrator alerts',
        24,
        6,
        `ALERTS{${alertSelector(config)}}`,
        'Alerts of the orchestrator rules, pending or firing.',
      ),
    ],
  );
}
