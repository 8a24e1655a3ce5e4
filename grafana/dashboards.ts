/**
 * The Grafana dashboards, as code. `npm run dashboards` writes grafana/dashboards/*.json; a test
 * regenerates them and fails when the committed JSON differs. Metric names come from the plugin's
 * semconv constants, so a rename cannot leave a dashboard behind.
 */
import {
  METRIC_CONVERSATION_DISPATCHES,
  METRIC_CONVERSATION_DURATION,
  METRIC_CONVERSATIONS_ENDED,
  METRIC_CONVERSATIONS_IN_PROGRESS,
  METRIC_CONVERSATIONS_STARTED,
  METRIC_DISPATCH_DURATION,
  METRIC_DISPATCHES,
  METRIC_LISTENER_ERRORS,
  METRIC_RESPONDER_ERRORS,
} from '../src/observability/semconv.ts';

// A Grafana variable reference, not a JavaScript template.
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana interpolates it.
const DS = { type: 'prometheus', uid: '${datasource}' } as const;

interface Target {
  readonly expr: string;
  readonly legendFormat?: string;
  readonly exemplar?: boolean;
  readonly instant?: boolean;
  readonly format?: 'time_series' | 'heatmap' | 'table';
}

interface PanelSpec {
  readonly title: string;
  readonly type: 'stat' | 'timeseries' | 'heatmap' | 'table';
  readonly targets: readonly Target[];
  readonly unit?: string;
  readonly w: number;
  readonly h: number;
  readonly description?: string;
  readonly min?: number;
  readonly max?: number;
}

function panels(specs: readonly PanelSpec[]): unknown[] {
  let x = 0;
  let y = 0;
  let rowHeight = 0;
  return specs.map((spec, i) => {
    if (x + spec.w > 24) {
      x = 0;
      y += rowHeight;
      rowHeight = 0;
    }
    const gridPos = { h: spec.h, w: spec.w, x, y };
    x += spec.w;
    rowHeight = Math.max(rowHeight, spec.h);
    const defaults: Record<string, unknown> = {};
    if (spec.unit !== undefined) defaults.unit = spec.unit;
    if (spec.min !== undefined) defaults.min = spec.min;
    if (spec.max !== undefined) defaults.max = spec.max;
    return {
      id: i + 1,
      type: spec.type,
      title: spec.title,
      ...(spec.description ? { description: spec.description } : {}),
      datasource: DS,
      gridPos,
      fieldConfig: { defaults, overrides: [] },
      options:
        spec.type === 'heatmap'
          ? {
              calculate: false,
              yAxis: { unit: spec.unit ?? 'short' },
              cellGap: 1,
              color: { scheme: 'Oranges', mode: 'scheme' },
            }
          : spec.type === 'stat'
            ? {
                reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false },
                colorMode: 'value',
                graphMode: 'area',
              }
            : spec.type === 'table'
              ? { showHeader: true }
              : {
                  legend: { displayMode: 'list', placement: 'bottom', showLegend: true },
                  tooltip: { mode: 'multi', sort: 'desc' },
                },
      targets: spec.targets.map((t, k) => ({
        refId: String.fromCharCode(65 + k),
        datasource: DS,
        expr: t.expr,
        ...(t.legendFormat ? { legendFormat: t.legendFormat } : {}),
        ...(t.exemplar ? { exemplar: true } : {}),
        ...(t.instant ? { instant: true, range: false } : { range: true }),
        ...(t.format ? { format: t.format } : {}),
      })),
    };
  });
}

function variable(name: string, label: string, query: string): unknown {
  return {
    name,
    label,
    type: 'query',
    datasource: DS,
    query: { query, refId: `${name}-query` },
    definition: query,
    refresh: 2,
    multi: true,
    includeAll: true,
    allValue: '.*',
    current: { selected: true, text: ['All'], value: ['$__all'] },
    sort: 1,
  };
}

const DATASOURCE_VARIABLE = {
  name: 'datasource',
  label: 'Data source',
  type: 'datasource',
  query: 'prometheus',
  current: { selected: true, text: 'Prometheus', value: 'prometheus' },
};

function dashboard(
  uid: string,
  title: string,
  templating: unknown[],
  body: unknown[],
  links: unknown[],
): unknown {
  return {
    uid,
    title,
    tags: ['conversation-orchestrator'],
    timezone: 'browser',
    schemaVersion: 39,
    version: 1,
    editable: true,
    graphTooltip: 1,
    refresh: '10s',
    time: { from: 'now-30m', to: 'now' },
    templating: { list: [DATASOURCE_VARIABLE, ...templating] },
    annotations: { list: [] },
    links,
    panels: body,
  };
}

