/**
 * Issue 42: the metrics exported with the OpenTelemetry SDK's OTLP/HTTP metrics exporter to a
 * real HTTP receiver, decoded there: every series the registry of the same run exposes, with the
 * same values, under its OpenTelemetry name and unit; the GenAI series with the run's counts;
 * the durable ones from a conversation that suspends and resumes.
 */
import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-http';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createConversationTelemetry, semconv } from '../../src/observability/index.ts';
import { GEN_AI_METRICS, METRIC_DEFINITIONS } from '../../src/observability/metric-definitions.ts';
import {
  exercise,
  exerciseDurable,
  type HistogramValue,
  LLM_USAGE_ATTRIBUTES,
  orchestratorSeries,
  otlpSeries,
  promSeries,
  seriesKey,
} from '../helpers/otel-metrics.ts';
import { startOtlpReceiver } from '../helpers/otlp-receiver.ts';

async function exported() {
  const receiver = await startOtlpReceiver();
  const reader = new PeriodicExportingMetricReader({
    exporter: new OTLPMetricExporter({ url: `${receiver.url}/v1/metrics` }),
    exportIntervalMillis: 3_600_000,
  });
  const meterProvider = new MeterProvider({ readers: [reader] });
  const registry = new Registry();
  const telemetry = createConversationTelemetry<number, number>({ registry, meterProvider });
  await exercise(telemetry);
  // A durable conversation: it suspends at its first answer and is resumed.
  await exerciseDurable(telemetry, 'otlp-metrics-1');
  await meterProvider.forceFlush();
  await meterProvider.shutdown();
  await receiver.close();
  return { receiver, registry };
}

describe('the metrics over OTLP/HTTP, to a real receiver', () => {
  it('delivers every series of the registry, with its values, under the OpenTelemetry names', async () => {
    const { receiver, registry } = await exported();
    // One export (the flush); shutdown exports nothing new.
    expect(receiver.metrics.length).toBeGreaterThanOrEqual(1);
    const last = receiver.metrics[0] ?? [];
    expect(last.map((s) => s.scope)).toEqual([
      { name: semconv.TRACER_NAME, version: semconv.TRACER_VERSION },
    ]);
    const otlp = otlpSeries(last);
    const prom = await promSeries(registry);
    expect(prom.size).toBeGreaterThan(30);
    expect(orchestratorSeries(otlp)).toEqual(prom);
    // The run's own numbers, as the receiver decoded them.
    expect(
      otlp.get(seriesKey('orchestrator.dispatches', { orchestrator: 'durable', responder: 'd' })),
    ).toBe(3);
    expect(
      otlp.get(
        seriesKey('orchestrator.conversations.resumed', {
          orchestrator: 'durable',
          cause: 'suspend',
        }),
      ),
    ).toBe(1);
    expect(
      otlp.get(seriesKey('orchestrator.conversations.started', { orchestrator: 'durable' })),
    ).toBe(1);
    const checkpoints = otlp.get(
      seriesKey('orchestrator.checkpoint.duration', { orchestrator: 'durable', store: 'memory' }),
    ) as HistogramValue;
    expect(checkpoints.count).toBeGreaterThanOrEqual(4);
    expect(
      otlp.get(
        seriesKey('orchestrator.conversation.dispatches', {
          orchestrator: 'durable',
          reason: 'max_dispatches',
        }),
      ) as HistogramValue,
    ).toMatchObject({ count: 1, sum: 3 });
  });

  it('declares each metric with its unit and temporality, sums as integers where the table says', async () => {
    const { receiver } = await exported();
    const metrics = new Map(
      (receiver.metrics[0] ?? []).flatMap((s) => s.metrics.map((m) => [m.name, m] as const)),
    );
    for (const d of [...METRIC_DEFINITIONS, ...Object.values(GEN_AI_METRICS)]) {
      const metric = metrics.get(d.otel);
      if (d.otel === semconv.OTEL_METRIC_RESPONDER_DEADLINES) continue; // none in this run
      if (d.otel === semconv.OTEL_METRIC_CHECKPOINT_FAILURES) continue;
      // A short conversation: whole commits only, no snapshot (test/observability/checkpoint-writes).
      if (d.otel === semconv.OTEL_METRIC_CHECKPOINT_SNAPSHOT_DURATION) continue;
      if (d.otel === semconv.OTEL_METRIC_CHECKPOINT_SNAPSHOT_FAILURES) continue;
      if (d.otel === semconv.OTEL_METRIC_LEASE_CONFLICTS) continue;
      if (d.otel === semconv.OTEL_METRIC_RESPONDER_REINVOCATIONS) continue;
      expect(metric?.unit, d.otel).toBe(d.unit);
      expect(metric?.description, d.otel).toBe(d.help);
      if (d.kind === 'histogram') {
        expect(metric?.histogram?.aggregationTemporality, d.otel).toBe(2); // CUMULATIVE
        continue;
      }
      expect(metric?.sum?.aggregationTemporality, d.otel).toBe(2);
      expect(metric?.sum?.isMonotonic, d.otel).toBe(d.kind === 'counter');
      for (const p of metric?.sum?.dataPoints ?? []) {
        expect(p.asDouble, d.otel).toBeUndefined();
        expect(p.asInt, d.otel).toBeDefined();
      }
    }
  });

  it('delivers the GenAI series with the counts of the run', async () => {
    const { receiver } = await exported();
    const otlp = otlpSeries(receiver.metrics[0] ?? []);
    const agent = (name: string, extra: Record<string, string> = {}) =>
      (
        otlp.get(
          seriesKey('gen_ai.invoke_agent.duration', {
            'gen_ai.agent.name': name,
            'gen_ai.workflow.name': 'counter',
            ...extra,
          }),
        ) as HistogramValue | undefined
      )?.count;
    expect([agent('a'), agent('b'), agent('c'), agent('flaky'), agent('llm')]).toEqual([
      2, 2, 1, 2, 3,
    ]);
    expect(agent('flaky', { 'error.type': 'Outage' })).toBe(1);
    // Two segments of the durable conversation: two workflow spans, two observations.
    const workflow = otlp.get(
      seriesKey('gen_ai.invoke_workflow.duration', { 'gen_ai.workflow.name': 'durable' }),
    ) as HistogramValue;
    expect(workflow.count).toBe(2);
    expect(
      otlp.get(seriesKey('gen_ai.client.inference.usage.input_tokens', LLM_USAGE_ATTRIBUTES)),
    ).toBe(51);
  });
});
