/**
 * The PromQL the dashboards' queries share: the matchers of the config's selector and of the
 * dashboard's variables, Grafana's rate range, histogram quantiles.
 */
import type { OpsConfig } from '../config-types.ts';
import { parseSelector } from '../selector.ts';

/** Grafana's rate range: at least four scrape intervals, so a rate always has samples. */
export const RATE = '$__rate_interval';

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

/** The `q` quantile of histogram `metric` over the rate range, by `by` (and `le`). */
export function histogramQuantile(
  q: string,
  metric: string,
  matchers: string,
  by: readonly string[] = [],
): string {
  return `histogram_quantile(${q}, sum by (${[...by, 'le'].join(', ')}) (rate(${metric}_bucket{${matchers}}[${RATE}])))`;
}