const O = 'orchestrator=~"$orchestrator"';
const OI = `${O},instance=~"$instance"`;
const ORI = `${O},responder=~"$responder",instance=~"$instance"`;
const RATE = '$__rate_interval';

export function overviewDashboard(): unknown {
  const ended = `${METRIC_CONVERSATIONS_ENDED}{${OI}}`;
  const quantile = (q: string) =>
    `histogram_quantile(${q}, sum by (le) (rate(${METRIC_CONVERSATION_DURATION}_bucket{reason="converged",${OI}}[${RATE}])))`;
  return dashboard(
    'orchestrator-overview',
    'Conversation orchestrator / Overview',
    [
      variable(
        'orchestrator',
        'Orchestrator',
        `label_values(${METRIC_CONVERSATIONS_STARTED}, orchestrator)`,
      ),
      variable(
        'instance',
        'Instance',
        `label_values(${METRIC_CONVERSATIONS_STARTED}{${O}}, instance)`,
      ),
    ],
    panels([
      {
        title: 'Conversations ended / s',
        type: 'stat',
        unit: 'reqps',
        w: 6,
        h: 4,
        targets: [{ expr: `sum(rate(${ended}[${RATE}]))` }],
      },
      {
        title: 'Share converged',
        type: 'stat',
        unit: 'percentunit',
        w: 6,
        h: 4,
        min: 0,
        max: 1,
        targets: [
          {
            expr: `sum(rate(${METRIC_CONVERSATIONS_ENDED}{reason="converged",${OI}}[${RATE}])) / sum(rate(${ended}[${RATE}]))`,
          },
        ],
      },
      {
        title: 'In progress',
        type: 'stat',
        unit: 'short',
        w: 6,
        h: 4,
        targets: [{ expr: `sum(${METRIC_CONVERSATIONS_IN_PROGRESS}{${OI}})` }],
      },
      {
        title: 'Listener errors / s',
        type: 'stat',
        unit: 'short',
        w: 6,
        h: 4,
        targets: [{ expr: `sum(rate(${METRIC_LISTENER_ERRORS}{${OI}}[${RATE}]))` }],
      },
      {
        title: 'Conversations ended per second by reason',
        type: 'timeseries',
        unit: 'reqps',
        w: 12,
        h: 8,
        targets: [
          { expr: `sum by (reason) (rate(${ended}[${RATE}]))`, legendFormat: '{{reason}}' },
        ],
      },
      {
        title: 'Time to converge (p50 / p95 / p99)',
        description:
          'Elapsed time of conversations that converged. Exemplars link to the trace in Jaeger.',
        type: 'timeseries',
        unit: 's',
        w: 12,
        h: 8,
        targets: [
          { expr: quantile('0.5'), legendFormat: 'p50' },
          { expr: quantile('0.95'), legendFormat: 'p95', exemplar: true },
          { expr: quantile('0.99'), legendFormat: 'p99' },
        ],
      },
      {
        title: 'Dispatches per conversation',
        description: 'Distribution of the dispatches a conversation took, all reasons.',
        type: 'heatmap',
        unit: 'short',
        w: 12,
        h: 8,
        targets: [
          {
            expr: `sum by (le) (increase(${METRIC_CONVERSATION_DISPATCHES}_bucket{${OI}}[${RATE}]))`,
            legendFormat: '{{le}}',
            format: 'heatmap',
          },
        ],
      },
      {
        title: 'Share converged by orchestrator',
        description:
          'Recording rule orchestrator:orchestrator_conversations_converged:ratio_rate5m.',
        type: 'timeseries',
        unit: 'percentunit',
        w: 12,
        h: 8,
        min: 0,
        max: 1,
        targets: [
          {
            expr: `orchestrator:orchestrator_conversations_converged:ratio_rate5m{${O}}`,
            legendFormat: '{{orchestrator}}',
          },
        ],
      },
      {
        title: 'In progress by orchestrator',
        type: 'timeseries',
        unit: 'short',
        w: 8,
        h: 8,
        targets: [
          {
            expr: `sum by (orchestrator) (${METRIC_CONVERSATIONS_IN_PROGRESS}{${OI}})`,
            legendFormat: '{{orchestrator}}',
          },
        ],
      },
      {
        title: 'Dispatches per second by orchestrator',
        type: 'timeseries',
        unit: 'ops',
        w: 8,
        h: 8,
        targets: [
          {
            expr: `sum by (orchestrator) (rate(${METRIC_DISPATCHES}{${OI}}[${RATE}]))`,
            legendFormat: '{{orchestrator}}',
          },
        ],
      },
      {
        title: 'Listener errors per second',
        type: 'timeseries',
        unit: 'short',
        w: 8,
        h: 8,
        targets: [
          {
            expr: `sum by (orchestrator) (rate(${METRIC_LISTENER_ERRORS}{${OI}}[${RATE}]))`,
            legendFormat: '{{orchestrator}}',
          },
        ],
      },
      {
        title: 'Orchestrator alerts',
        description: 'Alerts of prometheus/rules/orchestrator.rules.yml, pending or firing.',
        type: 'table',
        w: 24,
        h: 6,
        targets: [
          {
            expr: 'ALERTS{alertname=~"Orchestrator.*"}',
            instant: true,
            format: 'table',
          },
        ],
      },
    ]),
    [
      {
        title: 'Responders',
        type: 'link',
        url: '/d/orchestrator-responders',
        keepTime: true,
        includeVars: true,
      },
    ],
  );
}

