/**
 * Conversation orchestrator / Overview: how many conversations end, how, how fast they converge,
 * and the alerts. Metric names come from the plugin's semconv constants, so a rename cannot leave
 * a panel behind.
 */
import type { Dashboard } from '@grafana/grafana-foundation-sdk/dashboard';
import {
  PanelBuilder as HeatmapPanel,
  YAxisConfigBuilder,
} from '@grafana/grafana-foundation-sdk/heatmap';
import { PanelBuilder as TablePanel } from '@grafana/grafana-foundation-sdk/table';
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
import {
  build,
  DATASOURCE,
  dashboard,
  groupLabelMatchers,
  heatmapColor,
  labelVariable,
  PromQueryFormat,
  query,
  RATE,
  selector,
  stat,
  timeseries,
  UNIT,
} from './common.ts';
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
    `histogram_quantile(${q}, sum by (le) (rate(${METRIC_CONVERSATION_DURATION}_bucket{${OI},reason="converged"}[${RATE}])))`;
  return build(
    dashboard(OVERVIEW_UID, 'Conversation orchestrator / Overview', [
      labelVariable('orchestrator', `${METRIC_CONVERSATIONS_STARTED}{${config.selector}}`),
      labelVariable('instance', `${METRIC_CONVERSATIONS_STARTED}{${O}}`),
    ])
      .withPanel(
        stat(
          'Conversations ended / s',
          UNIT.conversationsPerSecond,
          `sum(rate(${ended}[${RATE}]))`,
        ),
      )
      .withPanel(
        stat(
          'Share converged',
          UNIT.ratio,
          `sum(rate(${converged}[${RATE}])) / sum(rate(${ended}[${RATE}]))`,
        )
          .min(0)
          .max(1),
      )
      .withPanel(
        stat('In progress', UNIT.conversations, `sum(${METRIC_CONVERSATIONS_IN_PROGRESS}{${OI}})`),
      )
      .withPanel(
        stat(
          'Listener errors / s',
          UNIT.errorsPerSecond,
          `sum(rate(${METRIC_LISTENER_ERRORS}{${OI}}[${RATE}]))`,
        ),
      )
      .withPanel(
        timeseries(
          'Conversations ended per second by reason',
          UNIT.conversationsPerSecond,
          12,
        ).withTarget(query(`sum by (reason) (rate(${ended}[${RATE}]))`, { legend: '{{reason}}' })),
      )
      .withPanel(
        timeseries('Time to converge (p50 / p95 / p99)', UNIT.seconds, 12)
          .description(
            'Elapsed time of conversations that converged. Exemplars link to the trace in Jaeger.',
          )
          .withTarget(query(quantile('0.5'), { legend: 'p50' }))
          .withTarget(query(quantile('0.95'), { legend: 'p95', exemplar: true, refId: 'B' }))
          .withTarget(query(quantile('0.99'), { legend: 'p99', refId: 'C' })),
      )
      .withPanel(
        new HeatmapPanel()
          .datasource(DATASOURCE)
          .title('Dispatches per conversation')
          .description('Distribution of the dispatches a conversation took, all reasons.')
          .unit(UNIT.dispatches)
          .span(12)
          .height(8)
          .calculate(false)
          .cellGap(1)
          .yAxis(new YAxisConfigBuilder().unit(UNIT.dispatches))
          .color(heatmapColor())
          .withTarget(
            query(
              `sum by (le) (increase(${METRIC_CONVERSATION_DISPATCHES}_bucket{${OI}}[${RATE}]))`,
              {
                legend: '{{le}}',
                format: PromQueryFormat.Heatmap,
              },
            ),
          ),
      )
      .withPanel(
        timeseries('Share converged by orchestrator', UNIT.ratio, 12)
          .description(
            'Conversations that converged, as a share of those that ended, over the selected instances.',
          )
          .min(0)
          .max(1)
          .withTarget(
            query(
              `sum by (orchestrator) (rate(${converged}[${RATE}])) / sum by (orchestrator) (rate(${ended}[${RATE}]))`,
              { legend: '{{orchestrator}}' },
            ),
          ),
      )
      .withPanel(
        timeseries('In progress by orchestrator', UNIT.conversations, 8).withTarget(
          query(`sum by (orchestrator) (${METRIC_CONVERSATIONS_IN_PROGRESS}{${OI}})`, {
            legend: '{{orchestrator}}',
          }),
        ),
      )
      .withPanel(
        timeseries('Dispatches per second by orchestrator', UNIT.dispatchesPerSecond, 8).withTarget(
          query(`sum by (orchestrator) (rate(${METRIC_DISPATCHES}{${OI}}[${RATE}]))`, {
            legend: '{{orchestrator}}',
          }),
        ),
      )
      .withPanel(
        timeseries('Listener errors per second', UNIT.errorsPerSecond, 8).withTarget(
          query(`sum by (orchestrator) (rate(${METRIC_LISTENER_ERRORS}{${OI}}[${RATE}]))`, {
            legend: '{{orchestrator}}',
          }),
        ),
      )
      .withPanel(
        timeseries('Tail sampler decisions per second by rule', UNIT.decisionsPerSecond, 12)
          .description(
            'What the conversation sampler (createConversationSampler) decided at each conversation end: keep or drop, and the rule that decided. It sees every conversation of its process, so it follows the instance variable only.',
          )
          .withTarget(
            query(`sum by (decision, rule) (rate(${METRIC_SAMPLER_DECISIONS}{${I}}[${RATE}]))`, {
              legend: '{{decision}} / {{rule}}',
            }),
          ),
      )
      .withPanel(
        timeseries('Dispatch deadlines per second by responder', UNIT.errorsPerSecond, 12)
          .description(
            'Responders that ran past dispatchTimeoutMs (the conversation fails with reason deadline): which responder hits the deadline.',
          )
          .withTarget(
            query(
              `sum by (orchestrator, responder) (rate(${METRIC_RESPONDER_DEADLINES}{${OI}}[${RATE}]))`,
              { legend: '{{orchestrator}} / {{responder}}' },
            ),
          ),
      )
      .withPanel(
        new TablePanel()
          .datasource(DATASOURCE)
          .title('Orchestrator alerts')
          .description('Alerts of the orchestrator rules, pending or firing.')
          .span(24)
          .height(6)
          .showHeader(true)
          .withTarget(
            // Alerts carry the group labels (the selector's matchers on them apply) and, where they
            // have them, `orchestrator` and `instance`: an alert of the whole job (no
            // orchestrator, no instance) shows whatever is selected.
            query(`ALERTS{${alertSelector(config)}}`, {
              instant: true,
              format: PromQueryFormat.Table,
            }),
          ),
      ),
  );
}
