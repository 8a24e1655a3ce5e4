// A chain of follow-up conversations (each started from the previous one's listener): a lookup of
// a key other than the span's must not walk one context per generation, or past ~10,000
// generations `isTracingSuppressed` (called by the SDK for every span) and
// `propagation.getBaggage` would overflow the stack.
import { context, propagation, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { isTracingSuppressed } from '@opentelemetry/core';
import { TracerProvider } from '@opentelemetry/sdk-trace';
import { afterEach, describe, expect, it } from 'vitest';
import { ConversationOrchestrator, maxDispatches, roundRobin } from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { restoreTracing } from '../helpers/tracing.ts';

afterEach(restoreTracing);

describe('a long chain of follow-up conversations', () => {
  it('can still look up context values (baggage, suppression) after 20,000 generations', async () => {
    context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
    const tracer = new TracerProvider().getTracer('chain');
    const generations = 20_000;
    let count = 0;
    const failures: string[] = [];
    await new Promise<void>((done) => {
      const o = new ConversationOrchestrator<number, number>({
        name: 'chain',
        responders: [
          {
            name: 'r',
            respond: (m) => {
              try {
                propagation.getBaggage(context.active());
                isTracingSuppressed(context.active());
              } catch (error) {
                if (failures.length < 3) failures.push(`generation ${count}: ${String(error)}`);
              }
              return { sender: 'r', content: m.content + 1 };
            },
          },
        ],
        turnPolicy: roundRobin(),
        projection: { initial: () => 0, fold: (s, m) => s + m.content },
        termination: maxDispatches(1),
        observers: [createConversationTelemetry<number, number>({ tracer })],
        listener: () => {
          setImmediate(() => {
            if (++count < generations) void o.run({ sender: 'user', content: count });
            else done();
          });
        },
      });
      void o.run({ sender: 'user', content: 0 });
    });
    expect(trace.getActiveSpan()).toBeUndefined();
    expect(failures).toEqual([]);
  });
});
