/**
 * A live-check of emitted telemetry against the pinned GenAI conventions
 * (vendor/semantic-conventions-genai/model.yaml), in the way of OpenTelemetry Weaver's
 * `registry live-check`: every span, span event, attribute and metric is matched to its
 * definition and checked for name, type, unit, requirement level and allowed values. What breaks
 * the conventions is a violation; what they allow but a reader should know (a custom enum value,
 * a registry attribute a group does not list, a name kept for one minor version) is information.
 */
import { readFileSync } from 'node:fs';
import { type Attributes, SpanKind, SpanStatusCode, ValueType } from '@opentelemetry/api';
import {
  type DataPoint,
  DataPointType,
  type MetricData,
  type ResourceMetrics,
} from '@opentelemetry/sdk-metrics';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { parse } from 'yaml';

type Requirement = 'required' | 'conditionally_required' | 'recommended' | 'opt_in';

interface AttributeUse {
  readonly requirement: Requirement;
  /** The condition of a conditionally required attribute, as the test evaluates it. */
  readonly when?: string;
  /** The value the group fixes. */
  readonly value?: string;
}

interface AttributeDefinition {
  readonly type: 'string' | 'int' | 'double' | 'boolean' | 'string[]' | 'any';
  readonly members?: readonly string[];
}

export interface ConventionsModel {
  readonly pin: { readonly repository: string; readonly commit: string };
  readonly namespaces: readonly string[];
  readonly attributes: Readonly<Record<string, AttributeDefinition>>;
  readonly spans: Readonly<
    Record<
      string,
      {
        readonly name_prefix: string;
        readonly name: string;
        readonly kind: 'internal' | 'client';
        readonly attributes: Readonly<Record<string, AttributeUse>>;
      }
    >
  >;
  readonly metrics: Readonly<
    Record<
      string,
      {
        readonly instrument: 'histogram' | 'counter' | 'updowncounter' | 'gauge';
        readonly unit: string;
        readonly value_type: 'int' | 'double';
        readonly attributes: Readonly<Record<string, AttributeUse>>;
      }
    >
  >;
  readonly removed: readonly {
    readonly name: string;
    readonly from?: string;
    readonly metric?: boolean;
    readonly kept_until?: string;
    readonly renamed_to?: string;
    readonly pull_request?: number;
  }[];
}

export function loadModel(path = 'vendor/semantic-conventions-genai/model.yaml'): ConventionsModel {
  return parse(readFileSync(path, 'utf8'), { merge: true }) as ConventionsModel;
}

/** What the emitting side knows of its own telemetry, for the checks the model cannot make. */
export interface LiveCheckContext {
  /** Attributes whose value the instrumentation always has (a condition `when: available`). */
  readonly available: ReadonlySet<string>;
  /** Attributes outside the conventions' namespaces the telemetry documents as its own. */
  readonly own: ReadonlySet<string>;
  /** Metrics outside the conventions' namespaces, by name: their unit, instrument and attributes. */
  readonly ownMetrics: ReadonlyMap<
    string,
    { readonly unit: string; readonly instrument: string; readonly attributes: readonly string[] }
  >;
  /** Span names outside the conventions (none expected). */
  readonly ownEvents: ReadonlySet<string>;
}

export interface LiveCheckReport {
  readonly violations: string[];
  readonly information: string[];
  /** How many spans, events, attributes (occurrences) and metric data points were checked. */
  readonly checked: { spans: number; events: number; attributes: number; points: number };
}

function namespaceOf(key: string): string {
  return key.split('.')[0] ?? key;
}

function typeOk(type: AttributeDefinition['type'], value: unknown): boolean {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'int':
      return typeof value === 'number' && Number.isInteger(value);
    case 'double':
      return typeof value === 'number';
    case 'boolean':
      return typeof value === 'boolean';
    case 'string[]':
      return Array.isArray(value) && value.every((v) => typeof v === 'string');
    case 'any':
      return value !== undefined;
  }
}

