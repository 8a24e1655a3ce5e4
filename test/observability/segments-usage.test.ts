/**
 * Tokens across the segments of a durable conversation: the conversation-tokens histogram observes
 * a conversation that reported usage in any segment, read from the core's usage ledger (restored
 * from the checkpoint), not from a flag of the telemetry's own; the telemetry's checkpoint data
 * carries only the trace context, `accounted` and a sampler's keep.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ConversationOrchestrator, createMemoryStore } from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { counter, plusOne } from '../helpers/counter.ts';
import { expectLines } from '../helpers/exposition.ts';

/**
 * Eight dispatches around a suspension: with `reports`, `a` reports 10 in and 5 out tokens at its
 * first invocation (the first segment) and never again; `b` suspends once, on message 3.
 */
function orchestrator(registry: Registry, reports: boolean) {
  const telemetry = createConversationTelemetry<number, number>({ registry });
  return {
    telemetry,
    o: new ConversationOrchestrator<number, number>(
      counter('tokens', {
        store: createMemoryStore(),
        observers: [telemetry],
        step: (who, m, _state, context) => {
          if (who === 'a' && reports && m.content < 2) {
            context.reportUsage({ inputTokens: 10, outputTokens: 5 });
          }
          return plusOne(m);
        },
      }),
    ),
  };
}

describe('tokens of a durable conversation across segments', () => {
  it('observe orchestrator_conversation_tokens once, at the end, when only an earlier segment reported', async () => {
    const registry = new Registry();
    const { o } = orchestrator(registry, true);
    const waiting = await o.run({ sender: 'user', content: 0 }, { conversationId: 't1' });
    expect(waiting.suspended).toEqual({ responder: 'b', payload: { question: 'go on?' } });
    const done = await o.resume('t1', { input: { sender: 'person', content: 3 } });
    expect(done.usage.inputTokens).toBe(10);
    expect(done.usage.outputTokens).toBe(5);
    expectLines(await registry.metrics(), [
      'orchestrator_conversation_tokens_count{orchestrator="tokens",reason="max_dispatches"} 1',
      'orchestrator_conversation_tokens_sum{orchestrator="tokens",reason="max_dispatches"} 15',
    ]);
  });

  it('observe no orchestrator_conversation_tokens when no segment reported', async () => {
    const registry = new Registry();
    const { o } = orchestrator(registry, false);
    await o.run({ sender: 'user', content: 0 }, { conversationId: 't2' });
    await o.resume('t2', { input: { sender: 'person', content: 3 } });
    const text = await registry.metrics();
    expect(text).toContain(
      'orchestrator_conversations_ended_total{orchestrator="tokens",reason="max_dispatches"} 1',
    );
    expect(text).not.toContain('orchestrator_conversation_tokens_count{orchestrator="tokens"');
  });

  it('save no usage flag of its own in the checkpoint', async () => {
    const registry = new Registry();
    const { telemetry } = orchestrator(registry, true);
    const observation = telemetry.startConversation({
      orchestrator: 'tokens',
      conversationId: 't3',
      input: { sender: 'user', content: 0 },
      responders: ['a', 'b'],
      startTimeMs: performance.timeOrigin + performance.now(),
      store: 'memory',
    });
    observation?.onUsage?.(0, { inputTokens: 1 }, 1);
    expect(observation?.save?.()).toEqual({ v: 1, accounted: 0 });
  });
});
