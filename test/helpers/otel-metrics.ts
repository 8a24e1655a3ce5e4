/**
 * The OpenTelemetry metrics path as tests read it: an SDK MeterProvider with a reader the test
 * collects from, and both paths' series flattened to one comparable shape (the OpenTelemetry
 * name, the labels or attributes sorted, and a value: a number, or a histogram's count, sum and
 * cumulative buckets).
 */
import {
  type DataPoint,
  DataPointType,
  type Histogram,
  MeterProvider,
  MetricReader,
  type ResourceMetrics,
} from '@opentelemetry/sdk-metrics';
import type { Registry } from 'prom-client';
import { createMemoryStore, type Message, maxDispatches, suspend } from '../../src/index.ts';
import type { createConversationTelemetry } from '../../src/observability/index.ts';
import { METRIC_DEFINITIONS } from '../../src/observability/metric-definitions.ts';
import { counterOrchestrator } from './desks.ts';
import { attrs, type OtlpAttribute, type OtlpScopeMetrics } from './otlp-receiver.ts';

/** A reader collected by hand (`collect()`), cumulative. */
class ManualReader extends MetricReader {
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

export interface ManualMeter {
  readonly meterProvider: MeterProvider;
  /** What the SDK would export now. */
  collect(): Promise<ResourceMetrics>;
}

export function manualMeter(): ManualMeter {
  const reader = new ManualReader();
  const meterProvider = new MeterProvider({ readers: [reader] });
  return {
    meterProvider,
    async collect() {
      const { resourceMetrics, errors } = await reader.collect();
      if (errors.length > 0) throw new AggregateError(errors, 'collection failed');
      return resourceMetrics;
    },
  };
}

/** A histogram series: its count, sum and cumulative bucket counts by upper bound. */
export interface HistogramValue {
  readonly count: number;
  readonly sum: number;
  readonly buckets: Readonly<Record<string, number>>;
}

export type SeriesValue = number | HistogramValue;

/** `name{a="1",b="2"}` with the labels sorted: one key for both paths. */
export function seriesKey(name: string, labels: Readonly<Record<string, unknown>>): string {
  const inner = Object.keys(labels)
    .sort()
    .map((k) => `${k}=${JSON.stringify(String(labels[k]))}`)
    .join(',');
  return `${name}{${inner}}`;
}

/** Every data point the SDK collected, by series key. */
export function otelSeries(metrics: ResourceMetrics): Map<string, SeriesValue> {
  const out = new Map<string, SeriesValue>();
  for (const scope of metrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      for (const point of metric.dataPoints as DataPoint<number | Histogram>[]) {
        const key = seriesKey(metric.descriptor.name, point.attributes);
        if (metric.dataPointType === DataPointType.HISTOGRAM) {
          const h = point.value as Histogram;
          const buckets: Record<string, number> = {};
          let cumulative = 0;
          h.buckets.counts.forEach((c, i) => {
            cumulative += c;
            const le = h.buckets.boundaries[i];
            buckets[le === undefined ? '+Inf' : String(le)] = cumulative;
          });
          out.set(key, { count: h.count, sum: h.sum ?? 0, buckets });
        } else out.set(key, point.value as number);
      }
    }
  }
  return out;
}

/** The registry's orchestrator metrics under their OpenTelemetry names, by series key. */
export async function promSeries(registry: Registry): Promise<Map<string, SeriesValue>> {
  const out = new Map<string, SeriesValue>();
  const byName = new Map(METRIC_DEFINITIONS.map((d) => [d.prometheus, d]));
  for (const metric of await registry.getMetricsAsJSON()) {
    const definition = byName.get(metric.name);
    if (definition === undefined) continue;
    if (definition.kind !== 'histogram') {
      for (const v of metric.values) out.set(seriesKey(definition.otel, v.labels), v.value);
      continue;
    }
    const histograms = new Map<
      string,
      { count: number; sum: number; buckets: Record<string, number> }
    >();
    for (const v of metric.values) {
      // The plugin's histograms hand their series labels over as prom-client's `sharedLabels`.
      const shared = (v as { sharedLabels?: Record<string, string> }).sharedLabels;
      const { le, ...labels } = { ...shared, ...v.labels } as Record<string, string | number>;
      const key = seriesKey(definition.otel, labels);
      let h = histograms.get(key);
      if (h === undefined) {
        h = { count: 0, sum: 0, buckets: {} };
        histograms.set(key, h);
      }
      const name = (v as { metricName?: string }).metricName ?? '';
      if (name.endsWith('_bucket')) h.buckets[String(le)] = v.value;
      else if (name.endsWith('_sum')) h.sum = v.value;
      else if (name.endsWith('_count')) h.count = v.value;
    }
    for (const [key, h] of histograms) out.set(key, h);
  }
  return out;
}

/** The series of `all` whose metric name is `name`. */
export function seriesOf(all: Map<string, SeriesValue>, name: string): Map<string, SeriesValue> {
  return new Map([...all].filter(([key]) => key.startsWith(`${name}{`)));
}

const ORCHESTRATOR_NAMES = new Set(METRIC_DEFINITIONS.map((d) => d.otel));

/** The series of `all` of the orchestrator's own metrics (METRIC_DEFINITIONS), not the GenAI ones. */
export function orchestratorSeries(all: Map<string, SeriesValue>): Map<string, SeriesValue> {
  return new Map([...all].filter(([k]) => ORCHESTRATOR_NAMES.has(k.slice(0, k.indexOf('{')))));
}

/**
 * The histograms whose Prometheus name has a unit suffix, each with the name the OpenTelemetry
 * SDK's Prometheus exporter gives it (without the suffix).
 */
