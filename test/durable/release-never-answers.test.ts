/**
 * resume() checks whose a conversation is (get), then acquires it; when another orchestrator's
 * conversation took that id in between, the acquire shows it and resume() lets it go: that release is bounded by storeTimeoutMs like every store call, so a store
 * that never answers it cannot hang resume() (it was the one unbounded store call).
 */
import { describe, expect, it } from 'vitest';
import {
  ConversationNotFoundError,
  ConversationOrchestrator,
  type ConversationStore,
  createMemoryStore,
  maxDispatches,
  roundRobin,
} from '../../src/index.ts';

describe('resume() of another orchestrator’s conversation', () => {
  it('rejects with ConversationNotFoundError within storeTimeoutMs when release() never answers', async () => {
    const memory = createMemoryStore();
    // Stored by orchestrator `other`, then let go: anyone can acquire it.
    const created = await memory.create(
      {
        conversationId: 'c1',
        orchestrator: 'other',
        status: 'running',
        seq: 1,
        dispatchCount: 0,
        state: '{"v":1,"input":{"sender":"user","content":1},"fresh":true}',
      },
      'someone/1/x',
      10_000,
    );
    if (!created.created) throw new Error('expected the conversation to be created');
    await memory.release('c1', created.lease);
    let releases = 0;
    const store = new Proxy(memory, {
      get(target, key, receiver) {
        // get() answers as it did before the id was taken by another orchestrator's conversation.
        if (key === 'get')
          return async (id: string) => {
            const stored = await target.get(id);
            return stored && { ...stored, orchestrator: 'mine' };
          };
        if (key === 'release')
          return () => {
            releases++;
            return new Promise<void>(() => {});
          };
        const value = Reflect.get(target, key, receiver);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    }) as ConversationStore;
    const mine = new ConversationOrchestrator<number, number>({
      name: 'mine',
      store,
      storeTimeoutMs: 200,
      responders: [{ name: 'a', respond: () => ({ sender: 'a', content: 1 }) }],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (total, m) => total + m.content },
      termination: maxDispatches(2),
    });
    const started = performance.now();
    const error = await mine.resume('c1').then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConversationNotFoundError);
    expect((error as ConversationNotFoundError).orchestrator).toBe('other');
    expect(releases).toBe(1);
    // Bounded: past the 200 ms timeout, not forever (a generous ceiling for a loaded machine).
    expect(performance.now() - started).toBeGreaterThanOrEqual(150);
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});
