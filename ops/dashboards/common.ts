/**
 * What the dashboards share: the datasource variable every query goes through, the units, the
 * query, panel and variable builders, the links between them. The PromQL they share is in
 * promql.ts.
 */

import {
  BigValueColorMode,
  BigValueGraphMode,
  LegendDisplayMode,
  LegendPlacement,
  ReduceDataOptionsBuilder,
  SortOrder,
  TooltipDisplayMode,
  VizLegendOptionsBuilder,
  VizTooltipOptionsBuilder,
} from '@grafana/grafana-foundation-sdk/common';
import {
  type Dashboard,
  DashboardBuilder,
  DashboardCursorSync,
  DashboardLinkBuilder,
  DashboardLinkType,
  type DataSourceRef,
  DatasourceVariableBuilder,
  QueryVariableBuilder,
  VariableRefresh,
  VariableSort,
} from '@grafana/grafana-foundation-sdk/dashboard';
import {
  HeatmapColorMode,
  HeatmapColorOptionsBuilder,
  HeatmapColorScale,
  PanelBuilder as HeatmapPanel,
  YAxisConfigBuilder,
} from '@grafana/grafana-foundation-sdk/heatmap';
import { DataqueryBuilder, PromQueryFormat } from '@grafana/grafana-foundation-sdk/prometheus';
import { PanelBuilder as StatPanel } from '@grafana/grafana-foundation-sdk/stat';
import { PanelBuilder as TablePanel } from '@grafana/grafana-foundation-sdk/table';
import { PanelBuilder as TimeseriesPanel } from '@grafana/grafana-foundation-sdk/timeseries';
import { DASHBOARD_LINKS } from './uids.ts';

/** Every panel and query goes to the dashboard's datasource variable. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana interpolates it, not JavaScript.
export const DATASOURCE: DataSourceRef = { type: 'prometheus', uid: '${datasource}' };

/**
 * Units. Grafana's `reqps` would print conversations per second as "req/s", and `short` gives an
 * error rate no unit at all: `suffix:` units say what is counted.
 */
export const UNIT = {
  conversationsPerSecond: 'suffix: conv/s',
  dispatchesPerSecond: 'suffix: dispatches/s',
  errorsPerSecond: 'suffix: errors/s',
  decisionsPerSecond: 'suffix: decisions/s',
  conversations: 'short',
  dispatches: 'short',
  seconds: 's',
  ratio: 'percentunit',
  burnRate: 'suffix: x',
  tokensPerSecond: 'suffix: tokens/s',
  tokens: 'short',
  commitsPerSecond: 'suffix: commits/s',
  bytesPerSecond: 'Bps',
  bytes: 'bytes',
  conflictsPerSecond: 'suffix: conflicts/s',
  jobs: 'short',
} as const;

export interface QueryOptions {
  /** The query's id within its panel. @default 'A' */
  readonly refId?: string;
  readonly legend?: string;
  /** Ask for exemplars: the trace ids Grafana links to Jaeger. */
  readonly exemplar?: boolean;
  /** One value now instead of a range (tables). */
  readonly instant?: boolean;
  readonly format?: PromQueryFormat;
}

export function query(expr: string, options: QueryOptions = {}): DataqueryBuilder {
  const q = new DataqueryBuilder()
    .datasource(DATASOURCE)
    .refId(options.refId ?? 'A')
    .expr(expr);
  if (options.legend !== undefined) q.legendFormat(options.legend);
  if (options.exemplar === true) q.exemplar(true);
  if (options.instant === true) q.instant();
  else q.range();
  if (options.format !== undefined) q.format(options.format);
  return q;
}

export { PromQueryFormat };

/** What every panel kind's builder offers to start with. */
interface Titled<P> {
  datasource(datasource: DataSourceRef): P;
  title(title: string): P;
  description(description: string): P;
}

/** `panel` on the dashboard's datasource, with its title and, if it has one, its help text. */
function titled<P extends Titled<P>>(panel: P, title: string, description: string | undefined): P {
  panel.datasource(DATASOURCE).title(title);
  return description === undefined ? panel : panel.description(description);
}

/** What distinguishes the dashboards' stat panels. */
export interface StatOptions {
  /** The panel's help text. */
  readonly description?: string;
  /** Grid rows. @default 4 */
  readonly height?: number;
  /** The query's legend. */
  readonly legend?: string;
}

/** A quarter-width stat panel: the last value, coloured, with its sparkline. */
export function stat(
  title: string,
  unit: string,
  expr: string,
  options: StatOptions = {},
): StatPanel {
  return titled(new StatPanel(), title, options.description)
    .unit(unit)
    .span(6)
    .height(options.height ?? 4)
    .reduceOptions(new ReduceDataOptionsBuilder().calcs(['lastNotNull']).fields('').values(false))
    .colorMode(BigValueColorMode.Value)
    .graphMode(BigValueGraphMode.Area)
    .withTarget(query(expr, options.legend === undefined ? {} : { legend: options.legend }));
}

/** A stat with its help text. */
export function described(
  title: string,
  unit: string,
  expr: string,
  description: string,
): StatPanel {
  return stat(title, unit, expr, { description });
}

/**
 * A multi-value variable of label `name` filled from `label_values(series, name)`, "All" by
 * default, labelled with its name capitalised.
 */
