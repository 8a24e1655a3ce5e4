/**
 * Conversation orchestrator / Usage: what the conversations spend. Tokens per second by responder
 * and model, tokens per conversation by how it ended, the share of tokens spent in conversations
 * that did not converge and, when the config has a price table, cost per hour.
 */
import type { Dashboard } from '@grafana/grafana-foundation-sdk/dashboard';
import { METRIC_CONVERSATIONS_STARTED } from '../../src/observability/semconv.ts';
import type { OpsConfig } from '../config-types.ts';
import { METRIC_CONVERSATION_TOKENS, METRIC_TOKENS, usageRecordNames } from '../usage.ts';
import {
  build,
  dashboard,
  described,
  labelVariable,
  query,
  RATE,
  selector,
  timeseries,
  UNIT,
} from './common.ts';
import { USAGE_UID } from './uids.ts';

export function usageDashboard(config: OpsConfig): Dashboard {
  const O = selector(config, ['orchestrator']);
  const OI = selector(config, ['orchestrator', 'instance']);
  const tokens = `rate(${METRIC_TOKENS}{${OI}}[${RATE}])`;
  const spent = (matchers: string) =>
    `rate(${METRIC_CONVERSATION_TOKENS}_sum{${OI}${matchers}}[${RATE}])`;
  const unconverged = `,reason!~"${config.slos.convergence.goodReasons.join('|')}"`;
  const quantile = (q: string) =>
    `histogram_quantile(${q}, sum by (reason, le) (rate(${METRIC_CONVERSATION_TOKENS}_bucket{${OI}}[${RATE}])))`;
  const prices = config.prices;
  // The raw token rates of the selected instances, priced by the recorded price series.
  const cost = (by: string) =>
    `sum by (${by}) (${tokens} * on (model, type) group_left ${usageRecordNames(config).price}) * 3600`;
  const costUnit = prices === null ? '' : `suffix: ${prices.currency}/h`;
  const builder = dashboard(USAGE_UID, 'Conversation orchestrator / Usage', [
    labelVariable('orchestrator', `${METRIC_CONVERSATIONS_STARTED}{${config.selector}}`),
    labelVariable('instance', `${METRIC_CONVERSATIONS_STARTED}{${O}}`),
  ])
    .withPanel(
      described(
        'Tokens / s',
        UNIT.tokensPerSecond,
        `sum(${tokens})`,
        'Input and output tokens every responder reported, failed and skipped invocations included.',
      ),
    )
    .withPanel(
      described(
        'Share of tokens spent without converging',
        UNIT.ratio,
        `sum(${spent(unconverged)}) / sum(${spent('')})`,
        `Tokens of the conversations that ended with a reason other than ${config.slos.convergence.goodReasons.join(', ')} (aborted ones included: they spent without converging), as a share of the tokens of every conversation that ended.`,
      )
        .min(0)
        .max(1),
    )
    .withPanel(
      described(
        'Tokens per conversation (p95)',
        UNIT.tokens,
        `histogram_quantile(0.95, sum by (le) (rate(${METRIC_CONVERSATION_TOKENS}_bucket{${OI}}[${RATE}])))`,
        `OrchestratorRunawayConversations fires above ${config.runawayConversations.p95Tokens} for ${config.runawayConversations.for}.`,
      ),
    );
  if (prices !== null) {
    builder.withPanel(
      described(
        'Cost / h',
        costUnit,
        cost('currency'),
        `Token rates times the price table of the ops config (${prices.currency} per million tokens, per model and type). Models without a price cost nothing here: see the unpriced tokens panel.`,
      ),
    );
  }
  builder
    .withPanel(
      timeseries('Tokens per second by responder and model', UNIT.tokensPerSecond, 12).withTarget(
        query(`sum by (orchestrator, responder, model) (${tokens})`, {
          legend: '{{orchestrator}} / {{responder}} / {{model}}',
        }),
      ),
    )
    .withPanel(
      timeseries('Tokens per second by orchestrator and type', UNIT.tokensPerSecond, 12).withTarget(
        query(`sum by (orchestrator, type) (${tokens})`, { legend: '{{orchestrator}} {{type}}' }),
      ),
    )
    .withPanel(
      timeseries('Tokens per conversation (p50 / p95) by reason', UNIT.tokens, 12)
        .description('Tokens a conversation spent in all, by the reason it ended with.')
        .withTarget(query(quantile('0.5'), { legend: 'p50 {{reason}}' }))
        .withTarget(query(quantile('0.95'), { legend: 'p95 {{reason}}', refId: 'B' })),
    )
    .withPanel(
      timeseries('Share of tokens spent without converging by orchestrator', UNIT.ratio, 12)
        .min(0)
        .max(1)
        .withTarget(
          query(
            `sum by (orchestrator) (${spent(unconverged)}) / sum by (orchestrator) (${spent('')})`,
            { legend: '{{orchestrator}}' },
          ),
        ),
    );
  if (prices !== null) {
    builder
      .withPanel(
        timeseries('Cost per hour by responder', costUnit, 12).withTarget(
          query(cost('orchestrator, responder'), { legend: '{{orchestrator}} / {{responder}}' }),
        ),
      )
      .withPanel(
        timeseries('Tokens per second of models without a price', UNIT.tokensPerSecond, 12)
          .description('Tokens of models the price table does not list: add them to `prices`.')
          .withTarget(
            query(
              `sum by (orchestrator, model) (${tokens} unless on (model, type) ${usageRecordNames(config).price})`,
              { legend: '{{orchestrator}} / {{model}}' },
            ),
          ),
      );
  }
  return build(builder);
}
