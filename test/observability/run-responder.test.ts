// ConversationObservation types `runResponder` (like `runConversation`) as a function-valued
// property, not a method, so code composing observers may forward it as a value: the telemetry's
// hooks must work detached from their observation.
import { afterEach, describe, expect, it } from 'vitest';
import type {
  ConversationObservation,
  ConversationObserver,
  ConversationStart,
} from '../../src/core/spi/observer.ts';
import { ConversationOrchestrator, maxDispatches, roundRobin } from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { memoryTracing, restoreTracing, spansNamed } from '../helpers/tracing.ts';

afterEach(restoreTracing);

/** An observer that adds its own end hook and forwards the telemetry's other hooks as values. */
function wrapping(inner: ConversationObserver<number, number>): {
  observer: ConversationObserver<number, number>;
  ended: string[];
} {
  const ended: string[] = [];
  return {
    ended,
    observer: {
      startConversation(start: ConversationStart<number>) {
        const o = inner.startConversation(start) as ConversationObservation<number, number>;
        return {
          // Property-typed hooks in the SPI: forwarded as they are.
          runConversation: o.runConversation,
          runResponder: o.runResponder,
          // Method-typed hooks: called on their observation.
          onDispatch: (info) => o.onDispatch?.call(o, info),
          onResponderError: (i, d, e) => o.onResponderError?.(i, d, e),
          onConversationEnd(end) {
            ended.push(end.ok ? end.result.decision.reason : end.error.reason);
            o.onConversationEnd?.(end);
          },
        };
      },
    },
  };
}

describe('the telemetry’s runResponder forwarded as a value (as its type allows)', () => {
  it('still writes one invoke_agent span per responder call', async () => {
    const { exporter } = memoryTracing();
    const { observer, ended } = wrapping(
      createConversationTelemetry<number, number>({ responderSpans: true }),
    );
    const o = new ConversationOrchestrator<number, number>({
      name: 'wrap',
      responders: [{ name: 'r', respond: async (m) => ({ sender: 'r', content: m.content + 1 }) }],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (s, m) => s + m.content },
      termination: maxDispatches(3),
      observers: [observer],
    });
    const result = await o.run({ sender: 'u', content: 0 });
    expect(result.dispatchCount).toBe(3);
    expect(ended).toEqual(['max_dispatches']);
    expect(spansNamed(exporter, 'invoke_workflow wrap')).toHaveLength(1);
    // A hook that needed `this` to be its observation would throw here (the private-field read):
    // it would be set aside with a warning and no responder span made.
    expect(spansNamed(exporter, 'invoke_agent r')).toHaveLength(3);
  });
});
