/**
 * What the dashboards share: the datasource variable every query goes through, the selectors
 * built from the config, the units, the query and variable builders, the links between them.
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
} from '@grafana/grafana-foundation-sdk/heatmap';
import { DataqueryBuilder, PromQueryFormat } from '@grafana/grafana-foundation-sdk/prometheus';
import { PanelBuilder as StatPanel } from '@grafana/grafana-foundation-sdk/stat';
import { PanelBuilder as TimeseriesPanel } from '@grafana/grafana-foundation-sdk/timeseries';
import type { OpsConfig } from '../config-types.ts';
import { parseSelector } from '../selector.ts';
import { DASHBOARD_LINKS } from './uids.ts';

/** Every panel and query goes to the dashboard's datasource variable. */
// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana interpolates it, not JavaScript.
export const DATASOURCE: DataSourceRef = { type: 'prometheus', uid: '${datasource}' };

/** Grafana's rate range: at least four scrape intervals, so a rate always has samples. */
export const RATE = '$__rate_interval';

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

/** Label matchers of the dashboard's variables, after the config's own selector. */
export function selector(config: OpsConfig, variables: readonly string[]): string {
  return [config.selector, ...variables.map((v) => `${v}=~"$${v}"`)].join(',');
}

/** The config selector's matchers on group labels: the ones recorded series and alerts keep. */
export function groupLabelMatchers(config: OpsConfig): string[] {
  return parseSelector(config.selector)
    .filter((m) => config.groupLabels.includes(m.label))
    .map((m) => m.text);
}

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
  const panel = new StatPanel().datasource(DATASOURCE).title(title);
  if (options.description !== undefined) panel.description(options.description);
  return panel
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

/** Builds the dashboard and numbers its panels 1, 2, 3 … (panel links and the API use the ids). */
export function build(builder: DashboardBuilder): Dashboard {
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
