/**
 * Alerts on how conversations end that the SLOs cannot see. The convergence SLO leaves out its
 * `excludedReasons` (a caller's abort is not the system's failure), so 100% of conversations
 * aborted for hours is no event of any SLO; and a conversation that never ends is no event at
 * all, so half of them wedged while the rest dispatch passes both the SLOs and the stalled
 * alert (which needs no dispatch at all). These two close those holes.
 */
import {
  METRIC_CONVERSATIONS_ENDED,
  METRIC_CONVERSATIONS_IN_PROGRESS,
  METRIC_CONVERSATIONS_STARTED,
} from '../src/observability/semconv.ts';
import type { OpsConfig } from './config-types.ts';
import { byOrchestrator, humanDuration, percent } from './names.ts';
import { type AlertingRule, alertRule } from './rule-model.ts';

export function endingAlerts(config: OpsConfig): AlertingRule[] {
  const S = config.selector;
  const O = byOrchestrator(config).join(', ');
  const OI = [...byOrchestrator(config), 'instance'].join(', ');
  const { excludedEndings: excluded, wedgedConversations: wedged } = config;
  const reasons = config.slos.convergence.excludedReasons;
  const alerts: AlertingRule[] = [];
  // With no excluded reason every ending is an event of the convergence SLO: nothing to add.
  if (reasons.length > 0) {
    const ended = (matchers: string) =>
      `sum by (${O}) (rate(${METRIC_CONVERSATIONS_ENDED}{${S}${matchers}}[${excluded.window}]))`;
    alerts.push(
      alertRule(config, {
        alert: 'OrchestratorExcludedEndings',
        expr: [
          ended(`,reason=~"${reasons.join('|')}"`),
          '/',
          ended(''),
          `  > ${excluded.share} # excludedEndings.share of the conversations ended over excludedEndings.window`,
          `and on (${O})`,
          ended(''),
          `  > ${config.minTraffic} # minTraffic: conversations ended per second`,
          '',
        ].join('\n'),
        for: excluded.for,
        severity: 'critical',
        summary: 'Most conversations end with a reason the SLOs do not count.',
        description:
          `{{ $value | humanizePercentage }} of the conversations of orchestrator {{ $labels.orchestrator }} that ended over the last ${humanDuration(excluded.window)} ` +
          `ended ${reasons.map((r) => `\`${r}\``).join(' or ')} (threshold ${percent(excluded.share)}): ` +
          'the convergence SLO leaves these out, so its alerts cannot see them.',
      }),
    );
  }
  alerts.push(
    alertRule(config, {
      alert: 'OrchestratorWedgedConversations',
      // Per instance, like the stalled alert: a conversation lives in one process. The gauge's
      // growth against the starts: steady traffic holds it near 0, a share that never ends holds
      // it at that share (a burst of starts ramps it up once, then back down).
      expr: [
        `sum by (${OI}) (delta(${METRIC_CONVERSATIONS_IN_PROGRESS}{${S}}[${wedged.window}]))`,
        '/',
        `sum by (${OI}) (increase(${METRIC_CONVERSATIONS_STARTED}{${S}}[${wedged.window}]))`,
        `  > ${wedged.share} # wedgedConversations.share: growth of in_progress per conversation started`,
        `and on (${OI})`,
        `sum by (${OI}) (rate(${METRIC_CONVERSATIONS_STARTED}{${S}}[${wedged.window}]))`,
        `  > ${config.minTraffic} # minTraffic: conversations started per second`,
        '',
      ].join('\n'),
      for: wedged.for,
      severity: 'critical',
      summary: 'Conversations start but a share of them never end.',
      description:
        'On {{ $labels.instance }}, conversations in progress of orchestrator {{ $labels.orchestrator }} ' +
        `grew by {{ $value | humanizePercentage }} of the conversations started over the last ${humanDuration(wedged.window)} ` +
        `(threshold ${percent(wedged.share)}): they start and do not end, while others may still dispatch.`,
    }),
  );
  return alerts;
}