export function labelVariable(name: string, series: string): QueryVariableBuilder {
  return new QueryVariableBuilder(name)
    .label(`${name.charAt(0).toUpperCase()}${name.slice(1)}`)
    .datasource(DATASOURCE)
    .query({ query: `label_values(${series}, ${name})`, refId: `${name}-query` })
    .refresh(VariableRefresh.OnTimeRangeChanged)
    .sort(VariableSort.AlphabeticalAsc)
    .multi(true)
    .includeAll(true)
    .allValue('.*')
    .current({ selected: true, text: ['All'], value: ['$__all'] });
}

function datasourceVariable(): DatasourceVariableBuilder {
  return new DatasourceVariableBuilder('datasource')
    .label('Data source')
    .type('prometheus')
    .current({ selected: true, text: 'Prometheus', value: 'prometheus' });
}

/**
 * A dashboard with the bundle's settings: fixed uid, shared crosshair, the datasource variable
 * first, then `variables`, then links to every other dashboard.
 */
export function dashboard(
  uid: string,
  title: string,
  variables: readonly QueryVariableBuilder[],
): DashboardBuilder {
  const builder = new DashboardBuilder(title)
    .uid(uid)
    .tags(['conversation-orchestrator'])
    .timezone('browser')
    .editable()
    .tooltip(DashboardCursorSync.Crosshair)
    .refresh('10s')
    .time({ from: 'now-30m', to: 'now' })
    .withVariable(datasourceVariable());
  for (const variable of variables) builder.withVariable(variable);
  for (const [linkTitle, linkUid] of DASHBOARD_LINKS) {
    if (linkUid !== uid) builder.link(linkTo(linkTitle, linkUid));
  }
  return builder;
}

/** A link to another dashboard that keeps the time range and the variables. */
function linkTo(title: string, uid: string): DashboardLinkBuilder {
  return new DashboardLinkBuilder(title)
    .type(DashboardLinkType.Link)
    .url(`/d/${uid}`)
    .keepTime(true)
    .includeVars(true);
}

/** A time series panel, legend below, the tooltip listing every series (largest first). */
export function timeseries(title: string, unit: string, span: number): TimeseriesPanel {
  return new TimeseriesPanel()
    .datasource(DATASOURCE)
    .title(title)
    .unit(unit)
    .span(span)
    .height(8)
    .legend(
      new VizLegendOptionsBuilder()
        .displayMode(LegendDisplayMode.List)
        .placement(LegendPlacement.Bottom)
        .showLegend(true),
    )
    .tooltip(
      new VizTooltipOptionsBuilder().mode(TooltipDisplayMode.Multi).sort(SortOrder.Descending),
    );
}

/**
 * One query of a time series panel: its expression and its legend, and whether it asks for
 * exemplars.
 */
export type Target = readonly [expr: string, legend: string, options?: { readonly exemplar: true }];

/** One query per quantile `qs` of `histogram`, the legends `p50 legend`, `p95 legend` … */
export function quantiles(
  qs: readonly string[],
  histogram: (q: string) => string,
  legend: string,
): Target[] {
  return qs.map((q) => [histogram(q), `p${Math.round(Number(q) * 100)} ${legend}`]);
}

/** The query id of a panel's `i`-th query: A, B, C … */
export function refId(i: number): string {
  return String.fromCharCode('A'.charCodeAt(0) + i);
}

/** A time series panel (see `timeseries`) of `targets`, in order, with its help text. */
export function series(
  title: string,
  unit: string,
  span: number,
  targets: readonly Target[],
  description?: string,
): TimeseriesPanel {
  const panel = timeseries(title, unit, span);
  if (description !== undefined) panel.description(description);
  for (const [i, [expr, legend, options]] of targets.entries()) {
    panel.withTarget(query(expr, { refId: refId(i), legend, ...options }));
  }
  return panel;
}

/** A heatmap of a histogram's buckets, its cells already counted (`expr` sums by `le`). */
export function heatmap(
  title: string,
  unit: string,
  expr: string,
  description?: string,
): HeatmapPanel {
  return titled(new HeatmapPanel(), title, description)
    .unit(unit)
    .span(12)
    .height(8)
    .calculate(false)
    .cellGap(1)
    .yAxis(new YAxisConfigBuilder().unit(unit))
    .color(heatmapColor())
    .withTarget(query(expr, { legend: '{{le}}', format: PromQueryFormat.Heatmap }));
}

/** A table of one instant query, with its header. */
export function table(
  title: string,
  span: number,
  height: number,
  expr: string,
  description?: string,
): TablePanel {
  return titled(new TablePanel(), title, description)
    .span(span)
    .height(height)
    .showHeader(true)
    .withTarget(query(expr, { instant: true, format: PromQueryFormat.Table }));
}

/** A panel of any kind the dashboards hold. */
type Panel = Parameters<DashboardBuilder['withPanel']>[0];

/**
 * Builds the dashboard with `panels`, in order, and numbers them 1, 2, 3 … (panel links and the
 * API use the ids).
 */
export function build(builder: DashboardBuilder, panels: readonly Panel[] = []): Dashboard {
  for (const panel of panels) builder.withPanel(panel);
  const built = builder.build();
  for (const [i, panel] of (built.panels ?? []).entries()) panel.id = i + 1;
  return built;
}

/** The heatmaps' colours: Grafana's own defaults for the Oranges scheme. */
export function heatmapColor(): HeatmapColorOptionsBuilder {
  return new HeatmapColorOptionsBuilder()
    .mode(HeatmapColorMode.Scheme)
    .scheme('Oranges')
    .fill('dark-orange')
    .scale(HeatmapColorScale.Exponential)
    .exponent(0.5)
    .steps(64);
}
