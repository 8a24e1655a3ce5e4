// The conversation's context (span-context.ts) behaves as the API's own BaseContext (what
// trace.setSpan returns) where a caller can tell: detached functions, Proxies, spreads, and the
// API semantics it must keep.
import {
  type Context,
  context,
  createContextKey,
  propagation,
  ROOT_CONTEXT,
  type Span,
  trace,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { isTracingSuppressed, suppressTracing } from '@opentelemetry/core';
import { afterEach, describe, expect, it } from 'vitest';
import { maxDispatches, type Responder } from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { contextWithSpan, LEAN_SPAN_CONTEXT } from '../../src/observability/span-context.ts';
import { counterOrchestrator } from '../helpers/desks.ts';
import { memoryTracing, restoreTracing, spansNamed } from '../helpers/tracing.ts';

afterEach(restoreTracing);

const KEY = createContextKey('caller value');

/** Both contexts the plugin could hand out for the same parent and span. */
function both() {
  const { tracer } = memoryTracing();
  const parent = ROOT_CONTEXT.setValue(KEY, 'kept');
  const span = tracer.startSpan('conversation');
  return {
    tracer,
    span,
    api: trace.setSpan(parent, span),
    lean: contextWithSpan(parent, span),
  };
}

describe('the context a conversation runs in', () => {
  it('answers its span and the caller’s values, and builds the API’s context on the first write', () => {
    expect(LEAN_SPAN_CONTEXT).toBe(true);
    const { lean: ctx, span, tracer } = both();
    expect(trace.getSpan(ctx)).toBe(span);
    expect(ctx.getValue(KEY)).toBe('kept');
    // Writes answer new contexts and leave this one as it was (contexts are immutable).
    const other = createContextKey('other');
    const written = ctx.setValue(other, 1);
    expect(written.getValue(other)).toBe(1);
    expect(trace.getSpan(written)).toBe(span);
    expect(written.getValue(KEY)).toBe('kept');
    expect(ctx.getValue(other)).toBeUndefined();
    const child = tracer.startSpan('child');
    const nested = trace.setSpan(ctx, child);
    expect(trace.getSpan(nested)).toBe(child);
    expect(trace.getSpan(ctx)).toBe(span);
    expect(trace.getSpan(trace.deleteSpan(ctx))).toBeUndefined();
    expect(ctx.deleteValue(KEY).getValue(KEY)).toBeUndefined();
    expect(ctx.getValue(KEY)).toBe('kept');
    expect(isTracingSuppressed(suppressTracing(ctx))).toBe(true);
    expect(isTracingSuppressed(ctx)).toBe(false);
    child.end();
    span.end();
  });
});

describe('the lean context behaves as the API’s BaseContext', () => {
  // BaseContext's getValue/setValue/deleteValue are per-instance closures that ignore `this`;
  // code that passes them around (a getter handed to a helper, a destructured method) works
  // with every context the API makes.
  it('answers through a detached getValue (as BaseContext does)', () => {
    const { api, lean, span } = both();
    const apiGet = api.getValue;
    expect(apiGet(KEY)).toBe('kept');
    const leanGet = lean.getValue;
    expect(() => leanGet(KEY)).not.toThrow();
    expect(leanGet(Symbol.for('OpenTelemetry Context Key SPAN'))).toBe(span);
  });

  it('answers through a detached setValue (as BaseContext does)', () => {
    const { api, lean } = both();
    const other = createContextKey('other');
    const apiSet = api.setValue;
    expect(apiSet(other, 1).getValue(other)).toBe(1);
    const leanSet = lean.setValue;
    expect(() => leanSet(other, 1)).not.toThrow();
  });

  it('works behind a Proxy (an APM or a test spy wrapping the active context)', () => {
    const { api, lean, span } = both();
    const apiProxy = new Proxy(api, {});
    expect(trace.getSpan(apiProxy)).toBe(span);
    const leanProxy = new Proxy(lean, {});
    expect(() => trace.getSpan(leanProxy)).not.toThrow();
  });

  it('keeps working for an object spread from it ({ ...ctx })', () => {
    const { api, lean, span } = both();
    expect(trace.getSpan({ ...api } as Context)).toBe(span);
    expect(typeof ({ ...lean } as Partial<Context>).getValue).toBe('function');
  });
});

describe('API semantics through the lean context (expected to hold)', () => {
  it('is immutable: writes never show in it, the span is answered after writes and deletes', () => {
    const { lean, span } = both();
    const a = lean.setValue(KEY, 'a');
    const b = lean.setValue(KEY, 'b');
    expect(a.getValue(KEY)).toBe('a');
    expect(b.getValue(KEY)).toBe('b');
    expect(lean.getValue(KEY)).toBe('kept');
    expect(trace.getSpan(a)).toBe(span);
    expect(trace.getSpan(lean.deleteValue(KEY))).toBe(span);
    expect(trace.getSpan(trace.deleteSpan(lean))).toBeUndefined();
    expect(trace.getSpan(lean)).toBe(span);
    const s = suppressTracing(lean);
    expect(isTracingSuppressed(s)).toBe(true);
    expect(isTracingSuppressed(lean)).toBe(false);
  });

  it('under a suppressTracing caller, tracing stays suppressed for what responders start', async () => {
    const { exporter } = memoryTracing();
    const o = orchestratorWith(
      [
        {
          name: 'r',
          respond: (m) => {
            trace.getTracer('x').startActiveSpan('inner', (s) => s.end());
            return { sender: 'r', content: m.content + 1 };
          },
        },
      ],
      { responderSpans: true },
    );
    await context.with(suppressTracing(context.active()), () => o.run({ sender: 'u', content: 0 }));
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  it('propagation.extract inside a responder replaces the span; baggage set inside reads back', async () => {
    memoryTracing();
    const seen: unknown[] = [];
    const o = orchestratorWith(
      [
        {
          name: 'r',
          respond: async (m) => {
            await new Promise((r) => setTimeout(r, 1));
            const bag = propagation.createBaggage({ k: { value: 'v' } });
            const withBag = propagation.setBaggage(context.active(), bag);
            seen.push(propagation.getBaggage(withBag)?.getEntry('k')?.value);
            seen.push(trace.getSpan(withBag) === trace.getActiveSpan());
            return { sender: 'r', content: m.content + 1 };
          },
        },
      ],
      { responderSpans: true },
    );
    await o.run({ sender: 'u', content: 0 });
    expect(seen).toEqual(['v', true, 'v', true]);
  });

  it.each([['AsyncLocalStorageContextManager', () => new AsyncLocalStorageContextManager()]])(
    'with %s, startActiveSpan nests in responders, turn policy and listener see the span',
    async (_, make) => {
      const { exporter } = memoryTracing();
      context.disable();
      context.setGlobalContextManager(make().enable());
      const activeInPolicy: (Span | undefined)[] = [];
      const activeInListener: (Span | undefined)[] = [];
      const o = counterOrchestrator({
        name: 'nest',
        responders: [
          {
            name: 'r',
            respond: async (m) => {
              await trace.getTracer('i').startActiveSpan('outer', async (s) => {
                await new Promise((r) => setTimeout(r, 1));
                trace.getTracer('i').startActiveSpan('inner', (t) => t.end());
                s.end();
              });
              return { sender: 'r', content: m.content + 1 };
            },
          },
        ],
        turnPolicy: (_m, _s, responders) => {
          activeInPolicy.push(trace.getActiveSpan());
          return responders;
        },
        termination: maxDispatches(3),
        listener: () => {
          activeInListener.push(trace.getActiveSpan());
        },
        observers: [createConversationTelemetry<number, number>({ responderSpans: true })],
      });
      await o.run({ sender: 'u', content: 0 });
      const [conv] = spansNamed(exporter, 'invoke_workflow nest');
      const agents = spansNamed(exporter, 'invoke_agent r');
      const outers = spansNamed(exporter, 'outer');
      const inners = spansNamed(exporter, 'inner');
      expect(agents).toHaveLength(3);
      for (const a of agents) expect(a.parentSpanContext?.spanId).toBe(conv?.spanContext().spanId);
      for (let i = 0; i < 3; i++) {
        expect(outers[i]?.parentSpanContext?.spanId).toBe(agents[i]?.spanContext().spanId);
        expect(inners[i]?.parentSpanContext?.spanId).toBe(outers[i]?.spanContext().spanId);
      }
      for (const s of [...activeInPolicy, ...activeInListener])
        expect(s?.spanContext().spanId).toBe(conv?.spanContext().spanId);
      // No leak after run(): the caller's context is back.
      expect(trace.getActiveSpan()).toBeUndefined();
    },
  );

  it('context.bind with the conversation context keeps the span for a callback run later', async () => {
    const { exporter } = memoryTracing();
    let later: (() => Span | undefined) | undefined;
    const o = orchestratorWith([
      {
        name: 'r',
        respond: (m) => {
          later ??= context.bind(context.active(), () => trace.getActiveSpan());
          return { sender: 'r', content: m.content + 1 };
        },
      },
    ]);
    await o.run({ sender: 'u', content: 0 });
    const [conv] = spansNamed(exporter, 'invoke_workflow nest');
    expect(later?.()?.spanContext().spanId).toBe(conv?.spanContext().spanId);
  });
});

function orchestratorWith(
  responders: Responder<number, number>[],
  telemetryOptions: Parameters<typeof createConversationTelemetry<number, number>>[0] = {},
) {
  return counterOrchestrator({
    name: 'nest',
    responders,
    termination: maxDispatches(2),
    observers: [createConversationTelemetry<number, number>(telemetryOptions)],
  });
}

describe('end to end: a responder that wraps the active context in a Proxy', () => {
  it('finds the conversation span through it (as with trace.setSpan’s context)', async () => {
    const { exporter } = memoryTracing();
    const seen: (string | undefined)[] = [];
    const o = orchestratorWith([
      {
        name: 'r',
        respond: (m) => {
          // e.g. a test spy or an APM shim around the context it is handed
          const spied = new Proxy(context.active(), {});
          seen.push(trace.getSpan(spied)?.spanContext().spanId);
          return { sender: 'r', content: m.content + 1 };
        },
      },
    ]);
    await o.run({ sender: 'u', content: 0 });
    const [conv] = spansNamed(exporter, 'invoke_workflow nest');
    expect(seen).toEqual([conv?.spanContext().spanId, conv?.spanContext().spanId]);
  });
});
