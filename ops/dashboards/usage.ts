/**
 * Conversation orchestrator / Usage: what the conversations spend. Tokens per second by responder
 * and model, tokens per conversation by how it ended, the share of tokens spent in conversations
 * that did not converge and, when the config has a price table, cost per hour.
 */
import type { Dashboard } from '@grafana/grafana-foundation-sdk/dashboard';
import { METRIC_CONVERSATIONS_STARTED } from '../../src/observability/semconv.ts';
import type { OpsConfig } from '../config-types.ts';
import { METRIC_CONVERSATION_TOKENS, METRIC_TOKENS, usageRecordNames } from '../usage.ts';
import { build, dashboard, described, labelVariable, quantiles, series, UNIT } from './common.ts';
import { histogramQuantile, RATE, selector } from './promql.ts';
import { USAGE_UID } from './uids.ts';

export function usageDashboard(config: OpsConfig): Dashboard {
  const O = selector(config, ['orchestrator']);
  const OI = selector(config, ['orchestrator', 'instance']);
  const tokens = `rate(${METRIC_TOKENS}{${OI}}[${RATE}])`;
  const spent = (matchers: string) =>
    `rate(${METRIC_CONVERSATION_TOKENS}_sum{${OI}${matchers}}[${RATE}])`;
  const unconverged = `,reason!~"${config.slos.convergence.goodReasons.join('|')}"`;
  const prices = config.prices;
  // The raw token rates of the selected instances, priced by the recorded price series.
  const cost = (by: string) =>
    `sum by (${by}) (${tokens} * on (model, type) group_left ${usageRecordNames(config).price}) * 3600`;
  const costUnit = prices === null ? '' : `suffix: ${prices.currency}/h`;
  // The panels that need the price table: none without one.
  const priced = <T>(panels: (p: NonNullable<typeof prices>) => T[]): T[] =>
    prices === null ? [] : panels(prices);
  return build(
    dashboard(USAGE_UID, 'Conversation orchestrator / Usage', [
      labelVariable('orchestrator', `${METRIC_CONVERSATIONS_STARTED}{${config.selector}}`),
      labelVariable('instance', `${METRIC_CONVERSATIONS_STARTED}{${O}}`),
    ]),
    [
      described(
        'Tokens / s',
        UNIT.tokensPerSecond,
        `sum(${tokens})`,
        'Input and output tokens every responder reported, failed and skipped invocations included.',
      ),
      described(
        'Share of tokens spent without converging',
        UNIT.ratio,
        `sum(${spent(unconverged)}) / sum(${spent('')})`,
        `Tokens of the conversations that ended with a reason other than ${config.slos.convergence.goodReasons.join(', ')} (aborted ones included: they spent without converging), as a share of the tokens of every conversation that ended.`,
      )
        .min(0)
        .max(1),
      described(
        'Tokens per conversation (p95)',
        UNIT.tokens,
        histogramQuantile('0.95', METRIC_CONVERSATION_TOKENS, OI),
        `OrchestratorRunawayConversations fires above ${config.runawayConversations.p95Tokens} for ${config.runawayConversations.for}.`,
      ),
      ...priced((p) => [
        described(
          'Cost / h',
          costUnit,
          cost('currency'),
          `Token rates times the price table of the ops config (${p.currency} per million tokens, per model and type). Models without a price cost nothing here: see the unpriced tokens panel.`,
        ),
      ]),
      series('Tokens per second by responder and model', UNIT.tokensPerSecond, 12, [
        [
          `sum by (orchestrator, responder, model) (${tokens})`,
          '{{orchestrator}} / {{responder}} / {{model}}',
        ],
      ]),
      series('Tokens per second by orchestrator and type', UNIT.tokensPerSecond, 12, [
        [`sum by (orchestrator, type) (${tokens})`, '{{orchestrator}} {{type}}'],
      ]),
      series(
        'Tokens per conversation (p50 / p95) by reason',
        UNIT.tokens,
        12,
        quantiles(
          ['0.5', '0.95'],
          (q) => histogramQuantile(q, METRIC_CONVERSATION_TOKENS, OI, ['reason']),
          '{{reason}}',
        ),
        'Tokens a conversation spent in all, by the reason it ended with.',
      ),
      series('Share of tokens spent without converging by orchestrator', UNIT.ratio, 12, [
        [
          `sum by (orchestrator) (${spent(unconverged)}) / sum by (orchestrator) (${spent('')})`,
          '{{orchestrator}}',
        ],
      ])
        .min(0)
        .max(1),
      ...priced(() => [
        series('Cost per hour by responder', costUnit, 12, [
          [cost('orchestrator, responder'), '{{orchestrator}} / {{responder}}'],
        ]),
        series(
          'Tokens per second of models without a price',
          UNIT.tokensPerSecond,
          12,
          [
            [
              `sum by (orchestrator, model) (${tokens} unless on (model, type) ${usageRecordNames(config).price})`,
              '{{orchestrator}} / {{model}}',
            ],
          ],
          'Tokens of models the price table does not list: add them to `prices`.',
        ),
      ]),
    ],
  );
}
