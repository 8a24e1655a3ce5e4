/** Conversation orchestrator / Responders: dispatch rate, latency and errors per responder. */
import type { Dashboard } from '@grafana/grafana-foundation-sdk/dashboard';
import {
  PanelBuilder as HeatmapPanel,
  YAxisConfigBuilder,
} from '@grafana/grafana-foundation-sdk/heatmap';
import { PanelBuilder as TablePanel } from '@grafana/grafana-foundation-sdk/table';
import {
  METRIC_DISPATCH_DURATION,
  METRIC_DISPATCHES,
  METRIC_RESPONDER_ERRORS,
} from '../../src/observability/semconv.ts';
import type { OpsConfig } from '../config-types.ts';
import {
  build,
  DATASOURCE,
  dashboard,
  heatmapColor,
  labelVariable,
  PromQueryFormat,
  query,
  RATE,
  selector,
  timeseries,
  UNIT,
} from './common.ts';
import { RESPONDERS_UID } from './uids.ts';

export function respondersDashboard(config: OpsConfig): Dashboard {
  const O = selector(config, ['orchestrator']);
  const ORI = selector(config, ['orchestrator', 'responder', 'instance']);
  const latency = (q: string) =>
    `histogram_quantile(${q}, sum by (orchestrator, responder, le) (rate(${METRIC_DISPATCH_DURATION}_bucket{${ORI}}[${RATE}])))`;
  const legend = '{{orchestrator}} / {{responder}}';
  return build(
    dashboard(RESPONDERS_UID, 'Conversation orchestrator / Responders', [
      labelVariable('orchestrator', `${METRIC_DISPATCHES}{${config.selector}}`),
      labelVariable('responder', `${METRIC_DISPATCHES}{${O}}`),
      labelVariable('instance', `${METRIC_DISPATCHES}{${O}}`),
    ])
      .withPanel(
        timeseries('Dispatch rate by responder', UNIT.dispatchesPerSecond, 12).withTarget(
          query(`sum by (orchestrator, responder) (rate(${METRIC_DISPATCHES}{${ORI}}[${RATE}]))`, {
            legend,
          }),
        ),
      )
      .withPanel(
        timeseries('Dispatch latency p95 by responder', UNIT.seconds, 12)
          .description('Exemplars link to the conversation trace in Jaeger.')
          .withTarget(query(latency('0.95'), { legend, exemplar: true })),
      )
      .withPanel(
        timeseries('Dispatch latency p50 by responder', UNIT.seconds, 12).withTarget(
          query(latency('0.5'), { legend }),
        ),
      )
      .withPanel(
        new HeatmapPanel()
          .datasource(DATASOURCE)
          .title('Dispatch latency distribution')
          .unit(UNIT.seconds)
          .span(12)
          .height(8)
          .calculate(false)
          .cellGap(1)
          .yAxis(new YAxisConfigBuilder().unit(UNIT.seconds))
          .color(heatmapColor())
          .withTarget(
            query(`sum by (le) (increase(${METRIC_DISPATCH_DURATION}_bucket{${ORI}}[${RATE}]))`, {
              legend: '{{le}}',
              format: PromQueryFormat.Heatmap,
            }),
          ),
      )
      .withPanel(
        timeseries('Responder errors per second', UNIT.errorsPerSecond, 12).withTarget(
          query(
            `sum by (orchestrator, responder) (rate(${METRIC_RESPONDER_ERRORS}{${ORI}}[${RATE}]))`,
            { legend },
          ),
        ),
      )
      .withPanel(
        new TablePanel()
          .datasource(DATASOURCE)
          .title('Dispatches in the last hour')
          .span(12)
          .height(8)
          .showHeader(true)
          .withTarget(
            query(`sum by (orchestrator, responder) (increase(${METRIC_DISPATCHES}{${ORI}}[1h]))`, {
              instant: true,
              format: PromQueryFormat.Table,
            }),
          ),
      ),
  );
}
