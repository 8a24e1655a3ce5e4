import { readFileSync } from 'node:fs';
import { SimpleSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createMemoryStore,
  type Message,
  maxDispatches,
  suspend,
  tokenBudget,
} from '../../src/index.ts';
import {
  createConversationSampler,
  createConversationTelemetry,
  semconv,
} from '../../src/observability/index.ts';
import { GEN_AI_METRICS, METRIC_DEFINITIONS } from '../../src/observability/metric-definitions.ts';
import { counterOrchestrator } from '../helpers/desks.ts';
import { exerciseAbortAndDeadline } from '../helpers/otel-metrics.ts';
import { docsTableNames } from '../helpers/readme.ts';
import { memoryTracing, restoreTracing } from '../helpers/tracing.ts';

afterEach(restoreTracing);

/** The telemetry reference, where the tables of public names live. */
const PAGE = 'docs/telemetry.md';
const documented = (heading: string) => docsTableNames(heading, PAGE);

const constants = (prefix: string) =>
  Object.entries(semconv)
    .filter(([k]) => k.startsWith(prefix))
    .map(([, v]) => v as string)
    .sort();

/** Runs conversations that exercise every metric and every attribute. */
async function exercise() {
  const registry = new Registry();
  const { exporter, tracer } = memoryTracing();
  const telemetry = createConversationTelemetry<number, number>({
    registry,
    tracer,
    responderSpans: true,
    captureContent: true,
  });
  const flaky = {
    name: 'flaky',
    respond: (m: Message<number>) => {
      if (m.content === 2) throw new Error('down');
      return { sender: 'flaky', content: m.content + 1 };
    },
  };
  await counterOrchestrator({ observers: [telemetry], termination: maxDispatches(3) }).run({
    sender: 'u',
    content: 0,
  });
  await counterOrchestrator({
    observers: [telemetry],
    responders: [flaky],
    listener: () => {
      throw new Error('listener');
    },
    onListenerError: () => {},
  })
    .run({ sender: 'u', content: 0 })
    .catch(() => {});
  // A responder that declares its provider.
  await counterOrchestrator({
    observers: [telemetry],
    termination: maxDispatches(1),
    responders: [
      { name: 'gpt', provider: 'openai', respond: () => ({ sender: 'gpt', content: 1 }) },
    ],
  }).run({ sender: 'u', content: 0 });
  // A responder that reports every kind of token usage, with its model; a token budget's
  // decision explains itself (policy, observed, limit).
  await counterOrchestrator({
    observers: [telemetry],
    termination: tokenBudget({ total: 1 }),
    responders: [
      {
        name: 'llm',
        respond: (_m, _s, context) => {
          context.reportUsage({
            inputTokens: 10,
            outputTokens: 2,
            cacheReadInputTokens: 4,
            reasoningOutputTokens: 1,
            model: 'gpt-4o',
          });
          return { sender: 'llm', content: 1 };
        },
      },
    ],
  }).run({ sender: 'u', content: 0 });
  // An aborted conversation (its reason's class) and a responder past the dispatch deadline.
  await exerciseAbortAndDeadline(telemetry);
  // Through a conversation sampler on the same registry that keeps everything (the rule goes on
  // the span) and buffers one span per trace (the responder spans past it are lost, and counted).
  const sampled = new TracerProvider({
    spanProcessors: [
      createConversationSampler({
        next: new SimpleSpanProcessor({ exporter: exporter }),
        registry,
        ratio: 1,
        maxSpansPerTrace: 1,
      }),
    ],
  });
  await counterOrchestrator({
    observers: [
      createConversationTelemetry({ registry, tracerProvider: sampled, responderSpans: true }),
    ],
    termination: maxDispatches(3),
  }).run({ sender: 'u', content: 0 });
  // A durable conversation (on a registry of its own: the durable metrics have their table): it
  // suspends, resumes, and its holder stalls past its lease, so another run takes it over (a
  // crash, as far as the store can tell).
  let clock = Date.now();
  let stalled = true;
  let asked = false;
  const durable = counterOrchestrator({
    name: 'durable',
    store: createMemoryStore({ now: () => clock }),
    observers: [createConversationTelemetry({ registry: new Registry(), tracer })],
    responders: [
      {
        name: 'd',
        respond: (m) => {
          if (m.content === 1 && !asked) {
            asked = true;
            return suspend('ok?');
          }
          if (m.content === 3 && stalled) return new Promise<never>(() => {});
          return { sender: 'd', content: m.content + 1 };
        },
      },
    ],
    projection: { initial: () => 0, fold: (_n, m) => m.content },
    termination: maxDispatches(5),
  });
  await durable.run({ sender: 'u', content: 0 }, { conversationId: 'durable-1' });
  const stalledRun = durable.resume('durable-1', { input: { sender: 'p', content: 1 } });
  stalledRun.catch(() => {});
  // Its dispatches 2 and 3 are committed, then it waits on a call that never answers.
  await new Promise((r) => setTimeout(r, 50));
  stalled = false;
  clock += 3_600_000;
  await durable.resume('durable-1');
  await stalledRun.catch(() => {});
  return { registry, spans: exporter.getFinishedSpans() };
}

