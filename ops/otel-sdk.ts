/**
 * The ops bundle for metrics scraped from the OpenTelemetry SDK's `PrometheusExporter` (the
 * telemetry's `meterProvider` path, exposed by the SDK itself): a generated second set of the
 * rules and dashboards. That exporter writes a counter's name with `_total` but without the
 * unit's suffix, so the histograms in seconds lose their `_seconds` (and the one in bytes its
 * `_bytes`); every other name, and
 * every label, is the registry's (src/observability/metric-definitions.ts). Metrics exported over
 * OTLP to a Collector or to Prometheus's OTLP receiver get the suffix back and need no second set.
 * Recording rules keep their names, so whatever reads them (the dashboards' panels, the alerts)
 * reads either set.
 */
import { METRIC_DEFINITIONS, prometheusNameOf } from '../src/observability/metric-definitions.ts';
import type { Rules } from './rule-model.ts';

/** Registry name → the SDK exporter's, for the names that differ. */
export const OTEL_SDK_RENAMES: ReadonlyMap<string, string> = new Map(
  METRIC_DEFINITIONS.filter((d) => prometheusNameOf(d, false) !== d.prometheus).map((d) => [
    d.prometheus,
    prometheusNameOf(d, false),
  ]),
);

/** What the second set's dashboards add to their uids and titles. */
export const OTEL_SDK_UID_SUFFIX = '-otel-sdk';
export const OTEL_SDK_TITLE_SUFFIX = ' (OpenTelemetry SDK exporter)';

const renames = [...OTEL_SDK_RENAMES].map(
  ([from, to]) =>
    // A metric's own name (with `_bucket`, `_sum` or `_count`), never the middle of a recording
    // rule's `level:metric:operations`, which has a colon on one side.
    [new RegExp(`(?<![\\w:])${from}(?=(?:_bucket|_sum|_count)?(?![\\w:]))`, 'g'), to] as const,
);

/** PromQL (or any text) with the registry's metric names as the SDK exporter writes them. */
export function otelSdkNames(text: string): string {
  let out = text;
  for (const [pattern, to] of renames) out = out.replace(pattern, to);
  return out;
}

/** The rules with every expression reading the SDK exporter's names. */
export function otelSdkRules(rules: Rules): Rules {
  return {
    groups: rules.groups.map((group) => ({
      ...group,
      rules: group.rules.map((rule) => ({ ...rule, expr: otelSdkNames(rule.expr) })),
    })),
  };
}

/**
 * A dashboard of the second set: its queries read the SDK exporter's names, its uid and title
 * (and the links to the other dashboards) are the second set's own.
 */
export function otelSdkDashboard(dashboard: unknown, uids: readonly string[]): unknown {
  let text = otelSdkNames(JSON.stringify(dashboard));
  for (const uid of uids) {
    text = text
      .replaceAll(`"uid":"${uid}"`, `"uid":"${uid}${OTEL_SDK_UID_SUFFIX}"`)
      .replaceAll(`"/d/${uid}"`, `"/d/${uid}${OTEL_SDK_UID_SUFFIX}"`);
  }
  const out = JSON.parse(text) as { title: string };
  out.title += OTEL_SDK_TITLE_SUFFIX;
  return out;
}
