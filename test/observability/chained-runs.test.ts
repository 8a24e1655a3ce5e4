// A conversation started from inside another one (the listener schedules the follow-up, a
// responder delegates to a sub-conversation) gets the first one's context as its parent. Like
// trace.setSpan's BaseContext, which copies the parent's values and overwrites the span, the
// conversation's context must not hold the earlier conversation's span, or a chain of follow-ups
// would keep every earlier span alive and a lookup would walk the whole chain.
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import { ConversationOrchestrator, maxDispatches, roundRobin } from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { restoreTracing } from '../helpers/tracing.ts';

afterEach(restoreTracing);

const gc = (globalThis as { gc?: () => void }).gc as () => void;

describe('a chain of follow-up conversations, each scheduled by the previous one’s listener', () => {
  it('does not keep the earlier conversations’ spans alive', async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    // No span processor: nothing but the contexts can hold a span.
    const provider = new TracerProvider();
    const tracer = provider.getTracer('chain');
    const spans: WeakRef<object>[] = [];
    const generations = 200;
    let live = -1;
    await new Promise<void>((done) => {
      const o = new ConversationOrchestrator<number, number>({
        name: 'chain',
        responders: [
          {
            name: 'r',
            respond: async (m) => {
              if (m.sender === 'user') {
                const span = trace.getActiveSpan();
                if (span) spans.push(new WeakRef(span));
              }
              return { sender: 'r', content: m.content + 1 };
            },
          },
        ],
        turnPolicy: roundRobin(),
        projection: { initial: () => 0, fold: (s, m) => s + m.content },
        termination: maxDispatches(2),
        observers: [createConversationTelemetry<number, number>({ tracer })],
        listener: (_s, decision) => {
          if (!decision.terminate) return;
          // The follow-up: scheduled from inside this conversation, as a service would.
          setImmediate(() => {
            if (spans.length < generations) {
              void o.run({ sender: 'user', content: spans.length });
              return;
            }
            gc();
            live = spans.filter((r) => r.deref() !== undefined).length;
            done();
          });
        },
      });
      void o.run({ sender: 'user', content: 0 });
    });
    expect(spans).toHaveLength(generations);
    // As with trace.setSpan, only the last one or two are alive here.
    expect(live).toBeLessThan(10);
  });
});
