/**
 * Exemplars point only at traces the exporter delivered (issue 31; issue 43, finding 12): with
 * the collector unreachable, the telemetry put trace-id exemplars on /metrics for traces of which
 * no span arrived (50 kept conversations, 15 exemplars, with a sampler on the registry and no
 * export tracker). An export tracker wraps the exporter and gates the exemplars on its results;
 * without one on the registry there are none (a keep is not a delivery). Tested against an OTLP
 * endpoint that refuses (a closed port) and a real receiver that accepts.
 */
import { createServer } from 'node:net';
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { type OpenMetricsContentType, Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { ConversationOrchestrator, maxDispatches, roundRobin } from '../../src/index.ts';
import {
  createConversationSampler,
  createConversationTelemetry,
  createExportTracker,
} from '../../src/observability/index.ts';
import { startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import { restoreTracing, warningsLogger } from '../helpers/tracing.ts';

afterEach(restoreTracing);

/** A loopback port nothing listens on: connections to it are refused. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

function exemplarTraceIds(text: string): Set<string> {
  return new Set([...text.matchAll(/# \{trace_id="([0-9a-f]{32})"\}/g)].map((m) => m[1] as string));
}

/** Runs 20 conversations (all kept by the sampler, ratio 1) exporting to `url`; returns what the metrics and tracker say. */
async function run(url: string) {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const registry = new Registry<OpenMetricsContentType>();
  registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  const tracker = createExportTracker({
    exporter: new OTLPTraceExporter({ url, timeoutMillis: 2000 }),
    registry,
  });
  const sampler = createConversationSampler({
    next: new BatchSpanProcessor({ exporter: tracker, scheduledDelayMillis: 50 }),
    registry,
    ratio: 1,
  });
  const provider = new TracerProvider({ spanProcessors: [sampler] });
  trace.setGlobalTracerProvider(provider);
  const orchestrator = new ConversationOrchestrator<number, number>({
    name: 'desks',
    responders: ['a', 'b'].map((name) => ({
      name,
      respond: (m: { content: number }) => ({ sender: name, content: m.content + 1 }),
    })),
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (s) => s + 1 },
    termination: maxDispatches(4),
    observers: [createConversationTelemetry({ registry })],
  });
  const traceIds: string[] = [];
  for (let i = 0; i < 20; i++) {
    const result = await provider.getTracer('app').startActiveSpan('request', async (span) => {
      traceIds.push(span.spanContext().traceId);
      const r = await orchestrator.run({ sender: 'user', content: 0 });
      span.end();
      return r;
    });
    expect(result.dispatchCount).toBe(4);
  }
  const beforeExport = exemplarTraceIds(await registry.metrics());
  // Waiting for the last trace's delivery, registered before its batch goes out.
  const last: boolean[] = [];
  tracker.whenExported(traceIds[traceIds.length - 1] as string, (d) => last.push(d));
  // A refused export rejects the flush: the result is what the tracker heard.
  await sampler.forceFlush().catch(() => {});
  const afterExport = exemplarTraceIds(await registry.metrics());
  await provider.shutdown().catch(() => {});
  return { traceIds, beforeExport, afterExport, tracker, last };
}

describe('exemplars and exports', () => {
  it('writes no exemplar while the collector refuses every export', async () => {
    const { traceIds, beforeExport, afterExport, tracker } = await run(
      `http://127.0.0.1:${await closedPort()}/v1/traces`,
    );
    expect(beforeExport).toEqual(new Set());
    // Before the tracker, every one of these kept traces had exemplars on /metrics.
    expect(afterExport).toEqual(new Set());
    expect(traceIds.filter((id) => tracker.exported(id))).toEqual([]);
  });

  it('writes exemplars of delivered traces only, once their batch is delivered', async () => {
    const receiver = await startOtlpReceiver();
    try {
      const { traceIds, beforeExport, afterExport, tracker } = await run(
        `${receiver.url}/v1/traces`,
      );
      const delivered = new Set(receiver.spans.map((s) => s.traceId));
      expect(delivered).toEqual(new Set(traceIds));
      expect(traceIds.filter((id) => tracker.exported(id))).toEqual(traceIds);
      // Every exemplar is a delivered trace; those written before the flush too.
      for (const id of beforeExport) expect(delivered.has(id)).toBe(true);
      expect(afterExport.size).toBeGreaterThan(0);
      for (const id of afterExport) expect(delivered.has(id)).toBe(true);
    } finally {
      await receiver.close();
    }
  });

  it.each([
    ['a sampler on the registry and no export tracker', 'sampler'],
    ['an export tracker not given the registry', 'tracker without registry'],
    ['neither sampler nor tracker', 'telemetry'],
  ] as const)(
    'writes no exemplar with %s, the collector refusing, and says why once',
    async (_, setup) => {
      context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
      const registry = new Registry<OpenMetricsContentType>();
      registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
      const otlp = new OTLPTraceExporter({
        url: `http://127.0.0.1:${await closedPort()}/v1/traces`,
        timeoutMillis: 2000,
      });
      const exporter =
        setup === 'tracker without registry' ? createExportTracker({ exporter: otlp }) : otlp;
      const batch = new BatchSpanProcessor({ exporter, scheduledDelayMillis: 20 });
      // Every trace kept (ratio 1), or, without a sampler, every trace sampled and exported.
      const processor =
        setup === 'telemetry'
          ? batch
          : createConversationSampler({ next: batch, registry, ratio: 1 });
      const provider = new TracerProvider({ spanProcessors: [processor] });
      trace.setGlobalTracerProvider(provider);
      const { logger, warnings } = warningsLogger();
      const orchestrator = new ConversationOrchestrator<number, number>({
        name: 'desks',
        responders: ['a', 'b'].map((name) => ({
          name,
          respond: async (m: { content: number }) => {
            await new Promise((resolve) => setTimeout(resolve, m.content % 3));
            return { sender: name, content: m.content + 1 };
          },
        })),
        turnPolicy: roundRobin(),
        projection: { initial: () => 0, fold: (s) => s + 1 },
        termination: maxDispatches(4),
        observers: [createConversationTelemetry({ registry, logger })],
      });
      const scrapes: string[] = [];
      for (let i = 0; i < 50; i++) {
        await orchestrator.run({ sender: 'user', content: i });
        if (i % 10 === 9) scrapes.push(await registry.metrics());
      }
      await processor.forceFlush().catch(() => {});
      scrapes.push(await registry.metrics());
      await provider.shutdown().catch(() => {});
      expect(scrapes.map((text) => exemplarTraceIds(text).size)).toEqual([0, 0, 0, 0, 0, 0]);
      // The histograms are there, without exemplars.
      expect(scrapes.at(-1)).toContain(
        'orchestrator_conversation_duration_seconds_count{orchestrator="desks",reason="max_dispatches"} 50',
      );
      expect(warnings).toEqual([
        'conversation-orchestrator: no exemplars on this registry: they point only at traces the exporter delivered, and no export tracker says which were; wrap the exporter with createExportTracker({ exporter, registry })',
      ]);
    },
  );

  it('calls whenExported back once: false when its batch is refused, true when delivered (at once after)', async () => {
    const refused = await run(`http://127.0.0.1:${await closedPort()}/v1/traces`);
    expect(refused.last).toEqual([false]);
    const receiver = await startOtlpReceiver();
    try {
      const accepted = await run(`${receiver.url}/v1/traces`);
      expect(accepted.last).toEqual([true]);
      const later: boolean[] = [];
      accepted.tracker.whenExported(accepted.traceIds[0] as string, (d) => later.push(d));
      expect(later).toEqual([true]);
    } finally {
      await receiver.close();
    }
  });
});
