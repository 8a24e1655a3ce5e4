/**
 * A clean handoff (an abort, a worker's drain) or a store failure never makes a re-run call say
 * attempt 1: a call cut mid-way, or dispatches the store does not hold yet, run again with their
 * original idempotency key and attempt 2 (issue 28's "re-invocations are bounded and visible").
 */
import { describe, expect, it } from 'vitest';
import {
  CheckpointError,
  ConversationAbortedError,
  ConversationOrchestrator,
  type ConversationStore,
  createMemoryStore,
  type Durability,
  maxDispatches,
  type Responder,
  roundRobin,
} from '../src/index.ts';

type Calls = [key: string, attempt: number][];

function orchestrator(
  store: ConversationStore,
  durability: Durability,
  respond: Responder<number, number>['respond'],
) {
  return new ConversationOrchestrator<number, number>({
    name: 'handoff',
    store,
    durability,
    responders: [
      { name: 'a', respond },
      { name: 'b', respond },
    ],
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (total, m) => total + m.content },
    termination: maxDispatches(8),
  });
}

/** A responder logging its key and attempt; answers after `delayMs` (a promise) or at once. */
function logging(calls: Calls, delayMs?: number, onCall?: (n: number) => void) {
  return (
    m: { content: number },
    _s: unknown,
    context: { idempotencyKey: string; attempt: number },
  ) => {
    calls.push([context.idempotencyKey, context.attempt]);
    onCall?.(calls.length);
    const answer = { sender: 'x', content: m.content + 1 };
    return delayMs === undefined
      ? answer
      : new Promise<typeof answer>((r) => setTimeout(() => r(answer), delayMs));
  };
}

const uninterrupted = async (durability: Durability) =>
  orchestrator(createMemoryStore(), durability, logging([])).run(
    { sender: 'user', content: 1 },
    { conversationId: 'u' },
  );

describe('an abort that cuts a responder call mid-way', () => {
  for (const durability of ['sync', 'async'] as Durability[]) {
    it(`${durability}: the call runs again on resume with its key and attempt 2, and the ending is the uninterrupted one`, async () => {
      const store = createMemoryStore();
      const first: Calls = [];
      const controller = new AbortController();
      // Aborted while the 4th call (a promise) is open.
      const run = orchestrator(
        store,
        durability,
        logging(first, 5, (n) => {
          if (n === 4) setTimeout(() => controller.abort(), 1);
        }),
      ).run({ sender: 'user', content: 1 }, { conversationId: 'h', signal: controller.signal });
      await expect(run).rejects.toBeInstanceOf(ConversationAbortedError);
      expect(first.map(([key]) => key)).toEqual(['h:1', 'h:2', 'h:3', 'h:4']);
      // Released (a clean handoff), its point before the cut call committed.
      const stored = await store.get('h');
      expect(stored).toMatchObject({ status: 'running', dispatchCount: 3 });
      expect(stored?.owner).toBeUndefined();

      const second: Calls = [];
      const done = await orchestrator(store, durability, logging(second)).resume('h');
      expect(second[0]).toEqual(['h:4', 2]);
      expect(second.slice(1).every(([, attempt]) => attempt === 1)).toBe(true);
      const expected = await uninterrupted(durability);
      expect(done.dispatchCount).toBe(expected.dispatchCount);
      expect(done.state.projection).toBe(expected.state.projection);
      expect(done.decision.reason).toBe(expected.decision.reason);
    });
  }

  it('sync: a responder that aborts its own run while it runs (a synchronous call) runs again with attempt 2', async () => {
    const store = createMemoryStore();
    const controller = new AbortController();
    const first: Calls = [];
    const run = orchestrator(
      store,
      'sync',
      logging(first, undefined, (n) => {
        if (n === 5) controller.abort();
      }),
    ).run({ sender: 'user', content: 1 }, { conversationId: 's', signal: controller.signal });
    await expect(run).rejects.toBeInstanceOf(ConversationAbortedError);
    expect(await store.get('s')).toMatchObject({ status: 'running', dispatchCount: 4 });
    const second: Calls = [];
    const done = await orchestrator(store, 'sync', logging(second)).resume('s');
    expect(second[0]).toEqual(['s:5', 2]);
    expect(done.dispatchCount).toBe(8);
    expect(done.state.projection).toBe((await uninterrupted('sync')).state.projection);
  });

  it('an abort from the listener (no call open): the dispatch it heard of is committed before the release, and the next call is a first attempt', async () => {
    const store = createMemoryStore();
    const controller = new AbortController();
    const first: Calls = [];
    const o = new ConversationOrchestrator<number, number>({
      name: 'handoff',
      store,
      responders: [{ name: 'a', respond: logging(first) }],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (total, m) => total + m.content },
      termination: maxDispatches(8),
      listener: (_s, _d, n) => {
        if (n === 3) controller.abort();
      },
    });
    await expect(
      o.run({ sender: 'user', content: 1 }, { conversationId: 'b', signal: controller.signal }),
    ).rejects.toBeInstanceOf(ConversationAbortedError);
    expect(await store.get('b')).toMatchObject({ status: 'running', dispatchCount: 3 });
    const second: Calls = [];
    const again = new ConversationOrchestrator<number, number>({
      name: 'handoff',
      store,
      responders: [{ name: 'a', respond: logging(second) }],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (total, m) => total + m.content },
      termination: maxDispatches(8),
    });
    await again.resume('b');
    // Dispatch 4 never started before the abort: its first call is attempt 1.
    expect(second[0]).toEqual(['b:4', 1]);
  });
});

