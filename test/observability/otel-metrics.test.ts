/**
 * Issue 42: the metrics through the OpenTelemetry metrics API (the SDK's MeterProvider here),
 * beside prom-client or alone, from one definition table: the same series with the same values,
 * the GenAI conventions' agent, workflow and usage metrics beside them, and the same caps.
 */
import { metrics, ValueType } from '@opentelemetry/api';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { type Message, maxDispatches } from '../../src/index.ts';
import { createConversationTelemetry, semconv } from '../../src/observability/index.ts';
import {
  GEN_AI_METRICS,
  METRIC_DEFINITIONS,
  prometheusNameOf,
} from '../../src/observability/metric-definitions.ts';
import { counterOrchestrator } from '../helpers/desks.ts';
import {
  exercise,
  type HistogramValue,
  LLM_USAGE_ATTRIBUTES,
  manualMeter,
  orchestratorSeries,
  otelSeries,
  promSeries,
  seriesKey,
  seriesOf,
  UNIT_SUFFIXED,
} from '../helpers/otel-metrics.ts';
import { warningsLogger } from '../helpers/tracing.ts';

afterEach(() => metrics.disable());

const input = { sender: 'user', content: 0 };

describe('the OpenTelemetry path beside prom-client', () => {
  it('records every orchestrator series of the registry, with the same values, under its OpenTelemetry name', async () => {
    const registry = new Registry();
    const meter = manualMeter();
    const telemetry = createConversationTelemetry<number, number>({
      registry,
      meterProvider: meter.meterProvider,
    });
    await exercise(telemetry);
    const otel = orchestratorSeries(otelSeries(await meter.collect()));
    const prom = await promSeries(registry);
    expect(prom.size).toBeGreaterThan(20);
    // Sums too: the same values added in the same order.
    expect(otel).toEqual(prom);
    expect(
      otel.get(seriesKey('orchestrator.dispatches', { orchestrator: 'counter', responder: 'a' })),
    ).toBe(2);
    expect(
      otel.get(
        seriesKey('orchestrator.responder.errors', { orchestrator: 'counter', responder: 'flaky' }),
      ),
    ).toBe(1);
    expect(
      otel.get(
        seriesKey('orchestrator.tokens', {
          orchestrator: 'counter',
          responder: 'llm',
          model: 'gpt-4o',
          type: 'input',
        }),
      ),
    ).toBe(51);
  });

  it('declares each instrument as the definition table says: kind, unit, integer or not, buckets', async () => {
    const meter = manualMeter();
    const telemetry = createConversationTelemetry<number, number>({
      meterProvider: meter.meterProvider,
    });
    await exercise(telemetry);
    const collected = await meter.collect();
    const descriptors = new Map(
      collected.scopeMetrics.flatMap((s) => s.metrics.map((m) => [m.descriptor.name, m] as const)),
    );
    expect(collected.scopeMetrics.map((s) => s.scope)).toEqual([
      { name: semconv.TRACER_NAME, version: semconv.TRACER_VERSION, schemaUrl: undefined },
    ]);
    for (const d of [
      ...METRIC_DEFINITIONS.filter(
        (d) =>
          !d.otel.includes('checkpoint') &&
          !d.otel.includes('resumed') &&
          !d.otel.includes('reinvocations') &&
          !d.otel.includes('lease'),
      ),
      ...Object.values(GEN_AI_METRICS),
    ]) {
      const metric = descriptors.get(d.otel);
      if (d.otel === semconv.OTEL_METRIC_RESPONDER_DEADLINES) continue; // no deadline in this run
      expect(metric?.descriptor, d.otel).toMatchObject({
        unit: d.unit,
        valueType: d.values === 'int' ? ValueType.INT : ValueType.DOUBLE,
      });
    }
    expect(descriptors.get('orchestrator.conversations.in_progress')?.dataPointType).toBe(3);
    expect(
      (descriptors.get('orchestrator.conversations.in_progress') as { isMonotonic?: boolean })
        .isMonotonic,
    ).toBe(false);
    expect(
      (descriptors.get('orchestrator.dispatches') as { isMonotonic?: boolean }).isMonotonic,
    ).toBe(true);
  });

  it('maps each OpenTelemetry name back to its Prometheus name by the usual translation', () => {
    for (const d of METRIC_DEFINITIONS) {
      expect(prometheusNameOf(d, true), d.otel).toBe(d.prometheus);
    }
    // The SDK's Prometheus exporter adds no unit suffix: three names differ (docs/telemetry.md).
    expect(
      METRIC_DEFINITIONS.filter((d) => prometheusNameOf(d, false) !== d.prometheus).map((d) => [
        d.prometheus,
        prometheusNameOf(d, false),
      ]),
    ).toEqual(UNIT_SUFFIXED);
  });
});

