/**
 * Type-level checks, enforced by `tsc` (npm test type-checks tests): the telemetry carries the
 * conversation's state and content types, and accepts any prom-client registry.
 */
import { type OpenMetricsContentType, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ConversationOrchestrator, maxDispatches, roundRobin } from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';

type Quotes = Record<string, number>;

describe('the telemetry’s types', () => {
  it('types stateAttributes’ state from the type arguments, and fits an orchestrator of that state', async () => {
    const registry = new Registry<OpenMetricsContentType>();
    registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
    const telemetry = createConversationTelemetry<Quotes, number>({
      registry,
      stateAttributes: (state) => ({
        'desks.london': state.projection.london ?? 0,
        'desks.last': state.lastMessage.content,
      }),
    });
    createConversationTelemetry<Quotes, number>({
      // @ts-expect-error: the projection is Quotes, whose values are numbers, not strings.
      stateAttributes: (state) => ({ 'desks.bad': state.projection.london?.toUpperCase() }),
    });
    const orchestrator = new ConversationOrchestrator<Quotes, number>({
      name: 'typed',
      responders: [{ name: 'london', respond: (m) => ({ sender: 'london', content: m.content }) }],
      turnPolicy: roundRobin(),
      projection: { initial: () => ({ london: 1 }), fold: (q) => q },
      termination: maxDispatches(1),
      observers: [telemetry],
    });
    const result = await orchestrator.run({ sender: 'user', content: 0 });
    expect(result.dispatchCount).toBe(1);
  });

  it('rejects a registry that is not one at compile time too', () => {
    // @ts-expect-error: a plain object is not a registry.
    expect(() => createConversationTelemetry({ registry: { metrics: 1 } })).toThrow(
      'Expected `registry` to be a prom-client Registry',
    );
  });
});
