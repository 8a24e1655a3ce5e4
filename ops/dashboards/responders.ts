/** Conversation orchestrator / Responders: dispatch rate, latency and errors per responder. */
import type { Dashboard } from '@grafana/grafana-foundation-sdk/dashboard';
import {
  METRIC_DISPATCH_DURATION,
  METRIC_DISPATCHES,
  METRIC_RESPONDER_ERRORS,
} from '../../src/observability/semconv.ts';
import type { OpsConfig } from '../config-types.ts';
import { build, dashboard, heatmap, labelVariable, series, table, UNIT } from './common.ts';
import { histogramQuantile, RATE, selector } from './promql.ts';
import { RESPONDERS_UID } from './uids.ts';

export function respondersDashboard(config: OpsConfig): Dashboard {
  const O = selector(config, ['orchestrator']);
  const ORI = selector(config, ['orchestrator', 'responder', 'instance']);
  const latency = (q: string) =>
    histogramQuantile(q, METRIC_DISPATCH_DURATION, ORI, ['orchestrator', 'responder']);
  const legend = '{{orchestrator}} / {{responder}}';
  const perResponder = (expr: string) => `sum by (orchestrator, responder) (${expr})`;
  return build(
    dashboard(RESPONDERS_UID, 'Conversation orchestrator / Responders', [
      labelVariable('orchestrator', `${METRIC_DISPATCHES}{${config.selector}}`),
      labelVariable('responder', `${METRIC_DISPATCHES}{${O}}`),
      labelVariable('instance', `${METRIC_DISPATCHES}{${O}}`),
    ]),
    [
      series('Dispatch rate by responder', UNIT.dispatchesPerSecond, 12, [
        [perResponder(`rate(${METRIC_DISPATCHES}{${ORI}}[${RATE}])`), legend],
      ]),
      series(
        'Dispatch latency p95 by responder',
        UNIT.seconds,
        12,
        [[latency('0.95'), legend, { exemplar: true }]],
        'Exemplars link to the conversation trace in Jaeger.',
      ),
      series('Dispatch latency p50 by responder', UNIT.seconds, 12, [[latency('0.5'), legend]]),
      heatmap(
        'Dispatch latency distribution',
        UNIT.seconds,
        `sum by (le) (increase(${METRIC_DISPATCH_DURATION}_bucket{${ORI}}[${RATE}]))`,
      ),
      series('Responder errors per second', UNIT.errorsPerSecond, 12, [
        [perResponder(`rate(${METRIC_RESPONDER_ERRORS}{${ORI}}[${RATE}])`), legend],
      ]),
      table(
        'Dispatches in the last hour',
        12,
        8,
        perResponder(`increase(${METRIC_DISPATCHES}{${ORI}}[1h])`),
      ),
    ],
  );
}
