/**
 * `drain`: a worker's gentle stop. The responder call in flight finishes, its dispatch is folded
 * and committed, and the conversation is handed back at that commit point, so that nothing runs
 * twice when another process resumes it; `signal` still cuts at once.
 */
import { describe, expect, it } from 'vitest';
import {
  ConversationAbortedError,
  ConversationOrchestrator,
  createMemoryStore,
  type Durability,
  maxDispatches,
  roundRobin,
} from '../../src/index.ts';

function desk(
  store: ReturnType<typeof createMemoryStore>,
  durability: Durability,
  calls: string[],
  onCall?: (key: string) => void,
) {
  return new ConversationOrchestrator<number, number>({
    name: 'drained',
    store,
    durability,
    responders: [
      {
        name: 'slow',
        respond: async (m, _s, context) => {
          calls.push(`${context.idempotencyKey}#${context.attempt}`);
          onCall?.(context.idempotencyKey);
          await new Promise((resolve) => setTimeout(resolve, 40));
          if (context.signal.aborted) throw new Error('cut');
          return { sender: 'slow', content: m.content + 1 };
        },
      },
    ],
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (sum, m) => sum + m.content },
    termination: maxDispatches(6),
  });
}

describe.each(['sync', 'async', 'exit'] as const)('drain with %s durability', (durability) => {
  it('lets the call in flight finish, commits it, hands back; the resume runs no call twice', async () => {
    const store = createMemoryStore();
    const calls: string[] = [];
    const drain = new AbortController();
    // During the third call (from the call itself: a timer from the start drifted on a loaded
    // machine and landed in the second or fourth).
    const run = desk(store, durability, calls, (key) => {
      if (key === 'd:3') setTimeout(() => drain.abort('worker draining'), 10);
    }).run({ sender: 'u', content: 0 }, { conversationId: 'd', drain: drain.signal });
    const error = await run.catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConversationAbortedError);
    expect((error as ConversationAbortedError).cause).toBe('worker draining');
    expect((error as ConversationAbortedError).dispatchCount).toBe(3);
    const stored = await store.get('d');
    expect(stored).toMatchObject({ status: 'running', dispatchCount: 3 });
    expect(stored?.owner).toBeUndefined(); // released: another process takes it at once
    const resumed = await desk(store, durability, calls).resume('d');
    expect(resumed.dispatchCount).toBe(6);
    expect(resumed.state.projection).toBe(1 + 2 + 3 + 4 + 5 + 6);
    // Six calls, each once, each a first attempt: nothing was cut and run again.
    expect(calls).toEqual(['d:1#1', 'd:2#1', 'd:3#1', 'd:4#1', 'd:5#1', 'd:6#1']);
  });
});

describe('drain, checked', () => {
  it('refuses a drain that is not an AbortSignal, saying what came', async () => {
    const o = desk(createMemoryStore(), 'sync', []);
    await expect(
      o.run({ sender: 'u', content: 0 }, { drain: 'soon' as unknown as AbortSignal }),
    ).rejects.toThrow('Expected `drain` to be an AbortSignal, got `"soon"` (string)');
  });

  it('hands back before the first call when it has already aborted', async () => {
    const store = createMemoryStore();
    const calls: string[] = [];
    const error = await desk(store, 'sync', calls)
      .run({ sender: 'u', content: 0 }, { conversationId: 'e', drain: AbortSignal.abort('now') })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConversationAbortedError);
    expect(calls).toEqual([]);
  });
});