describe('the GenAI metrics', () => {
  async function run() {
    const registry = new Registry();
    const meter = manualMeter();
    await exercise(
      createConversationTelemetry<number, number>({ registry, meterProvider: meter.meterProvider }),
    );
    return { otel: otelSeries(await meter.collect()), prom: await promSeries(registry) };
  }

  it('records each responder invocation in gen_ai.invoke_agent.duration, the failed one with error.type', async () => {
    const { otel, prom } = await run();
    const agent = seriesOf(otel, semconv.GEN_AI_METRIC_INVOKE_AGENT_DURATION);
    expect([...agent.keys()].sort()).toEqual(
      [
        seriesKey('gen_ai.invoke_agent.duration', {
          'gen_ai.agent.name': 'a',
          'gen_ai.workflow.name': 'counter',
        }),
        seriesKey('gen_ai.invoke_agent.duration', {
          'gen_ai.agent.name': 'b',
          'gen_ai.workflow.name': 'counter',
        }),
        seriesKey('gen_ai.invoke_agent.duration', {
          'gen_ai.agent.name': 'c',
          'gen_ai.workflow.name': 'counter',
        }),
        seriesKey('gen_ai.invoke_agent.duration', {
          'gen_ai.agent.name': 'flaky',
          'gen_ai.workflow.name': 'counter',
        }),
        seriesKey('gen_ai.invoke_agent.duration', {
          'gen_ai.agent.name': 'flaky',
          'gen_ai.workflow.name': 'counter',
          'error.type': 'Outage',
        }),
        seriesKey('gen_ai.invoke_agent.duration', {
          'gen_ai.agent.name': 'llm',
          'gen_ai.workflow.name': 'counter',
        }),
      ].sort(),
    );
    // A successful invocation is its dispatch: the same durations as the dispatch histogram.
    for (const responder of ['a', 'b', 'c', 'flaky', 'llm']) {
      const dispatch = prom.get(
        seriesKey('orchestrator.dispatch.duration', { orchestrator: 'counter', responder }),
      ) as HistogramValue;
      const invocation = agent.get(
        seriesKey('gen_ai.invoke_agent.duration', {
          'gen_ai.agent.name': responder,
          'gen_ai.workflow.name': 'counter',
        }),
      ) as HistogramValue;
      expect(invocation, responder).toEqual(dispatch);
    }
    const failed = agent.get(
      seriesKey('gen_ai.invoke_agent.duration', {
        'gen_ai.agent.name': 'flaky',
        'gen_ai.workflow.name': 'counter',
        'error.type': 'Outage',
      }),
    ) as HistogramValue;
    expect(failed.count).toBe(1);
  });

  it('counts the inference calls of the invocations that reported usage, and the tokens as the usage counters', async () => {
    const { otel } = await run();
    expect(seriesOf(otel, semconv.GEN_AI_METRIC_INVOKE_AGENT_INFERENCE_CALLS)).toEqual(
      new Map([
        [
          seriesKey('gen_ai.invoke_agent.inference_calls', {
            'gen_ai.agent.name': 'llm',
            'gen_ai.workflow.name': 'counter',
          }),
          {
            count: 3,
            sum: 6,
            buckets: { 1: 0, 2: 3, 4: 3, 8: 3, 16: 3, 32: 3, 64: 3, 128: 3, '+Inf': 3 },
          },
        ],
      ]),
    );
    const usage = (name: string) => otel.get(seriesKey(name, LLM_USAGE_ATTRIBUTES));
    expect(usage(semconv.GEN_AI_METRIC_USAGE_INPUT_TOKENS)).toBe(51);
    expect(usage(semconv.GEN_AI_METRIC_USAGE_OUTPUT_TOKENS)).toBe(15);
    expect(usage(semconv.GEN_AI_METRIC_USAGE_CACHE_READ_INPUT_TOKENS)).toBe(12);
    expect(usage(semconv.GEN_AI_METRIC_USAGE_REASONING_OUTPUT_TOKENS)).toBe(3);
  });

  it('records each conversation span in gen_ai.invoke_workflow.duration, the failed one with error.type', async () => {
    const { otel } = await run();
    const workflow = seriesOf(otel, semconv.GEN_AI_METRIC_INVOKE_WORKFLOW_DURATION);
    const count = (attributes: Record<string, string>) =>
      (workflow.get(seriesKey('gen_ai.invoke_workflow.duration', attributes)) as HistogramValue)
        .count;
    expect(workflow.size).toBe(2);
    expect(count({ 'gen_ai.workflow.name': 'counter' })).toBe(2);
    expect(count({ 'gen_ai.workflow.name': 'counter', 'error.type': 'Outage' })).toBe(1);
  });

  it('leaves them out with genAiMetrics: false', async () => {
    const meter = manualMeter();
    await exercise(
      createConversationTelemetry<number, number>({
        meterProvider: meter.meterProvider,
        genAiMetrics: false,
      }),
    );
    const names = new Set(
      [...otelSeries(await meter.collect()).keys()].map((k) => k.slice(0, k.indexOf('{'))),
    );
    expect([...names].filter((n) => n.startsWith('gen_ai.'))).toEqual([]);
    expect(names.has('orchestrator.dispatches')).toBe(true);
  });
});

