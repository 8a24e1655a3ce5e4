import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { type OpenMetricsContentType, Registry } from 'prom-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ConversationOrchestrator,
  type Message,
  maxDispatches,
  roundRobin,
  stopWhen,
  type TerminationPolicy,
} from '../../src/index.ts';
import {
  createConversationSampler,
  createConversationTelemetry,
  createExportTracker,
  DEFAULT_CONVERSATION_DURATION_BUCKETS,
} from '../../src/observability/index.ts';
import { attrs, type OtlpSpan, startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import { type RunningPrometheus, startPrometheus } from '../helpers/prometheus.ts';
import { restoreTracing } from '../helpers/tracing.ts';

/** One exemplar of the exposition: the series line it is on and its trace id. */
interface Exemplar {
  readonly series: string;
  readonly traceId: string;
  readonly time: number;
}

function exemplarsOf(text: string): Exemplar[] {
  const out: Exemplar[] = [];
  for (const line of text.split('\n')) {
    const m = /^(\S+) \d+ # \{trace_id="([0-9a-f]{32})"\} \S+ (\S+)$/.exec(line);
    if (m) out.push({ series: m[1] as string, traceId: m[2] as string, time: Number(m[3]) });
  }
  return out;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `inner`, recording each trace's first batch outcome (`firstOutcome`). */
function recording(inner: OTLPTraceExporter): OTLPTraceExporter {
  const exportTo = inner.export.bind(inner);
  inner.export = (spans, resultCallback) =>
    exportTo(spans, (result) => {
      for (const span of spans) {
        const traceId = span.spanContext().traceId;
        if (!firstOutcome.has(traceId)) firstOutcome.set(traceId, result.code === 0);
      }
      resultCallback(result);
    });
  return inner;
}

let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
let prometheus: RunningPrometheus | undefined;
let server: ReturnType<typeof createServer>;
const registry = new Registry<OpenMetricsContentType>();
registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
const startedAt = Date.now() / 1000;
/** Every scrape the test made, in order. */
const scrapes: string[] = [];
let exported: OtlpSpan[] = [];
/**
 * Each trace's first batch outcome the export tracker heard: true, delivered (its exemplars are
 * written), false, failed (they are let go). The receiver can hold a trace whose batch the
 * exporter still reported failed (an answer it gave up on under load).
 */
const firstOutcome = new Map<string, boolean>();
const traces = new Map<string, string>();

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  server = createServer((_req, res) => {
    void registry.metrics().then((text) => {
      res.writeHead(200, { 'content-type': registry.contentType }).end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  prometheus = await startPrometheus(`127.0.0.1:${port}`, []);

  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const sampler = createConversationSampler({
    next: new BatchSpanProcessor({
      // Exemplars point at delivered traces: the tracker on the registry hears what was.
      exporter: createExportTracker({
        exporter: recording(new OTLPTraceExporter({ url: `${receiver.url}/v1/traces` })),
        registry,
      }),
      scheduledDelayMillis: 50,
    }),
    ratio: 0.2,
    registry,
  });
  const provider = new TracerProvider({ spanProcessors: [sampler] });
  trace.setGlobalTracerProvider(provider);
  const telemetry = createConversationTelemetry({ registry });
  const make = (name: string, fail: boolean, termination: TerminationPolicy<number, number>) =>
    new ConversationOrchestrator<number, number>({
      name: 'mixed',
      responders: ['a', 'b'].map((responder) => ({
        name: responder,
        respond: async (m: Message<number>) => {
          // Durations spread over a few buckets.
          await sleep(m.content % 3);
          if (fail && m.content > 1) throw new Error(`${name} down`);
          return { sender: responder, content: m.content + 1 };
        },
      })),
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (s) => s + 1 },
      termination,
      observers: [telemetry],
    });
  const kinds = [
    make(
      'converged',
      false,
      stopWhen((s) => s.projection > 3, 'converged'),
    ),
    make(
      'converged',
      false,
      stopWhen((s) => s.projection > 6, 'converged'),
    ),
    make('failing', true, maxDispatches(10)),
    make('capped', false, maxDispatches(4)),
  ];
  // 400 conversations in rounds of 20, with scrapes between rounds (exemplar intervals).
  for (let round = 0; round < 20; round++) {
    await Promise.all(
      Array.from({ length: 20 }, (_, j) =>
        provider.getTracer('app').startActiveSpan('request', async (span) => {
          traces.set(span.spanContext().traceId, String(j));
          await kinds[j % kinds.length]?.run({ sender: 'user', content: 0 }).catch(() => {});
          span.end();
        }),
      ),
    );
    scrapes.push(await registry.metrics());
    await sleep(50);
  }
  await sampler.forceFlush();
  // The last round's traces delivered: their exemplars are on this scrape.
  scrapes.push(await registry.metrics());
  exported = receiver.spans;
}, 120_000);

afterAll(async () => {
  await prometheus?.stop();
  await new Promise((resolve) => server.close(resolve));
  await receiver.close();
  restoreTracing();
});

describe('exemplars with the conversation sampler', () => {
  it('dropped some traces and exported others (the checks below have both kinds)', () => {
    const exportedTraces = new Set(exported.map((s) => s.traceId));
    expect(traces.size).toBe(400);
    expect(exportedTraces.size).toBeGreaterThan(100);
    expect(exportedTraces.size).toBeLessThan(400);
  });

  it('never points at a trace the sampler dropped, in any scrape', () => {
    const exportedTraces = new Set(exported.map((s) => s.traceId));
    let seen = 0;
    for (const text of scrapes) {
      for (const e of exemplarsOf(text)) {
        seen++;
        expect(exportedTraces.has(e.traceId), e.series).toBe(true);
      }
    }
    expect(seen).toBeGreaterThan(20);
    // Dispatch-duration buckets carry exemplars too.
    expect(
      exemplarsOf(scrapes.at(-1) as string).some((e) =>
        e.series.startsWith('orchestrator_dispatch_duration_seconds_bucket'),
      ),
    ).toBe(true);
  });

  it('shows per bucket the latest exemplar whose trace was kept', () => {
    // Expected from the exporter's output: per reason and bucket, the exported conversation that
    // ended last.
    const bounds = DEFAULT_CONVERSATION_DURATION_BUCKETS;
    const latest = new Map<string, { traceId: string; end: bigint }>();
    for (const span of exported) {
      if (!span.name.startsWith('invoke_workflow ')) continue;
      // Exemplars point at traces the tracker heard delivered first (a failed batch lets go).
      if (firstOutcome.get(span.traceId) !== true) continue;
      const a = attrs(span.attributes);
      const seconds = (a['conversation.elapsed_ms'] as number) / 1000;
      const b = bounds.findIndex((le) => seconds <= le);
      const le = b < 0 ? '+Inf' : String(bounds[b]);
      const key = `orchestrator_conversation_duration_seconds_bucket{le="${le}",orchestrator="mixed",reason="${a['conversation.end.reason']}"}`;
      const end = BigInt((span as unknown as { endTimeUnixNano: string }).endTimeUnixNano);
      const was = latest.get(key);
      if (was === undefined || end >= was.end) latest.set(key, { traceId: span.traceId, end });
    }
    const shown = new Map(
      exemplarsOf(scrapes.at(-1) as string)
        .filter((e) => e.series.startsWith('orchestrator_conversation_duration_seconds_bucket'))
        .map((e) => [e.series, e.traceId]),
    );
    expect(shown).toEqual(new Map([...latest].map(([k, v]) => [k, v.traceId])));
  });

  it('Prometheus parses the scrapes and stores only exemplars of exported traces', async () => {
    const exportedTraces = new Set(exported.map((s) => s.traceId));
    let stored: string[] = [];
    for (let i = 0; i < 30 && stored.length === 0; i++) {
      const r = await (prometheus as RunningPrometheus).query<
        { exemplars: { labels: { trace_id?: string } }[] }[]
      >('/api/v1/query_exemplars', {
        query:
          'orchestrator_dispatch_duration_seconds_bucket or orchestrator_conversation_duration_seconds_bucket or orchestrator_conversation_dispatches_bucket',
        start: String(startedAt - 60),
        end: String(Date.now() / 1000 + 60),
      });
      expect(r.status).toBe('success');
      stored = r.data.flatMap((s) => s.exemplars.map((e) => e.labels.trace_id ?? ''));
      if (stored.length === 0) await sleep(500);
    }
    expect(stored.length).toBeGreaterThan(0);
    for (const id of stored) expect(exportedTraces.has(id)).toBe(true);
    // The decision counters made it through the scrape too: every (decision, rule) the sampler
    // counts, each series from 0 (ten keep rules, segment among them, and the ratio's drop).
    const decisions = await (prometheus as RunningPrometheus).query<{ result: unknown[] }>(
      '/api/v1/query',
      { query: 'orchestrator_sampler_decisions_total' },
    );
    expect(decisions.data.result).toHaveLength(11);
  });
});
