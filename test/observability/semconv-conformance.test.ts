/**
 * Issue 42: every span, span event, attribute and metric the plugin emits, checked against the
 * GenAI conventions at the pinned commit (vendor/semantic-conventions-genai/model.yaml) the way
 * Weaver's live-check does, with a negative control for each kind of violation; and the
 * migration table of docs/telemetry.md says what the model's removals say.
 */
import { readFileSync } from 'node:fs';
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { createConversationTelemetry, semconv } from '../../src/observability/index.ts';
import { METRIC_DEFINITIONS } from '../../src/observability/metric-definitions.ts';
import {
  exercise,
  exerciseAbortAndDeadline,
  exerciseDurable,
  manualMeter,
} from '../helpers/otel-metrics.ts';
import { type LiveCheckContext, liveCheck, loadModel } from '../helpers/semconv-live-check.ts';
import { memoryTracing, restoreTracing } from '../helpers/tracing.ts';

afterEach(restoreTracing);

const model = loadModel();

const instrumentOf = {
  counter: 'counter',
  gauge: 'updowncounter',
  histogram: 'histogram',
} as const;

/** What the telemetry documents as its own (semconv.ts) and always knows. */
const context: LiveCheckContext = {
  available: new Set([
    semconv.ATTR_GEN_AI_WORKFLOW_NAME,
    semconv.ATTR_GEN_AI_AGENT_NAME,
    semconv.ATTR_GEN_AI_CONVERSATION_ID,
  ]),
  own: new Set(
    Object.entries(semconv)
      .filter(([k]) => k.startsWith('ATTR_'))
      .map(([, v]) => v as string)
      .concat(['desks.spread']),
  ),
  ownMetrics: new Map(
    METRIC_DEFINITIONS.map((d) => [
      d.otel,
      { unit: d.unit, instrument: instrumentOf[d.kind], attributes: d.labels },
    ]),
  ),
  ownEvents: new Set([semconv.EVENT_DISPATCH]),
};

/** The plugin's whole range: responder spans, content, usage, failures, an abort, a deadline, a durable conversation. */
async function emitted() {
  const { exporter, tracer } = memoryTracing();
  const meter = manualMeter();
  const telemetry = createConversationTelemetry<number, number>({
    registry: new Registry(),
    meterProvider: meter.meterProvider,
    tracer,
    responderSpans: true,
    captureContent: true,
    stateAttributes: (s) => ({ 'desks.spread': s.projection }),
  });
  await exercise(telemetry);
  await exerciseAbortAndDeadline(telemetry);
  await exerciseDurable(telemetry, 'conformance-1');
  return { spans: exporter.getFinishedSpans(), metrics: await meter.collect() };
}

