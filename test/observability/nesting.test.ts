import {
  context,
  createContextKey,
  propagation,
  ROOT_CONTEXT,
  type Span,
  trace,
} from '@opentelemetry/api';
import {
  CompositePropagator,
  isTracingSuppressed,
  suppressTracing,
  W3CBaggagePropagator,
  W3CTraceContextPropagator,
} from '@opentelemetry/core';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import {
  ConversationOrchestrator,
  type Message,
  maxDispatches,
  type Responder,
  roundRobin,
} from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { contextWithSpan, LEAN_SPAN_CONTEXT } from '../../src/observability/span-context.ts';
import { captureDiag, memoryTracing, restoreTracing, spansNamed } from '../helpers/tracing.ts';

afterEach(restoreTracing);

/** Stands in for an instrumented call (an HTTP request to a model): a span on the global tracer. */
function instrumentedCall(name: string): void {
  trace.getTracer('instrumentation').startActiveSpan(name, (span) => span.end());
}

async function instrumentedAsyncCall(name: string): Promise<void> {
  await trace.getTracer('instrumentation').startActiveSpan(name, async (span: Span) => {
    await new Promise((r) => setTimeout(r, 1));
    // Work inside the call nests under it.
    instrumentedCall(`${name} / inner`);
    span.end();
  });
}

function orchestrator(
  responders: Responder<number, number>[],
  telemetry: ReturnType<typeof createConversationTelemetry<number, number>>,
  extra: Partial<ConstructorParameters<typeof ConversationOrchestrator<number, number>>[0]> = {},
) {
  return new ConversationOrchestrator<number, number>({
    name: 'nest',
    responders,
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (s, m) => s + m.content },
    termination: maxDispatches(4),
    observers: [telemetry],
    ...extra,
  });
}

const parentOf = (span: ReadableSpan | undefined) => span?.parentSpanContext?.spanId;
const idOf = (span: ReadableSpan | undefined) => span?.spanContext().spanId;

describe('spans a conversation starts nest under its conversation span (default options)', () => {
  it('for sync responders, the turn policy and the listener', async () => {
    const { exporter } = memoryTracing();
    const o = orchestrator(
      [
        {
          name: 'sync',
          respond: (m) => {
            instrumentedCall('model call');
            return { sender: 'sync', content: m.content + 1 };
          },
        },
      ],
      createConversationTelemetry<number, number>(),
      {
        turnPolicy: (_message, _state, responders) => {
          instrumentedCall('turn decision');
          return [responders[0] as Responder<number, number>];
        },
        listener: () => instrumentedCall('listener work'),
      },
    );
    await o.run({ sender: 'user', content: 0 });
    const [conversation] = spansNamed(exporter, 'invoke_workflow nest');
    for (const name of ['model call', 'turn decision', 'listener work']) {
      const spans = spansNamed(exporter, name);
      expect(spans).toHaveLength(4);
      expect(new Set(spans.map(parentOf))).toEqual(new Set([idOf(conversation)]));
      expect(new Set(spans.map((s) => s.spanContext().traceId))).toEqual(
        new Set([conversation?.spanContext().traceId]),
      );
    }
  });

  it('for async responders, across awaits and timers, with their own active spans nested in turn', async () => {
    const { exporter } = memoryTracing();
    const o = orchestrator(
      ['a', 'b'].map((name) => ({
        name,
        respond: async (m: Message<number>) => {
          await new Promise((r) => setTimeout(r, 1));
          await instrumentedAsyncCall(`call by ${name}`);
          return { sender: name, content: m.content + 1 };
        },
      })),
      createConversationTelemetry<number, number>(),
    );
    await o.run({ sender: 'user', content: 0 });
    const [conversation] = spansNamed(exporter, 'invoke_workflow nest');
    const calls = [...spansNamed(exporter, 'call by a'), ...spansNamed(exporter, 'call by b')];
    expect(calls).toHaveLength(4);
    expect(new Set(calls.map(parentOf))).toEqual(new Set([idOf(conversation)]));
    const inner = [
      ...spansNamed(exporter, 'call by a / inner'),
      ...spansNamed(exporter, 'call by b / inner'),
    ];
    expect(new Set(inner.map(parentOf))).toEqual(new Set(calls.map(idOf)));
  });

  it('keeps concurrent conversations apart: each one’s calls are in its own trace', async () => {
    const { exporter } = memoryTracing();
    const telemetry = createConversationTelemetry<number, number>();
    const responders = [
      {
        name: 'r',
        respond: async (m: Message<number>, state: { conversationId: string }) => {
          await new Promise((r) => setTimeout(r, Math.random() * 3));
          instrumentedCall(`call in ${state.conversationId}`);
          return { sender: 'r', content: m.content + 1 };
        },
      },
    ];
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        orchestrator(responders, telemetry).run(
          { sender: 'user', content: 0 },
          { conversationId: `c${i}` },
        ),
      ),
    );
    for (const conversation of spansNamed(exporter, 'invoke_workflow nest')) {
      const id = conversation.attributes['gen_ai.conversation.id'] as string;
      const calls = spansNamed(exporter, `call in ${id}`);
      expect(calls).toHaveLength(4);
      expect(new Set(calls.map(parentOf))).toEqual(new Set([idOf(conversation)]));
    }
  });

  it('is a child of the span active around run(), and leaves the caller’s context as it was', async () => {
    const { exporter } = memoryTracing();
    const o = orchestrator(
      [{ name: 'r', respond: async (m) => ({ sender: 'r', content: m.content + 1 }) }],
      createConversationTelemetry<number, number>(),
    );
    const request = trace.getTracer('http').startSpan('POST /conversations');
    await context.with(trace.setSpan(context.active(), request), async () => {
      await o.run({ sender: 'user', content: 0 });
      expect(trace.getActiveSpan()).toBe(request);
    });
    request.end();
    expect(trace.getActiveSpan()).toBeUndefined();
    const [conversation] = spansNamed(exporter, 'invoke_workflow nest');
    expect(parentOf(conversation)).toBe(request.spanContext().spanId);
  });

  it('enters no context when there is no tracer provider', async () => {
    trace.disable();
    const telemetry = createConversationTelemetry<number, number>();
    const observation = telemetry.startConversation({
      orchestrator: 'nest',
      conversationId: 'c',
      input: { sender: 'user', content: 0 },
      responders: ['r'],
      startTimeMs: Date.now(),
    });
    expect(observation.runConversation).toBeUndefined();
  });
});

