/**
 * `FleetOrchestrator<C>` is the core's `run` and `resume` as a `ConversationOrchestrator<S, C>`
 * has them: such an orchestrator is one as it is, its input typed; checked by `tsc` (its
 * `@ts-expect-error` lines fail the type check when the input is not typed), and run on a memory
 * store.
 */
import { describe, expect, it } from 'vitest';
import type { FleetOrchestrator } from '../../src/fleet/index.ts';
import { createMemoryStore } from '../../src/index.ts';
import { deskInput, desks } from '../fixtures/fleet-app.ts';

describe('FleetOrchestrator', () => {
  it('is what a ConversationOrchestrator built with a store is, its input typed as its messages', async () => {
    const store = createMemoryStore();
    const typed: FleetOrchestrator<number> = desks({ store, responderMs: 0 });
    const untyped: FleetOrchestrator = typed;
    expect(untyped.durable).toBe(true);
    const result = (await typed.run(deskInput(2), { conversationId: 'typed-1' })) as {
      dispatchCount: number;
    };
    expect(result.dispatchCount).toBe(5); // deskInput(2) asks for 5 turns
    // Never called: what tsc refuses.
    const refused = () => {
      // @ts-expect-error a message's content is the orchestrator's own type (number here)
      void typed.run({ sender: 'user', content: 'two' }, { conversationId: 'typed-2' });
      // @ts-expect-error the input is a message, not any value
      void typed.run(42, { conversationId: 'typed-3' });
      // @ts-expect-error a person's answer is a message of that type too
      void typed.resume('typed-1', { input: { sender: 'person', content: 'yes' } });
    };
    expect(refused).toBeTypeOf('function');
  });
});
