/**
 * Tokens and cost as rules: token rates per orchestrator, tokens per conversation, the two usage
 * alerts, and, when the config has a price table, the price of each model's tokens as constant
 * series and the cost rates they give per orchestrator and responder. Prices live in Prometheus,
 * not in the app: changing one is a new rule file, not a deployment.
 */
import { METRIC_CONVERSATION_TOKENS, METRIC_TOKENS } from '../src/observability/semconv.ts';
import type { OpsConfig, PriceTable } from './config-types.ts';
import { byOrchestrator, byResponder, humanDuration, recordName } from './names.ts';
import { type AlertingRule, alertRule, type RecordingRule } from './rule-model.ts';

export { METRIC_CONVERSATION_TOKENS, METRIC_TOKENS };

/** The `type` label values of `orchestrator_tokens_total`, and the price table's key for each. */
export const TOKEN_TYPES = [
  ['input', 'inputPerMillion'],
  ['output', 'outputPerMillion'],
] as const;

export function usageRecordNames(config: OpsConfig) {
  const O = byOrchestrator(config);
  const R = byResponder(config);
  const W = config.rateWindow;
  return {
    tokens: recordName(O, 'orchestrator_tokens', `rate${W}`),
    conversationTokensQuantile: recordName(
      O,
      'orchestrator_conversation_tokens',
      `histogram_quantile_rate${W}`,
    ),
    ended: recordName(O, 'orchestrator_conversations_ended', `rate${W}`),
    price: recordName(['model', 'type'], 'orchestrator_token_price', 'per_token'),
    responderCost: recordName(R, 'orchestrator_cost', `rate${W}`),
    cost: recordName(O, 'orchestrator_cost', `rate${W}`),
    unpricedTokens: recordName(O, 'orchestrator_tokens_unpriced', `rate${W}`),
  } as const;
}

/** A price per token as PromQL, the way the table says it: `2.5 / 1e6`. */
function perToken(perMillion: number): string {
  return `${perMillion} / 1e6`;
}

function costRules(config: OpsConfig, prices: PriceTable): RecordingRule[] {
  const S = config.selector;
  const W = config.rateWindow;
  const O = byOrchestrator(config).join(', ');
  const R = byResponder(config).join(', ');
  const names = usageRecordNames(config);
  const priced = (by: string) =>
    [
      `sum by (${by}, currency) (`,
      `  rate(${METRIC_TOKENS}{${S}}[${W}])`,
      '  * on (model, type) group_left (currency)',
      `  ${names.price}`,
      ')',
      '',
    ].join('\n');
  return [
    ...Object.entries(prices.models).flatMap(([model, price]) =>
      TOKEN_TYPES.map(([type, key]) => ({
        record: names.price,
        expr: `vector(${perToken(price[key])}) # prices.models[${JSON.stringify(model)}].${key}\n`,
        labels: { model, type, currency: prices.currency },
      })),
    ),
    { record: names.responderCost, expr: priced(R) },
    { record: names.cost, expr: priced(O) },
    // Tokens of models the table has no price for: they cost nothing above, so say how many.
    {
      record: names.unpricedTokens,
      expr: [
        `sum by (${O}) (`,
        `  rate(${METRIC_TOKENS}{${S}}[${W}])`,
        `  unless on (model, type) ${names.price}`,
        ')',
        '',
      ].join('\n'),
    },
  ];
}

export function usageRecordingRules(config: OpsConfig): RecordingRule[] {
  const S = config.selector;
  const W = config.rateWindow;
  const O = byOrchestrator(config).join(', ');
  const names = usageRecordNames(config);
  return [
    { record: names.tokens, expr: `sum by (${O}) (rate(${METRIC_TOKENS}{${S}}[${W}]))` },
    {
      record: names.conversationTokensQuantile,
      expr: `histogram_quantile(0.95, sum by (${O}, le) (rate(${METRIC_CONVERSATION_TOKENS}_bucket{${S}}[${W}])))`,
      labels: { quantile: '0.95' },
    },
    ...(config.prices === null ? [] : costRules(config, config.prices)),
  ];
}

export function usageAlerts(config: OpsConfig): AlertingRule[] {
  const O = byOrchestrator(config).join(', ');
  const names = usageRecordNames(config);
  const over = humanDuration(config.rateWindow);
  const { tokenBurn, runawayConversations } = config;
  return [
    alertRule(config, {
      alert: 'OrchestratorTokenBurn',
      expr: [
        names.tokens,
        `  > ${tokenBurn.tokensPerSecond} # tokenBurn.tokensPerSecond: input and output tokens a second`,
        '',
      ].join('\n'),
      for: tokenBurn.for,
      severity: 'warning',
      summary: 'An orchestrator spends tokens faster than its budget allows.',
      description:
        'The responders of orchestrator {{ $labels.orchestrator }} spend {{ $value | humanize }} ' +
        `tokens a second (input and output) over the last ${over} (threshold ` +
        `${tokenBurn.tokensPerSecond} a second, for ${humanDuration(tokenBurn.for)}).`,
    }),
    alertRule(config, {
      alert: 'OrchestratorRunawayConversations',
      expr: [
        `${names.conversationTokensQuantile}{quantile="0.95"}`,
        `  > ${runawayConversations.p95Tokens} # runawayConversations.p95Tokens: tokens per conversation`,
        `and on (${O})`,
        names.ended,
        `  > ${config.minTraffic} # minTraffic: conversations ended per second`,
        '',
      ].join('\n'),
      for: runawayConversations.for,
      severity: 'warning',
      summary: 'Conversations spend far more tokens each than they should.',
      description:
        '95% of the conversations of orchestrator {{ $labels.orchestrator }} that ended over ' +
        `the last ${over} spent up to {{ $value | humanize }} tokens each (threshold ` +
        `${runawayConversations.p95Tokens}).`,
    }),
  ];
}
