/**
 * What a Prometheus rule file holds, and the one way an alert is written: every alert has a
 * `for:`, a `severity`, a fixed one-sentence summary, a description and a `runbook_url` into
 * prometheus/runbook.md. ops/rules.ts and the modules it assembles (slo, usage, endings, durable)
 * all build on this module, which imports none of them.
 */
import type { Duration, OpsConfig } from './config-types.ts';

export interface RecordingRule {
  readonly record: string;
  readonly expr: string;
  readonly labels?: Readonly<Record<string, string>>;
}

export interface AlertingRule {
  readonly alert: string;
  readonly expr: string;
  readonly for: Duration;
  readonly labels: { readonly severity: 'warning' | 'critical'; readonly [label: string]: string };
  readonly annotations: {
    readonly summary: string;
    readonly description: string;
    readonly runbook_url: string;
  };
}

export interface RuleGroup<R> {
  readonly name: string;
  readonly rules: readonly R[];
}

export interface Rules {
  readonly groups: readonly RuleGroup<RecordingRule | AlertingRule>[];
}

/** What distinguishes one alert from another. */
export interface AlertSpec {
  readonly alert: string;
  readonly expr: string;
  readonly for: Duration;
  readonly severity: 'warning' | 'critical';
  /** Labels beside `severity`, in this order. */
  readonly labels?: Readonly<Record<string, string>>;
  readonly summary: string;
  readonly description: string;
}

/** The alert's rule, its `runbook_url` the config's runbook plus `#alertname` in lower case. */
export function alertRule(config: OpsConfig, spec: AlertSpec): AlertingRule {
  return {
    alert: spec.alert,
    expr: spec.expr,
    for: spec.for,
    labels: { severity: spec.severity, ...spec.labels },
    annotations: {
      summary: spec.summary,
      description: spec.description,
      runbook_url: `${config.runbookUrl}#${spec.alert.toLowerCase()}`,
    },
  };
}
