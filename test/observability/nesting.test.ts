import { context, propagation, type Span, trace } from '@opentelemetry/api';
import {
  CompositePropagator,
  W3CBaggagePropagator,
  W3CTraceContextPropagator,
} from '@opentelemetry/core';
import type { ReadableSpan } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type ConversationState,
  maxDispatches,
  type OrchestratorOptions,
  type Responder,
} from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { counterOrchestrator } from '../helpers/desks.ts';
import { startOf } from '../helpers/number-conversation.ts';
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
  extra: Partial<OrchestratorOptions<number, number>> = {},
) {
  return counterOrchestrator({
    name: 'nest',
    responders,
    termination: maxDispatches(4),
    observers: [telemetry],
    ...extra,
  });
}

/** Responder `name`, synchronous: it makes `call` (an instrumented call), then answers n + 1. */
function syncCaller(name: string, call: () => void): Responder<number, number> {
  return {
    name,
    respond: (m) => {
      call();
      return { sender: name, content: m.content + 1 };
    },
  };
}

/** Responder `name`, asynchronous: it awaits `call`, then answers the number plus one. */
function asyncCaller(
  name: string,
  call: (state: ConversationState<number, number>) => Promise<void>,
): Responder<number, number> {
  return {
    name,
    respond: async (m, state) => {
      await call(state);
      return { sender: name, content: m.content + 1 };
    },
  };
}

const parentOf = (span: ReadableSpan | undefined) => span?.parentSpanContext?.spanId;
const idOf = (span: ReadableSpan | undefined) => span?.spanContext().spanId;

describe('spans a conversation starts nest under its conversation span (default options)', () => {
  it('for sync responders, the turn policy and the listener', async () => {
    const { exporter } = memoryTracing();
    const o = orchestrator(
      [syncCaller('sync', () => instrumentedCall('model call'))],
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
      ['a', 'b'].map((name) =>
        asyncCaller(name, async () => {
          await new Promise((r) => setTimeout(r, 1));
          await instrumentedAsyncCall(`call by ${name}`);
        }),
      ),
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
      asyncCaller('r', async (state) => {
        await new Promise((r) => setTimeout(r, Math.random() * 3));
        instrumentedCall(`call in ${state.conversationId}`);
      }),
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
    const observation = telemetry.startConversation(startOf('nest', 'r'));
    expect(observation.runConversation).toBeUndefined();
  });
});

describe('with responderSpans: true', () => {
  it('spans a sync or async responder starts are children of its invoke_agent span', async () => {
    const diagnostics = captureDiag();
    const { exporter } = memoryTracing();
    const o = orchestrator(
      [
        syncCaller('sync', () => instrumentedCall('sync call')),
        asyncCaller('async', () => instrumentedAsyncCall('async call')),
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
        asyncCaller('r', async () => {
          await new Promise((r) => setTimeout(r, 1));
          const headers: Record<string, string> = {};
          propagation.inject(context.active(), headers);
          sent.push(headers);
        }),
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
