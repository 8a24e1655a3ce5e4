import { readdirSync, readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { semconv } from '../../src/observability/index.ts';

export interface Rule {
  record?: string;
  alert?: string;
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export function ruleFiles(): string[] {
  return readdirSync('prometheus/rules')
    .filter((f) => f.endsWith('.yml'))
    .map((f) => `prometheus/rules/${f}`);
}

export function rules(): Rule[] {
  return ruleFiles().flatMap((file) =>
    (parse(readFileSync(file, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap(
      (g) => g.rules,
    ),
  );
}

export interface DashboardQuery {
  dashboard: string;
  panel: string;
  expr: string;
  instant: boolean;
}

export function dashboardFiles(dir = 'grafana/dashboards'): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .map((f) => `${dir}/${f}`);
}

export function dashboardQueries(dir = 'grafana/dashboards'): DashboardQuery[] {
  return dashboardFiles(dir).flatMap((file) => {
    const d = JSON.parse(readFileSync(file, 'utf8')) as {
      uid: string;
      panels: { title: string; targets: { expr: string; instant?: boolean }[] }[];
      templating: {
        list: { name: string; type: string; definition?: string; query?: { query?: string } }[];
      };
    };
    const panels = d.panels.flatMap((p) =>
      p.targets.map((t) => ({
        dashboard: d.uid,
        panel: p.title,
        expr: t.expr,
        instant: t.instant === true,
      })),
    );
    // The foundation SDK writes a variable's query as `query.query` (older JSON as `definition`).
    const variables = d.templating.list.flatMap((v) => {
      const expr = v.query?.query ?? v.definition;
      return v.type === 'query' && expr
        ? [{ dashboard: d.uid, panel: `$${v.name}`, expr, instant: true }]
        : [];
    });
    return [...panels, ...variables];
  });
}

/** A Grafana query as Prometheus would receive it: variables filled in with "all". */
export function interpolate(expr: string): string {
  return expr
    .replaceAll('$__rate_interval', '1m')
    .replaceAll('$__interval', '15s')
    .replace(/\$(orchestrator|responder|instance|queue)\b/g, '.*');
}

/** `label_values(metric{...}, label)` as the series selector Grafana sends. */
export function variableSelector(expr: string): string | undefined {
  return /^label_values\((.+), *\w+\)$/.exec(expr)?.[1];
}

/** Metric families the plugin exposes, with the series names of histograms. */
export function exposedSeriesNames(): Set<string> {
  const names = new Set<string>();
  for (const [key, value] of Object.entries(semconv)) {
    // The plugin's metrics, and BullMQ's own exposed beside them.
    if (!key.startsWith('METRIC_') && !key.startsWith('BULLMQ_METRIC_')) continue;
    names.add(value as string);
    for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${value}${suffix}`);
  }
  return names;
}

/** Metric names (not labels, functions or keywords) a PromQL expression selects. */
export function metricNamesIn(expr: string): string[] {
  const withoutStrings = expr.replace(/"[^"]*"/g, '""').replace(/#.*$/gm, '');
  const withoutLabelLists = withoutStrings
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
    .replace(/\{[^}]*\}/g, '{}');
  const names =
    withoutLabelLists.match(
      /[a-zA-Z_:][a-zA-Z0-9_:]*(?=\s*(\{|\[|\)|$|\s*[<>=!]|\s*\/|\s*(and|or|unless)\b))/g,
    ) ?? [];
  const keywords = new Set([
    'and',
    'or',
    'unless',
    'by',
    'on',
    'le',
    'reason',
    'sum',
    'rate',
    'increase',
    'histogram_quantile',
    'label_values',
  ]);
  return names.filter((n) => !keywords.has(n) && !/^\d/.test(n));
}
