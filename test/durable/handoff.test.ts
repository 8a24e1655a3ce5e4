/**
 * A clean handoff (an abort, a worker's drain) or a store failure never makes a re-run call say
 * attempt 1: a call cut mid-way, or dispatches the store does not hold yet, run again with their
 * original idempotency key and attempt 2 (issue 28's "re-invocations are bounded and visible").
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  CheckpointError,
  ConversationAbortedError,
  ConversationOrchestrator,
  type ConversationStore,
  createMemoryStore,
  type Durability,
  maxDispatches,
  roundRobin,
} from '../../src/index.ts';
import { pairOrchestrators } from '../helpers/durable-orchestrators.ts';

type Calls = [key: string, attempt: number][];

const orchestrator = pairOrchestrators('handoff', 8);

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

/** One responder `a` answering with `respond`, the sum of its answers, 8 dispatches on `store`. */
const single = (
  store: ConversationStore,
  respond: Parameters<typeof orchestrator>[2],
  extra: Parameters<typeof orchestrator>[3] = {},
) =>
  new ConversationOrchestrator<number, number>({
    name: 'handoff',
    store,
    responders: [{ name: 'a', respond }],
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (total, m) => total + m.content },
    termination: maxDispatches(8),
    ...extra,
  });

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
    // Cut inside a step (its synchronous call): what ran is not committed; the last commit is
    // written again, marked as cut by an abort, and released (the next resumes as after a crash).
    expect(await store.get('s')).toMatchObject({ status: 'running', dispatchCount: 4 });
    expect((await store.get('s'))?.owner).toBeUndefined();
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
    const o = single(store, logging(first), {
      listener: (_s, _d, n) => {
        if (n === 3) controller.abort();
      },
    });
    await expect(
      o.run({ sender: 'user', content: 1 }, { conversationId: 'b', signal: controller.signal }),
    ).rejects.toBeInstanceOf(ConversationAbortedError);
    expect(await store.get('b')).toMatchObject({ status: 'running', dispatchCount: 3 });
    const second: Calls = [];
    await single(store, logging(second)).resume('b');
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
        // Aborted while the 6th call (a promise) is open.
        if (n === 6) {
          setTimeout(() => {
            controller.abort();
            hold?.();
          }, 0);
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

describe('the handoff property', () => {
  type Where = 'in an async call' | 'in a sync call' | 'in the listener' | 'in the fold';
  const wheres: Where[] = ['in an async call', 'in a sync call', 'in the listener', 'in the fold'];

  it('an abort anywhere, then resume: the uninterrupted ending, every key once or re-run with attempt 2', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom<Durability>('sync', 'async'),
        fc.integer({ min: 1, max: 8 }),
        fc.constantFrom(...wheres),
        fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 8, maxLength: 8 }),
        async (durability, at, where, delays) => {
          const store = createMemoryStore();
          const controller = new AbortController();
          const first: Calls = [];
          let folds = 0;
          const make = (calls: Calls, aborting: boolean, causes: unknown[] = []) =>
            new ConversationOrchestrator<number, number>({
              name: 'handoff',
              store,
              durability,
              observers: [
                {
                  startConversation: (start) => {
                    causes.push(start.resumed?.cause);
                    return {};
                  },
                },
              ],
              responders: ['a', 'b'].map((name) => ({
                name,
                respond: (
                  m: { content: number },
                  _s: unknown,
                  context: { idempotencyKey: string; attempt: number },
                ) => {
                  calls.push([context.idempotencyKey, context.attempt]);
                  const n = calls.length;
                  if (aborting && n === at && where === 'in a sync call') controller.abort();
                  const answer = { sender: name, content: m.content + 1 };
                  const delay = delays[(n - 1) % delays.length] ?? 0;
                  if (aborting && n === at && where === 'in an async call') {
                    return new Promise<typeof answer>((r) => {
                      setTimeout(() => controller.abort(), 0);
                      setTimeout(() => r(answer), 3);
                    });
                  }
                  return delay === 0
                    ? answer
                    : new Promise<typeof answer>((r) => setTimeout(() => r(answer), delay));
                },
              })),
              turnPolicy: roundRobin(),
              projection: {
                initial: () => 0,
                fold: (total, m) => {
                  if (aborting && ++folds === at && where === 'in the fold') controller.abort();
                  return total + m.content;
                },
              },
              termination: maxDispatches(8),
              ...(aborting
                ? {
                    listener: (_s: unknown, _d: unknown, n: number) => {
                      if (n === at && where === 'in the listener') controller.abort();
                    },
                  }
                : {}),
            });
          const outcome = await make(first, true)
            .run({ sender: 'user', content: 1 }, { conversationId: 'p', signal: controller.signal })
            .then(
              (r) => r,
              (e: unknown) => e,
            );
          const expected = await uninterrupted(durability);
          if (!(outcome instanceof ConversationAbortedError)) {
            // Aborted after its ending was decided (the listener of the last dispatch): it ended.
            expect((outcome as { dispatchCount: number }).dispatchCount).toBe(
              expected.dispatchCount,
            );
            return;
          }
          // Cut while waiting for a call or between steps: committed and released (a clean
          // handoff). Cut inside a step (a synchronous call, a fold): the last commit is written
          // again, marked as cut by an abort, and released; it resumes as after a crash.
          const insideStep = where === 'in a sync call' || where === 'in the fold';
          expect((await store.get('p'))?.owner).toBeUndefined();
          const second: Calls = [];
          const causes: unknown[] = [];
          const done = await make(second, false, causes).resume('p');
          expect(causes).toEqual([insideStep ? 'abort' : 'handoff']);
          expect(done.dispatchCount).toBe(expected.dispatchCount);
          expect(done.state.projection).toBe(expected.state.projection);
          const ran = new Set(first.map(([key]) => key));
          if (!insideStep || durability === 'sync') {
            // Exact: every key that ran before says attempt 2, every new one 1.
            for (const [key, attempt] of second) expect(attempt, key).toBe(ran.has(key) ? 2 : 1);
          } else {
            // Resumed as after a crash ('async'): the first re-run says 2; the others re-run
            // since the last commit keep their keys but say 1 (docs/durability.md).
            expect(second[0]?.[1]).toBe(2);
            expect(ran.has(second[0]?.[0] as string)).toBe(true);
          }
          // Every dispatch's key ran, none was skipped.
          const keys = new Set([...first, ...second].map(([key]) => key));
          expect(keys.size).toBe(expected.dispatchCount);
        },
      ),
      { numRuns: 120 },
    );
  });
});