describe('async durability: dispatches not yet committed at an abort', () => {
  it('are committed with the cut call before the release: nothing but that call runs again', async () => {
    const inner = createMemoryStore();
    let commits = 0;
    let hold: (() => void) | undefined;
    // Commits after the first are held, so that dispatches pile up uncommitted behind them.
    const store: ConversationStore = {
      ...inner,
      commit: async (checkpoint, lease, leaseMs) => {
        commits++;
        if (commits === 2) await new Promise<void>((r) => (hold = r));
        return inner.commit(checkpoint, lease, leaseMs);
      },
    };
    const controller = new AbortController();
    const first: Calls = [];
    const run = orchestrator(
      store,
      'async',
      logging(first, 2, (n) => {
        if (n === 6) {
          controller.abort();
          hold?.();
        }
      }),
    ).run({ sender: 'user', content: 1 }, { conversationId: 'g', signal: controller.signal });
    await expect(run).rejects.toBeInstanceOf(ConversationAbortedError);
    expect(await inner.get('g')).toMatchObject({ status: 'running', dispatchCount: 5 });
    const second: Calls = [];
    const done = await orchestrator(inner, 'async', logging(second)).resume('g');
    expect(second.map(([key, attempt]) => `${key}#${attempt}`)).toEqual([
      'g:6#2',
      'g:7#1',
      'g:8#1',
    ]);
    expect(done.state.projection).toBe((await uninterrupted('async')).state.projection);
  });
});

describe('a store failure with work the store does not hold', () => {
  it('keeps the lease (no clean release): the next holder takes it over and re-runs the dispatch with attempt 2', async () => {
    const inner = createMemoryStore();
    let commits = 0;
    const store: ConversationStore = {
      ...inner,
      commit: async (checkpoint, lease, leaseMs) => {
        if (checkpoint.status === 'running' && ++commits === 3) throw new Error('disk gone');
        return inner.commit(checkpoint, lease, leaseMs);
      },
    };
    const first: Calls = [];
    await expect(
      orchestrator(store, 'sync', logging(first)).run(
        { sender: 'user', content: 1 },
        { conversationId: 'f' },
      ),
    ).rejects.toBeInstanceOf(CheckpointError);
    expect(first.map(([key]) => key)).toEqual(['f:1', 'f:2', 'f:3']);
    const stored = await inner.get('f');
    expect(stored).toMatchObject({ status: 'running', dispatchCount: 2 });
    expect(stored?.owner).toBeDefined();
    const second: Calls = [];
    const o = orchestrator(inner, 'sync', logging(second));
    // The failed segment is over in this process: the memory store takes its lease over at once.
    expect(await o.recover()).toMatchObject({ resumed: 1, ended: 1 });
    expect(second[0]).toEqual(['f:3', 2]);
    expect((await inner.get('f'))?.dispatchCount).toBe(8);
  });
});