describe('telemetry names: docs/telemetry.md, code and exposition agree', () => {
  it("the metrics tables list exactly the METRIC_* constants, and BullMQ's table the BULLMQ_METRIC_* ones", () => {
    expect(
      [
        ...documented('## Metrics'),
        ...documented('## Metrics of durable conversations and fleets'),
      ].sort(),
    ).toEqual(constants('METRIC_'));
    expect([...documented("### BullMQ's own queue metrics")].sort()).toEqual(
      constants('BULLMQ_METRIC_'),
    );
  });

  it('the registry exposes exactly the metrics documented for a registry without a store', async () => {
    const { registry } = await exercise();
    const exposed = (await registry.getMetricsAsJSON()).map((m) => m.name).sort();
    expect(exposed).toEqual([...documented('## Metrics')].sort());
  });

  it('names the durable metrics as the issue fixes them', () => {
    expect(documented('## Metrics of durable conversations and fleets').slice(0, 10)).toEqual([
      'orchestrator_responder_reinvocations_total',
      'orchestrator_conversations_resumed_total',
      'orchestrator_checkpoint_duration_seconds',
      'orchestrator_checkpoint_failures_total',
      'orchestrator_checkpoint_size_bytes',
      'orchestrator_checkpoint_snapshot_duration_seconds',
      'orchestrator_checkpoint_snapshot_failures_total',
      'orchestrator_lease_conflicts_total',
      'orchestrator_conversations_suspended',
      'orchestrator_oldest_suspended_seconds',
    ]);
  });

  it('the attributes table lists exactly the ATTR_* constants', () => {
    expect([...documented('## Attributes')].sort()).toEqual(constants('ATTR_'));
  });

  it('the events and spans tables match EVENT_* and SPAN_* constants', () => {
    expect(documented('## Span events')).toEqual(constants('EVENT_'));
    const spans = documented('## Spans').map((s) => s.replace(/\{\w+\}$/, ''));
    expect(spans.sort()).toEqual(constants('SPAN_'));
  });

  it('the tracer is named and versioned after the package, as package.json says', async () => {
    const { name, version } = JSON.parse(readFileSync('package.json', 'utf8')) as {
      name: string;
      version: string;
    };
    const { exporter, provider } = memoryTracing();
    await counterOrchestrator({
      observers: [createConversationTelemetry({ tracerProvider: provider })],
    }).run({ sender: 'u', content: 0 });
    const [span] = exporter.getFinishedSpans();
    expect(span?.instrumentationScope).toEqual({ name, version, schemaUrl: undefined });
  });

  it('every attribute the plugin emits is documented, and every documented one is emitted', async () => {
    const { spans } = await exercise();
    const attributes = new Set(documented('## Attributes'));
    const emitted = new Set<string>();
    for (const span of spans) {
      for (const key of Object.keys(span.attributes)) emitted.add(key);
      for (const event of span.events) {
        if (event.name === 'exception') continue; // the SDK's own exception event
        for (const key of Object.keys(event.attributes ?? {})) emitted.add(key);
      }
    }
    expect([...emitted].sort()).toEqual([...attributes].sort());
  });
});

/** The rows (cells, backticks stripped) of the table under `heading` in docs/telemetry.md. */
function tableRows(heading: string): string[][] {
  const lines = readFileSync(PAGE, 'utf8').split('\n');
  const at = lines.findIndex((l) => l.replace(/^#+\s*/, '') === heading.replace(/^#+\s*/, ''));
  const rows: string[][] = [];
  for (const line of lines.slice(at + 1)) {
    if (/^#{1,6} /.test(line)) break;
    if (!line.startsWith('|') || /^\|\s*-/.test(line)) continue;
    rows.push(
      line
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim().replaceAll('`', '')),
    );
  }
  return rows.slice(1); // the header
}

describe('OpenTelemetry names: docs/telemetry.md, the definition table and semconv agree', () => {
  it('the OpenTelemetry table lists every definition: its name, instrument, unit and Prometheus name', () => {
    const rows = tableRows('## OpenTelemetry metrics');
    const instrument = {
      counter: 'observable counter',
      gauge: 'observable up-down counter',
      histogram: 'histogram',
    };
    expect(rows).toEqual(
      METRIC_DEFINITIONS.map((d) => [d.otel, instrument[d.kind], d.unit, d.prometheus]),
    );
    expect(rows.map((r) => r[0]).sort()).toEqual(constants('OTEL_METRIC_'));
  });

  it('defines every metric of the orchestrator and of durable conversations on both paths', () => {
    const families = [
      ...documented('## Metrics'),
      ...documented('## Metrics of durable conversations and fleets'),
    ].filter((name) => !/sampler|suspended|unleased|store_read|store_up|queue/.test(name));
    expect(METRIC_DEFINITIONS.map((d) => d.prometheus).sort()).toEqual(families.sort());
  });

  it('the GenAI table lists the GenAI metrics with their instruments and units', () => {
    const rows = tableRows('### GenAI metrics');
    expect(rows.map((r) => r.slice(0, 3))).toEqual(
      Object.values(GEN_AI_METRICS).map((d) => [d.otel, d.kind, d.unit]),
    );
    expect(rows.map((r) => r[0]).sort()).toEqual(constants('GEN_AI_METRIC_'));
  });
});
