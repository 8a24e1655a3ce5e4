/** Findings of the hostile review of durable conversations, each through the public API. */
import { describe, expect, it } from 'vitest';
import {
  CheckpointError,
  ConversationNotFoundError,
  ConversationOrchestrator,
  type ConversationStore,
  createMemoryStore,
  maxDispatches,
  roundRobin,
  suspend,
} from '../src/index.ts';

function counter(name: string, store: ConversationStore, payload: () => unknown) {
  return new ConversationOrchestrator<number[], unknown>({
    name,
    responders: [
      {
        name: 'a',
        respond: (m, s) =>
          s.dispatchCount === 1 && m.sender !== 'person'
            ? suspend(payload())
            : { sender: 'a', content: s.dispatchCount },
      },
    ],
    turnPolicy: roundRobin(),
    projection: { initial: () => [], fold: (s, m) => [...s, Number(m.content)] },
    termination: maxDispatches(4),
    store,
  });
}

describe('a suspension in the store', () => {
  it('keeps its payload in the checkpoint, so another process can read what was asked', async () => {
    const store = createMemoryStore();
    const result = await counter('asks', store, () => ({ question: 'approve?' })).run(
      { sender: 'user', content: 0 },
      { conversationId: 'q1' },
    );
    expect(result.suspended).toEqual({ responder: 'a', payload: { question: 'approve?' } });
    const taken = await store.acquire('q1', 'reader/1/x', 1_000);
    expect(taken.status).toBe('acquired');
    if (taken.status !== 'acquired') return;
    expect(JSON.parse(taken.checkpoint.state).suspended).toEqual({
      responder: 'a',
      payload: { question: 'approve?' },
    });
  });

  it('fails the conversation with a CheckpointError when the payload cannot be stored', async () => {
    const store = createMemoryStore();
    const run = counter('asks', store, () => ({ amount: 10n })).run(
      { sender: 'user', content: 0 },
      { conversationId: 'q2' },
    );
    await expect(run).rejects.toBeInstanceOf(CheckpointError);
    // The suspending dispatch is the second; the path names the offending value.
    await expect(run).rejects.toMatchObject({ dispatchCount: 2, path: 'suspended.payload.amount' });
  });
});

describe('resume() on a store shared by orchestrators', () => {
  it("refuses another orchestrator's conversation, naming it, and leaves it as it was", async () => {
    const store = createMemoryStore();
    await counter('approvals', store, () => 'ok?').run(
      { sender: 'user', content: 0 },
      { conversationId: 'q3' },
    );
    const other = counter('billing', store, () => 'ok?');
    await expect(other.resume('q3', { input: { sender: 'person', content: 1 } })).rejects.toThrow(
      new ConversationNotFoundError('q3', 'approvals'),
    );
    expect(await store.get('q3')).toMatchObject({ orchestrator: 'approvals', status: 'suspended' });
    const owner = counter('approvals', store, () => 'ok?');
    const ended = await owner.resume('q3', { input: { sender: 'person', content: 1 } });
    expect(ended.decision.reason).toBe('max_dispatches');
  });
});
