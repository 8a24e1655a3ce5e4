import { context, DiagLogLevel, diag, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { type Message, maxDispatches } from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { counterOrchestrator, desksOrchestrator, spread } from '../helpers/desks.ts';
import { attrs, startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import { restoreTracing } from '../helpers/tracing.ts';

afterEach(restoreTracing);

/** A real OTLP/HTTP receiver and a tracer provider batching to it. */
async function batchedToReceiver() {
  const receiver = await startOtlpReceiver();
  const provider = new TracerProvider({
    spanProcessors: [
      new BatchSpanProcessor({
        exporter: new OTLPTraceExporter({ url: `${receiver.url}/v1/traces` }),
      }),
    ],
  });
  /** Flushes and shuts the provider down, then closes the receiver: it holds all it gets. */
  const deliver = async () => {
    await provider.forceFlush();
    await provider.shutdown();
    await receiver.close();
  };
  return { receiver, provider, deliver };
}

describe('OTLP/HTTP export, end to end', () => {
  it('delivers the conversation span and its dispatch events to a real HTTP receiver', async () => {
    const { receiver, provider, deliver } = await batchedToReceiver();
    const telemetry = createConversationTelemetry({
      tracer: provider.getTracer('e2e'),
      stateAttributes: (s) => ({ 'desks.spread': spread(s.projection as never) }),
    });
    await desksOrchestrator({ observers: [telemetry] }).run(
      { sender: 'user', content: 0 },
      { conversationId: 'otlp-1' },
    );
    await deliver();

    const span = receiver.spans.find((s) => s.name === 'invoke_workflow desks');
    expect(span).toBeDefined();
    expect(span?.kind).toBe(1); // SPAN_KIND_INTERNAL
    // STATUS_CODE_UNSET: the JSON encoding leaves the default out.
    expect(span?.status.code ?? 0).toBe(0);
    expect(attrs(span?.attributes)).toMatchObject({
      'gen_ai.operation.name': 'invoke_workflow',
      'gen_ai.conversation.id': 'otlp-1',
      'conversation.dispatch_count': 24,
      'conversation.end.reason': 'converged',
      'conversation.dispatch_events.dropped': 0,
    });
    expect(span?.events).toHaveLength(24);
    const last = attrs(span?.events[23]?.attributes);
    expect(last).toMatchObject({
      'conversation.dispatch.count': 24,
      'gen_ai.agent.name': 'c',
      'conversation.decision.terminate': true,
      'conversation.decision.reason': 'converged',
    });
    expect(last['desks.spread']).toBeLessThanOrEqual(0.01);
  });

  it('delivers the tokens: GenAI usage on invoke_agent spans, per dispatch and in total on the conversation', async () => {
    const { receiver, provider, deliver } = await batchedToReceiver();
    const telemetry = createConversationTelemetry<number, number>({
      tracer: provider.getTracer('e2e'),
      responderSpans: true,
    });
    const model = (name: string, provider?: string) => ({
      name,
      ...(provider === undefined ? {} : { provider }),
      respond: async (
        m: Message<number>,
        _s: unknown,
        context: { reportUsage(u: object): void },
      ) => {
        context.reportUsage({ inputTokens: 120, outputTokens: 30, model: 'gpt-4o-mini' });
        context.reportUsage({
          inputTokens: 80,
          cacheReadInputTokens: 64,
          reasoningOutputTokens: 9,
        });
        return { sender: name, content: m.content + 1 };
      },
    });
    await counterOrchestrator({
      observers: [telemetry],
      responders: [model('writer', 'openai'), model('critic')],
      termination: maxDispatches(2),
    }).run({ sender: 'user', content: 0 });
    await deliver();

    const writer = receiver.spans.find((s) => s.name === 'invoke_agent writer');
    expect(attrs(writer?.attributes)).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': 'writer',
      'gen_ai.provider.name': 'openai',
      'gen_ai.request.model': 'gpt-4o-mini',
      'gen_ai.usage.input_tokens': 200,
      'gen_ai.usage.output_tokens': 30,
      'gen_ai.usage.cache_read.input_tokens': 64,
      'gen_ai.usage.reasoning.output_tokens': 9,
    });
    const critic = receiver.spans.find((s) => s.name === 'invoke_agent critic');
    expect(attrs(critic?.attributes)['gen_ai.provider.name']).toBe('_OTHER');
    const conversation = receiver.spans.find((s) => s.name === 'invoke_workflow counter');
    expect(attrs(conversation?.attributes)).toMatchObject({
      'conversation.usage.input_tokens': 400,
      'conversation.usage.output_tokens': 60,
    });
    expect(
      conversation?.events.map((e) => [
        attrs(e.attributes)['conversation.dispatch.usage.input_tokens'],
        attrs(e.attributes)['conversation.dispatch.usage.output_tokens'],
      ]),
    ).toEqual([
      [200, 30],
      [200, 30],
    ]);
  });

  it('delivers a responder’s own spans as descendants of the conversation span (one trace in Jaeger)', async () => {
    const { receiver, provider, deliver } = await batchedToReceiver();
    // As NodeSDK sets things up: a global provider and the AsyncLocalStorage context manager.
    trace.setGlobalTracerProvider(provider);
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    const o = counterOrchestrator({
      observers: [createConversationTelemetry<number, number>()],
      termination: maxDispatches(2),
      responders: [
        {
          name: 'llm',
          respond: async (m: Message<number>) =>
            trace.getTracer('openai-instrumentation').startActiveSpan('chat gpt', async (span) => {
              await new Promise((r) => setTimeout(r, 1));
              span.end();
              return { sender: 'llm', content: m.content + 1 };
            }),
        },
      ],
    });
    await o.run({ sender: 'user', content: 0 });
    await deliver();
    const conversation = receiver.spans.find((s) => s.name === 'invoke_workflow counter');
    const calls = receiver.spans.filter((s) => s.name === 'chat gpt');
    expect(calls).toHaveLength(2);
    for (const call of calls) {
      expect(call.traceId).toBe(conversation?.traceId);
      expect(call.parentSpanId).toBe(conversation?.spanId);
    }
  });

  it('leaves conversations unaffected and memory bounded when the endpoint is down', async () => {
    const receiver = await startOtlpReceiver();
    await receiver.close(); // nothing listens on this port any more
    diag.setLogger(
      { error() {}, warn() {}, info() {}, debug() {}, verbose() {} },
      DiagLogLevel.NONE,
    );
    const provider = new TracerProvider({
      spanProcessors: [
        new BatchSpanProcessor({
          exporter: new OTLPTraceExporter({ url: `${receiver.url}/v1/traces`, timeoutMillis: 200 }),
          maxQueueSize: 2048,
          scheduledDelayMillis: 50,
        }),
      ],
    });
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({
      tracer: provider.getTracer('down'),
      registry,
    });
    const o = counterOrchestrator({ observers: [telemetry], termination: maxDispatches(20) });
    const gc = (globalThis as { gc?: () => void }).gc;
    const heap: number[] = [];
    let completed = 0;
    for (let round = 0; round < 5; round++) {
      const results = await Promise.all(
        Array.from({ length: 2000 }, () => o.run({ sender: 'user', content: 0 })),
      );
      completed += results.filter((r) => r.dispatchCount === 20).length;
      gc?.();
      heap.push(process.memoryUsage().heapUsed);
    }
    expect(completed).toBe(10_000);
    // The batch processor drops what it cannot queue; the heap does not grow with the backlog.
    expect((heap[4] ?? 0) - (heap[1] ?? 0)).toBeLessThan(20 * 1024 * 1024);
    expect(await registry.metrics()).toContain(
      'orchestrator_conversations_ended_total{orchestrator="counter",reason="max_dispatches"} 10000',
    );
    await provider.shutdown().catch(() => {});
    diag.disable();
  });
});