/** Checks telemetry against `model`. */
export function liveCheck(
  model: ConventionsModel,
  context: LiveCheckContext,
  telemetry: { readonly spans: readonly ReadableSpan[]; readonly metrics?: ResourceMetrics },
): LiveCheckReport {
  const report: LiveCheckReport = {
    violations: [],
    information: [],
    checked: { spans: 0, events: 0, attributes: 0, points: 0 },
  };
  const violation = (m: string) => {
    if (!report.violations.includes(m)) report.violations.push(m);
  };
  const info = (m: string) => {
    if (!report.information.includes(m)) report.information.push(m);
  };
  const owned = new Set(model.namespaces);

  /** One attribute occurrence, `uses` the attributes its definition (a group) lists. */
  const attribute = (
    where: string,
    key: string,
    value: unknown,
    uses: Readonly<Record<string, AttributeUse>> | undefined,
    group: string | undefined,
  ) => {
    report.checked.attributes++;
    if (!owned.has(namespaceOf(key))) {
      if (!context.own.has(key))
        violation(
          `${where}: \`${key}\` is in no registry (not the conventions', not documented as the telemetry's own)`,
        );
      return;
    }
    const definition = model.attributes[key];
    if (definition === undefined) {
      violation(`${where}: \`${key}\` is not in the conventions' registry`);
      return;
    }
    if (!typeOk(definition.type, value)) {
      violation(
        `${where}: \`${key}\` is ${JSON.stringify(value)} (${typeof value}), the registry says ${definition.type}`,
      );
      return;
    }
    const use = uses?.[key];
    if (use?.value !== undefined && value !== use.value) {
      violation(
        `${where}: \`${key}\` is ${JSON.stringify(value)}, ${group} fixes it as ${JSON.stringify(use.value)}`,
      );
    } else if (definition.members !== undefined && !definition.members.includes(String(value))) {
      info(
        `${where}: \`${key}\` = ${JSON.stringify(value)}, a custom value (not a well-known one)`,
      );
    }
    if (uses !== undefined && use === undefined) {
      const removed = model.removed.find((r) => r.name === key && r.from === group);
      if (removed?.kept_until !== undefined) {
        info(
          `${where}: \`${key}\` kept for existing users until ${removed.kept_until} (removed by #${removed.pull_request})`,
        );
      } else if (removed !== undefined) {
        violation(`${where}: \`${key}\` was removed from ${group} (#${removed.pull_request})`);
      } else {
        info(`${where}: \`${key}\` is a registry attribute ${group} does not list`);
      }
    }
  };

  /** The requirement levels of a group, over one set of attributes. */
  const requirements = (
    where: string,
    uses: Readonly<Record<string, AttributeUse>>,
    attributes: Attributes,
    failed: boolean | undefined,
  ) => {
    for (const [key, use] of Object.entries(uses)) {
      const present = attributes[key] !== undefined;
      if (use.requirement === 'required' && !present)
        violation(`${where}: required \`${key}\` is missing`);
      if (use.requirement !== 'conditionally_required' || present) continue;
      const holds =
        use.when === 'error'
          ? failed
          : use.when === 'available'
            ? context.available.has(key)
            : use.when !== undefined && use.when in attributes
              ? true
              : undefined;
      if (holds === true)
        violation(`${where}: \`${key}\` is conditionally required (${use.when}) and missing`);
      if (holds === undefined && use.when === 'error')
        info(`${where}: \`${key}\` (when ${use.when}) not evaluated`);
    }
  };

  for (const span of telemetry.spans) {
    const entry = Object.entries(model.spans).find(([, d]) => span.name.startsWith(d.name_prefix));
    const where = `span \`${span.name}\``;
    if (entry === undefined) {
      violation(`${where}: matches no span type of the conventions`);
      continue;
    }
    report.checked.spans++;
    const [type, definition] = entry;
    const kind = definition.kind === 'internal' ? SpanKind.INTERNAL : SpanKind.CLIENT;
    if (span.kind !== kind)
      violation(`${where}: kind ${SpanKind[span.kind]}, ${type} says ${definition.kind}`);
    // The name: `{prefix}{attribute}` with that attribute's value.
    const named = /\{([\w.]+)\}$/.exec(definition.name)?.[1];
    if (
      named !== undefined &&
      span.name !== `${definition.name_prefix}${String(span.attributes[named])}`
    ) {
      violation(`${where}: not named ${definition.name}`);
    }
    for (const [key, value] of Object.entries(span.attributes)) {
      attribute(where, key, value, definition.attributes, type);
    }
    requirements(
      where,
      definition.attributes,
      span.attributes,
      span.status.code === SpanStatusCode.ERROR,
    );
    for (const event of span.events) {
      report.checked.events++;
      const at = `${where} event \`${event.name}\``;
      if (event.name === 'exception') continue; // the SDK's own, per the exception conventions
      if (!context.ownEvents.has(event.name))
        violation(`${at}: not an event of the conventions nor the telemetry's own`);
      for (const [key, value] of Object.entries(event.attributes ?? {})) {
        attribute(at, key, value, undefined, undefined);
      }
    }
  }

  for (const scope of telemetry.metrics?.scopeMetrics ?? []) {
    for (const metric of scope.metrics) checkMetric(metric);
  }

  function checkMetric(metric: MetricData): void {
    const name = metric.descriptor.name;
    const where = `metric \`${name}\``;
    const instrument =
      metric.dataPointType === DataPointType.HISTOGRAM
        ? 'histogram'
        : metric.dataPointType === DataPointType.SUM
          ? metric.isMonotonic
            ? 'counter'
            : 'updowncounter'
          : 'gauge';
    const points = metric.dataPoints as DataPoint<unknown>[];
    if (!owned.has(namespaceOf(name))) {
      const own = context.ownMetrics.get(name);
      if (own === undefined) {
        violation(
          `${where}: is not a metric of the conventions nor documented as the telemetry's own`,
        );
        return;
      }
      if (own.unit !== metric.descriptor.unit)
        violation(`${where}: unit ${metric.descriptor.unit}, documented ${own.unit}`);
      if (own.instrument !== instrument)
        violation(`${where}: a ${instrument}, documented as a ${own.instrument}`);
      for (const p of points) {
        report.checked.points++;
        for (const key of Object.keys(p.attributes)) {
          if (!own.attributes.includes(key))
            violation(`${where}: attribute \`${key}\` is not one of its documented labels`);
        }
      }
      return;
    }
    const removed = model.removed.find((r) => r.metric === true && r.name === name);
    if (removed !== undefined) {
      violation(
        `${where}: removed by the conventions${removed.renamed_to ? ` (now ${removed.renamed_to})` : ''}`,
      );
      return;
    }
    const definition = model.metrics[name];
    if (definition === undefined) {
      violation(`${where}: not a metric of the conventions`);
      return;
    }
    if (definition.instrument !== instrument)
      violation(`${where}: a ${instrument}, the conventions say ${definition.instrument}`);
    if (definition.unit !== metric.descriptor.unit)
      violation(`${where}: unit ${metric.descriptor.unit}, the conventions say ${definition.unit}`);
    const valueType = metric.descriptor.valueType === ValueType.INT ? 'int' : 'double';
    if (definition.value_type !== valueType)
      violation(`${where}: ${valueType} values, the conventions say ${definition.value_type}`);
    for (const p of points) {
      report.checked.points++;
      for (const [key, value] of Object.entries(p.attributes)) {
        attribute(where, key, value, definition.attributes, name);
      }
      requirements(where, definition.attributes, p.attributes, undefined);
    }
  }

  return report;
}