describe('the telemetry against the pinned GenAI conventions', () => {
  it('names the pin the docs name', () => {
    const docs = readFileSync('docs/telemetry.md', 'utf8');
    expect(model.pin.repository).toBe('open-telemetry/semantic-conventions-genai');
    expect(docs).toContain(model.pin.commit);
    expect(readFileSync('vendor/semantic-conventions-genai/README.md', 'utf8')).toContain(
      model.pin.commit,
    );
  });

  it('emits no violation: every span, event, attribute and metric as the conventions define it', async () => {
    const report = liveCheck(model, context, await emitted());
    if (process.env.LIVE_CHECK_REPORT) console.log(report);
    expect(report.violations).toEqual([]);
    expect(report.checked.spans).toBeGreaterThan(20);
    expect(report.checked.events).toBeGreaterThan(15);
    expect(report.checked.attributes).toBeGreaterThan(300);
    expect(report.checked.points).toBeGreaterThan(40);
    // What the conventions allow and a reader should know, said once each.
    expect(report.information).toEqual(
      expect.arrayContaining([
        expect.stringContaining('`gen_ai.provider.name` kept for existing users until 0.3.0'),
        expect.stringContaining(
          '`gen_ai.usage.cache_read.input_tokens` kept for existing users until 0.3.0',
        ),
        expect.stringContaining('`gen_ai.provider.name` = "_OTHER", a custom value'),
        expect.stringContaining(
          '`gen_ai.conversation.id` is a registry attribute gen_ai.invoke_workflow.internal does not list',
        ),
      ]),
    );
  });

  it('sees each kind of violation (a negative control)', () => {
    const span = (
      name: string,
      attributes: ReadableSpan['attributes'],
      extra: Partial<ReadableSpan> = {},
    ) =>
      ({
        name,
        kind: SpanKind.INTERNAL,
        attributes,
        events: [],
        status: { code: SpanStatusCode.UNSET },
        ...extra,
      }) as unknown as ReadableSpan;
    const report = liveCheck(model, context, {
      spans: [
        span('invoke_agent a', {
          'gen_ai.operation.name': 'chat',
          'gen_ai.agent.name': 'a',
          'gen_ai.conversation.id': 'c',
          'gen_ai.usage.input_tokens': '3',
          'gen_ai.usage.cache_creation.input_tokens': 1,
          'gen_ai.nonexistent': 1,
          'mystery.attribute': 1,
        }),
        span(
          'invoke_agent b',
          { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.conversation.id': 'c' },
          {
            status: { code: SpanStatusCode.ERROR },
            kind: SpanKind.CLIENT,
          },
        ),
        span('do_something', {}),
      ],
    });
    expect(report.violations).toEqual([
      'span `invoke_agent a`: `gen_ai.operation.name` is "chat", gen_ai.invoke_agent.internal fixes it as "invoke_agent"',
      'span `invoke_agent a`: `gen_ai.usage.input_tokens` is "3" (string), the registry says int',
      'span `invoke_agent a`: `gen_ai.usage.cache_creation.input_tokens` was removed from gen_ai.invoke_agent.internal (#469)',
      "span `invoke_agent a`: `gen_ai.nonexistent` is not in the conventions' registry",
      "span `invoke_agent a`: `mystery.attribute` is in no registry (not the conventions', not documented as the telemetry's own)",
      'span `invoke_agent b`: kind CLIENT, gen_ai.invoke_agent.internal says internal',
      'span `invoke_agent b`: not named invoke_agent {gen_ai.agent.name}',
      'span `invoke_agent b`: `gen_ai.agent.name` is conditionally required (available) and missing',
      'span `invoke_agent b`: `error.type` is conditionally required (error) and missing',
      'span `do_something`: matches no span type of the conventions',
    ]);
  });

  it('sees a metric of the wrong shape, a removed one and an undocumented one (a negative control)', async () => {
    const meter = manualMeter();
    const m = meter.meterProvider.getMeter('bad');
    m.createHistogram('gen_ai.invoke_agent.duration', { unit: 'ms' }).record(1, {
      'gen_ai.agent.name': 'a',
    });
    m.createHistogram('gen_ai.client.token.usage', { unit: '{token}' }).record(1);
    m.createCounter('gen_ai.client.inference.usage.input_tokens', { unit: '{token}' }).add(1, {
      'gen_ai.operation.name': 'chat',
    });
    m.createCounter('orchestrator.mystery').add(1);
    const report = liveCheck(model, context, { spans: [], metrics: await meter.collect() });
    expect(report.violations).toEqual([
      'metric `gen_ai.invoke_agent.duration`: unit ms, the conventions say s',
      'metric `gen_ai.client.token.usage`: removed by the conventions',
      'metric `gen_ai.client.inference.usage.input_tokens`: double values, the conventions say int',
      'metric `gen_ai.client.inference.usage.input_tokens`: required `gen_ai.provider.name` is missing',
      'metric `gen_ai.client.inference.usage.input_tokens`: required `gen_ai.token.modality` is missing',
      "metric `orchestrator.mystery`: is not a metric of the conventions nor documented as the telemetry's own",
    ]);
  });
});

describe('the migration table', () => {
  it("lists the model's removals the telemetry met, each with what this package does", () => {
    const lines = readFileSync('docs/telemetry.md', 'utf8').split('\n');
    const at = lines.indexOf(
      '### Migration: the GenAI conventions after semantic-conventions v1.41.0',
    );
    expect(at).toBeGreaterThan(0);
    const rows: string[][] = [];
    for (const line of lines.slice(at + 1)) {
      if (/^#{1,6} /.test(line)) break;
      if (line.startsWith('|') && !/^\|\s*-/.test(line))
        rows.push(
          line
            .split('|')
            .slice(1, -1)
            .map((c) => c.trim()),
        );
    }
    const names = rows.slice(1).map((r) => (r[0] ?? '').replaceAll('`', ''));
    for (const removed of model.removed) {
      expect(names, removed.name).toContain(removed.name);
      const row = rows.find((r) => (r[0] ?? '').replaceAll('`', '') === removed.name) as string[];
      if (removed.kept_until !== undefined)
        expect(row.join(' '), removed.name).toContain(`until ${removed.kept_until}`);
    }
  });
});