describe('the OpenTelemetry path alone', () => {
  it('needs no registry, and counts what the run did', async () => {
    const meter = manualMeter();
    await exercise(
      createConversationTelemetry<number, number>({ meterProvider: meter.meterProvider }),
    );
    const otel = otelSeries(await meter.collect());
    expect(
      otel.get(seriesKey('orchestrator.conversations.started', { orchestrator: 'counter' })),
    ).toBe(3);
    expect(
      otel.get(seriesKey('orchestrator.conversations.in_progress', { orchestrator: 'counter' })),
    ).toBe(0);
    expect(otel.get(seriesKey('orchestrator.listener.errors', { orchestrator: 'counter' }))).toBe(
      3,
    );
    expect(
      (
        otel.get(
          seriesKey('orchestrator.dispatch.duration', {
            orchestrator: 'counter',
            responder: 'llm',
          }),
        ) as HistogramValue
      ).count,
    ).toBe(3);
    expect(
      otel.get(
        seriesKey('orchestrator.conversations.ended', { orchestrator: 'counter', reason: 'error' }),
      ),
    ).toBe(1);
  });

  it("takes the global MeterProvider with meterProvider: 'global'", async () => {
    const meter = manualMeter();
    metrics.setGlobalMeterProvider(meter.meterProvider);
    await counterOrchestrator({
      observers: [createConversationTelemetry({ meterProvider: 'global' })],
      termination: maxDispatches(2),
    }).run(input);
    const otel = otelSeries(await meter.collect());
    expect(
      otel.get(seriesKey('orchestrator.dispatches', { orchestrator: 'counter', responder: 'b' })),
    ).toBe(1);
  });

  it('refuses a meterProvider that is not one, naming what came', () => {
    expect(() => createConversationTelemetry({ meterProvider: 42 as never })).toThrow(
      "Expected `meterProvider` to be a MeterProvider (an object with getMeter()) or 'global', got `42` (number)",
    );
    expect(() => createConversationTelemetry({ genAiMetrics: 'yes' as never })).toThrow(
      'Expected `genAiMetrics` to be a boolean',
    );
  });

  it('shares one metric set between the telemetries of one provider, and refuses a second set on it', async () => {
    const meter = manualMeter();
    const first = createConversationTelemetry<number, number>({
      meterProvider: meter.meterProvider,
    });
    const second = createConversationTelemetry<number, number>({
      meterProvider: meter.meterProvider,
    });
    await counterOrchestrator({ observers: [first], termination: maxDispatches(2) }).run(input);
    await counterOrchestrator({ observers: [second], termination: maxDispatches(2) }).run(input);
    const key = seriesKey('orchestrator.conversations.started', { orchestrator: 'counter' });
    expect(otelSeries(await meter.collect()).get(key)).toBe(2);
    const { logger, warnings } = warningsLogger();
    const withRegistry = createConversationTelemetry<number, number>({
      registry: new Registry(),
      meterProvider: meter.meterProvider,
      logger,
    });
    await counterOrchestrator({ observers: [withRegistry], termination: maxDispatches(2) }).run(
      input,
    );
    expect(otelSeries(await meter.collect()).get(key)).toBe(2);
    expect(warnings).toEqual([
      expect.stringContaining('this MeterProvider already records the metrics of another registry'),
    ]);
  });
});

