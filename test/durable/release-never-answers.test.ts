/**
 * resume() checks whose a conversation is (get), then acquires it; when another orchestrator's
 * conversation took that id in between, the acquire shows it and resume() lets it go: that release is bounded by storeTimeoutMs like every store call, so a store
 * that never answers it cannot hang resume() (it was the one unbounded store call).
 */
import { describe, expect, it } from 'vitest';
import {
  ConversationNotFoundError,
  type ConversationStore,
  createMemoryStore,
} from '../../src/index.ts';
import { oneResponder } from '../helpers/durable-orchestrators.ts';
import { createdAndReleased, firstCheckpoint } from '../helpers/first-checkpoint.ts';

describe('resume() of another orchestrator’s conversation', () => {
  it('rejects with ConversationNotFoundError within storeTimeoutMs when release() never answers', async () => {
    const memory = createMemoryStore();
    // Stored by orchestrator `other`, then let go: anyone can acquire it.
    const state = '{"v":1,"input":{"sender":"user","content":1},"fresh":true}';
    await createdAndReleased(memory, firstCheckpoint('c1', 'other', state), 'someone/1/x', 10_000);
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
    const mine = oneResponder(() => ({ sender: 'a', content: 1 }), {
      name: 'mine',
      store,
      storeTimeoutMs: 200,
      steps: 2,
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