describe('with responderSpans: true', () => {
  it('spans a sync or async responder starts are children of its invoke_agent span', async () => {
    const diagnostics = captureDiag();
    const { exporter } = memoryTracing();
    const o = orchestrator(
      [
        {
          name: 'sync',
          respond: (m) => {
            instrumentedCall('sync call');
            return { sender: 'sync', content: m.content + 1 };
          },
        },
        {
          name: 'async',
          respond: async (m) => {
            await instrumentedAsyncCall('async call');
            return { sender: 'async', content: m.content + 1 };
          },
        },
      ],
      createConversationTelemetry<number, number>({ responderSpans: true }),
    );
    await o.run({ sender: 'user', content: 0 });
    const [conversation] = spansNamed(exporter, 'invoke_workflow nest');
    for (const name of ['sync', 'async']) {
      const agents = spansNamed(exporter, `invoke_agent ${name}`);
      const calls = spansNamed(exporter, `${name} call`);
      expect(agents).toHaveLength(2);
      expect(new Set(agents.map(parentOf))).toEqual(new Set([idOf(conversation)]));
      expect(calls.map(parentOf)).toEqual(agents.map(idOf));
    }
    expect(diagnostics).toEqual([]);
  });
});

describe('the context a conversation runs in', () => {
  it('answers its span and the caller’s values, and builds the API’s context on the first write', () => {
    expect(LEAN_SPAN_CONTEXT).toBe(true);
    const { tracer } = memoryTracing();
    const key = createContextKey('caller value');
    const parent = ROOT_CONTEXT.setValue(key, 'kept');
    const span = tracer.startSpan('conversation');
    const ctx = contextWithSpan(parent, span);
    expect(trace.getSpan(ctx)).toBe(span);
    expect(ctx.getValue(key)).toBe('kept');
    // Writes answer new contexts and leave this one as it was (contexts are immutable).
    const other = createContextKey('other');
    const written = ctx.setValue(other, 1);
    expect(written.getValue(other)).toBe(1);
    expect(trace.getSpan(written)).toBe(span);
    expect(written.getValue(key)).toBe('kept');
    expect(ctx.getValue(other)).toBeUndefined();
    const child = tracer.startSpan('child');
    const nested = trace.setSpan(ctx, child);
    expect(trace.getSpan(nested)).toBe(child);
    expect(trace.getSpan(ctx)).toBe(span);
    expect(trace.getSpan(trace.deleteSpan(ctx))).toBeUndefined();
    expect(ctx.deleteValue(key).getValue(key)).toBeUndefined();
    expect(ctx.getValue(key)).toBe('kept');
    expect(isTracingSuppressed(suppressTracing(ctx))).toBe(true);
    expect(isTracingSuppressed(ctx)).toBe(false);
    child.end();
    span.end();
  });

  it('carries W3C trace context and the caller’s baggage into what a responder sends out', async () => {
    const { exporter } = memoryTracing();
    propagation.setGlobalPropagator(
      new CompositePropagator({
        propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()],
      }),
    );
    const sent: Record<string, string>[] = [];
    const o = orchestrator(
      [
        {
          name: 'r',
          respond: async (m) => {
            await new Promise((r) => setTimeout(r, 1));
            const headers: Record<string, string> = {};
            propagation.inject(context.active(), headers);
            sent.push(headers);
            return { sender: 'r', content: m.content + 1 };
          },
        },
      ],
      createConversationTelemetry<number, number>(),
      { termination: maxDispatches(2) },
    );
    const baggage = propagation.createBaggage({ tenant: { value: 'acme' } });
    await context.with(propagation.setBaggage(context.active(), baggage), () =>
      o.run({ sender: 'user', content: 0 }),
    );
    const [conversation] = spansNamed(exporter, 'invoke_workflow nest');
    const { traceId, spanId } = conversation?.spanContext() ?? {};
    expect(sent).toHaveLength(2);
    for (const headers of sent) {
      expect(headers.traceparent).toBe(`00-${traceId}-${spanId}-01`);
      expect(headers.baggage).toBe('tenant=acme');
    }
  });
});