describe('the caps hold on the OpenTelemetry path too', () => {
  const valuesOf = (all: Map<string, unknown>, name: string, attribute: string) =>
    new Set(
      [...seriesOf(all as never, name).keys()].map((k) => {
        const m = new RegExp(`${attribute.replaceAll('.', '\\.')}="((?:[^"\\\\]|\\\\.)*)"`).exec(k);
        return m === null ? undefined : JSON.parse(`"${m[1]}"`);
      }),
    );

  it('counts 300 tenants under 3 orchestrator values and the overflow value, exactly', async () => {
    const meter = manualMeter();
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({
      registry,
      meterProvider: meter.meterProvider,
      maxOrchestrators: 3,
      logger: warningsLogger().logger,
    });
    for (let i = 0; i < 300; i++) {
      await counterOrchestrator({
        name: `tenant-${i}-${'x'.repeat(40)}`,
        observers: [telemetry],
        termination: maxDispatches(2),
      }).run(input);
    }
    const otel = otelSeries(await meter.collect());
    const names = valuesOf(otel, 'orchestrator.dispatches', 'orchestrator');
    expect(names.size).toBe(4);
    expect(names.has(semconv.OVERFLOW_LABEL_VALUE)).toBe(true);
    let dispatches = 0;
    for (const v of seriesOf(otel, 'orchestrator.dispatches').values()) dispatches += v as number;
    expect(dispatches).toBe(600);
    expect(valuesOf(otel, 'gen_ai.invoke_agent.duration', 'gen_ai.workflow.name')).toEqual(names);
    // The registry's series are the same ones.
    const prom = await promSeries(registry);
    expect(seriesOf(otel, 'orchestrator.dispatches')).toEqual(
      seriesOf(prom, 'orchestrator.dispatches'),
    );
  });

  it('keeps responders, models and error classes within their caps, hostile names included', async () => {
    const meter = manualMeter();
    const telemetry = createConversationTelemetry<number, number>({
      meterProvider: meter.meterProvider,
      maxResponders: 5,
      maxModels: 3,
      logger: warningsLogger().logger,
    });
    // 60 responders, each reporting usage under a model of its own and throwing an error of a
    // class of its own (a name with a quote, a newline and braces) on its second message.
    const responders = Array.from({ length: 60 }, (_, i) => ({
      name: `r${i}`,
      respond: (m: Message<number>, _s: unknown, context: { reportUsage(u: object): void }) => {
        context.reportUsage({ inputTokens: 1, outputTokens: 1, model: `model-${i}` });
        if (m.content === 1) {
          const error = new Error('boom');
          error.name = `Bad"Class\n{${i}}`;
          throw error;
        }
        return { sender: `r${i}`, content: m.content + 1 };
      },
    }));
    for (let i = 0; i < 60; i++) {
      await counterOrchestrator({
        observers: [telemetry],
        responders: [responders[i] as never, responders[(i + 1) % 60] as never],
        termination: maxDispatches(3),
      })
        .run(input)
        .catch(() => {});
    }
    const otel = otelSeries(await meter.collect());
    expect(valuesOf(otel, 'orchestrator.dispatches', 'responder').size).toBe(6);
    expect(valuesOf(otel, 'gen_ai.invoke_agent.duration', 'gen_ai.agent.name').size).toBe(6);
    expect(valuesOf(otel, 'orchestrator.tokens', 'model').size).toBe(4);
    expect(
      valuesOf(otel, 'gen_ai.client.inference.usage.input_tokens', 'gen_ai.request.model').size,
    ).toBe(4);
    const types = valuesOf(otel, 'gen_ai.invoke_agent.duration', 'error.type');
    types.delete(undefined);
    expect(types.size).toBe(21);
    expect(types.has('_OTHER')).toBe(true);
    expect(types.has('Bad"Class\n{1}')).toBe(true);
    let tokens = 0;
    for (const v of seriesOf(otel, 'gen_ai.client.inference.usage.input_tokens').values())
      tokens += v as number;
    expect(tokens).toBe(120);
  });
});