export function respondersDashboard(): unknown {
  const latency = (q: string) =>
    `histogram_quantile(${q}, sum by (orchestrator, responder, le) (rate(${METRIC_DISPATCH_DURATION}_bucket{${ORI}}[${RATE}])))`;
  return dashboard(
    'orchestrator-responders',
    'Conversation orchestrator / Responders',
    [
      variable('orchestrator', 'Orchestrator', `label_values(${METRIC_DISPATCHES}, orchestrator)`),
      variable('responder', 'Responder', `label_values(${METRIC_DISPATCHES}{${O}}, responder)`),
      variable('instance', 'Instance', `label_values(${METRIC_DISPATCHES}{${O}}, instance)`),
    ],
    panels([
      {
        title: 'Dispatch rate by responder',
        type: 'timeseries',
        unit: 'ops',
        w: 12,
        h: 8,
        targets: [
          {
            expr: `sum by (orchestrator, responder) (rate(${METRIC_DISPATCHES}{${ORI}}[${RATE}]))`,
            legendFormat: '{{orchestrator}} / {{responder}}',
          },
        ],
      },
      {
        title: 'Dispatch latency p95 by responder',
        description: 'Exemplars link to the conversation trace in Jaeger.',
        type: 'timeseries',
        unit: 's',
        w: 12,
        h: 8,
        targets: [
          {
            expr: latency('0.95'),
            legendFormat: '{{orchestrator}} / {{responder}}',
            exemplar: true,
          },
        ],
      },
      {
        title: 'Dispatch latency p50 by responder',
        type: 'timeseries',
        unit: 's',
        w: 12,
        h: 8,
        targets: [{ expr: latency('0.5'), legendFormat: '{{orchestrator}} / {{responder}}' }],
      },
      {
        title: 'Dispatch latency distribution',
        type: 'heatmap',
        unit: 's',
        w: 12,
        h: 8,
        targets: [
          {
            expr: `sum by (le) (increase(${METRIC_DISPATCH_DURATION}_bucket{${ORI}}[${RATE}]))`,
            legendFormat: '{{le}}',
            format: 'heatmap',
          },
        ],
      },
      {
        title: 'Responder errors per second',
        type: 'timeseries',
        unit: 'short',
        w: 12,
        h: 8,
        targets: [
          {
            expr: `sum by (orchestrator, responder) (rate(${METRIC_RESPONDER_ERRORS}{${ORI}}[${RATE}]))`,
            legendFormat: '{{orchestrator}} / {{responder}}',
          },
        ],
      },
      {
        title: 'Dispatches in the last hour',
        type: 'table',
        w: 12,
        h: 8,
        targets: [
          {
            expr: `sum by (orchestrator, responder) (increase(${METRIC_DISPATCHES}{${ORI}}[1h]))`,
            instant: true,
            format: 'table',
          },
        ],
      },
    ]),
    [
      {
        title: 'Overview',
        type: 'link',
        url: '/d/orchestrator-overview',
        keepTime: true,
        includeVars: true,
      },
    ],
  );
}

export const DASHBOARDS: Readonly<Record<string, () => unknown>> = {
  'overview.json': overviewDashboard,
  'responders.json': respondersDashboard,
};

export function render(make: () => unknown): string {
  return `${JSON.stringify(make(), null, 2)}\n`;
}