export const UNIT_SUFFIXED = [
  ['orchestrator_conversation_duration_seconds', 'orchestrator_conversation_duration'],
  ['orchestrator_dispatch_duration_seconds', 'orchestrator_dispatch_duration'],
  ['orchestrator_checkpoint_duration_seconds', 'orchestrator_checkpoint_duration'],
  ['orchestrator_checkpoint_size_bytes', 'orchestrator_checkpoint_size'],
  [
    'orchestrator_checkpoint_snapshot_duration_seconds',
    'orchestrator_checkpoint_snapshot_duration',
  ],
] as const;

/** An OTLP/HTTP JSON export's series (as a receiver decoded it), by series key. */
export function otlpSeries(scopes: readonly OtlpScopeMetrics[]): Map<string, SeriesValue> {
  const out = new Map<string, SeriesValue>();
  const attributes = (list: OtlpAttribute[] | undefined) => attrs(list);
  for (const scope of scopes) {
    for (const metric of scope.metrics) {
      const numbers = metric.sum?.dataPoints ?? metric.gauge?.dataPoints ?? [];
      for (const p of numbers) {
        out.set(
          seriesKey(metric.name, attributes(p.attributes)),
          p.asDouble ?? Number(p.asInt ?? 0),
        );
      }
      for (const p of metric.histogram?.dataPoints ?? []) {
        const buckets: Record<string, number> = {};
        let cumulative = 0;
        (p.bucketCounts ?? []).forEach((c, i) => {
          cumulative += Number(c);
          const le = p.explicitBounds?.[i];
          buckets[le === undefined ? '+Inf' : String(le)] = cumulative;
        });
        out.set(seriesKey(metric.name, attributes(p.attributes)), {
          count: Number(p.count ?? 0),
          sum: p.sum ?? 0,
          buckets,
        });
      }
    }
  }
  return out;
}

const input = { sender: 'user', content: 0 };
type Telemetry = ReturnType<typeof createConversationTelemetry<number, number>>;

class Outage extends Error {
  override name = 'Outage';
}

/** The attributes of the GenAI usage series of `exercise()`'s LLM responder. */
export const LLM_USAGE_ATTRIBUTES = {
  'gen_ai.operation.name': 'chat',
  'gen_ai.provider.name': 'openai',
  'gen_ai.token.modality': 'unknown',
  'gen_ai.request.model': 'gpt-4o',
  'gen_ai.agent.name': 'llm',
  'gen_ai.workflow.name': 'counter',
};

/**
 * Five dispatches of a, b, c; a conversation whose responder fails at its third message; an
 * LLM responder reporting two model calls per invocation (cached and reasoning tokens, a model);
 * a listener that throws.
 */
export async function exercise(telemetry: Telemetry): Promise<void> {
  await counterOrchestrator({ observers: [telemetry], termination: maxDispatches(5) }).run(input);
  const flaky = {
    name: 'flaky',
    respond: (m: Message<number>) => {
      if (m.content === 2) throw new Outage('down');
      return { sender: 'flaky', content: m.content + 1 };
    },
  };
  await counterOrchestrator({ observers: [telemetry], responders: [flaky] })
    .run(input)
    .catch(() => {});
  await counterOrchestrator({
    observers: [telemetry],
    termination: maxDispatches(3),
    listener: () => {
      throw new Error('listener');
    },
    onListenerError: () => {},
    responders: [
      {
        name: 'llm',
        provider: 'openai',
        respond: (_m, _s, context) => {
          context.reportUsage({ inputTokens: 10, outputTokens: 2, model: 'gpt-4o' });
          context.reportUsage({
            inputTokens: 7,
            outputTokens: 3,
            cacheReadInputTokens: 4,
            reasoningOutputTokens: 1,
            model: 'gpt-4o',
          });
          return { sender: 'llm', content: 1 };
        },
      },
    ],
  }).run(input);
}

/** An aborted conversation (its caller gone) and a responder past the dispatch deadline. */
export async function exerciseAbortAndDeadline(telemetry: Telemetry): Promise<void> {
  const controller = new AbortController();
  await counterOrchestrator({
    observers: [telemetry],
    responders: [
      {
        name: 'caller_gone',
        respond: () => {
          controller.abort();
          return { sender: 'caller_gone', content: 1 };
        },
      },
    ],
  })
    .run({ sender: 'u', content: 0 }, { signal: controller.signal })
    .catch(() => {});
  await counterOrchestrator({
    observers: [telemetry],
    dispatchTimeoutMs: 1,
    responders: [{ name: 'slow', respond: () => new Promise<never>(() => {}) }],
  })
    .run({ sender: 'u', content: 0 })
    .catch(() => {});
}

/**
 * A durable conversation `conversationId` on a memory store: its one responder `d` suspends at its
 * first answer (`'ok?'`), is resumed, and ends after 3 dispatches.
 */
export async function exerciseDurable(telemetry: Telemetry, conversationId: string): Promise<void> {
  let asked = false;
  const durable = counterOrchestrator({
    name: 'durable',
    store: createMemoryStore(),
    observers: [telemetry],
    responders: [
      {
        name: 'd',
        respond: (m: Message<number>) => {
          if (!asked) {
            asked = true;
            return suspend('ok?');
          }
          return { sender: 'd', content: m.content + 1 };
        },
      },
    ],
    projection: { initial: () => 0, fold: (_n, m) => m.content },
    termination: maxDispatches(3),
  });
  await durable.run({ sender: 'u', content: 0 }, { conversationId });
  await durable.resume(conversationId, { input: { sender: 'u', content: 1 } });
}
