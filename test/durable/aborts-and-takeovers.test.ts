/**
 * Review 3 (hostile review of durable conversations): each test asserts a promise of
 * docs/durability.md or docs/telemetry.md that the review found broken, and each failed before
 * its fix (repros were scripts in the review3 worktree).
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  ConversationOrchestrator,
  type ConversationStore,
  createMemoryStore,
  type Durability,
  jsonCodec,
  maxDispatches,
  type Responder,
  roundRobin,
} from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import { pairOrchestrators } from '../helpers/durable-orchestrators.ts';

type Calls = [key: string, attempt: number][];

const build = pairOrchestrators('review3', 6);
const orchestrator = (
  store: ConversationStore,
  durability: Durability,
  respond: Responder<number, number>['respond'],
  extra: { observers?: unknown[]; leaseMs?: number; storeTimeoutMs?: number } = {},
) => build(store, durability, respond, extra as object);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('review3: usage totals across an abort that cuts a call', () => {
  for (const durability of ['sync', 'async'] as Durability[]) {
    // Was a defect (fixed): the reopen commit of an abort cut while a call is open stores the usage
    // that call already reported; the call runs again and reports it again (70 tokens, not 60).
    it(`${durability}: the resumed conversation ends with the uninterrupted usage totals`, async () => {
      const respond =
        (calls: Calls, onCall?: (n: number) => void): Responder<number, number>['respond'] =>
        async (m, _s, context) => {
          calls.push([context.idempotencyKey, context.attempt]);
          onCall?.(calls.length);
          context.reportUsage({ inputTokens: 10, outputTokens: 1 });
          await sleep(5);
          return { sender: 'x', content: m.content + 1 };
        };
      const uninterrupted = await orchestrator(createMemoryStore(), durability, respond([])).run(
        { sender: 'user', content: 1 },
        { conversationId: 'u' },
      );
      const store = createMemoryStore();
      const controller = new AbortController();
      const first: Calls = [];
      await orchestrator(
        store,
        durability,
        respond(first, (n) => {
          if (n === 3) setTimeout(() => controller.abort(), 1);
        }),
      )
        .run({ sender: 'user', content: 1 }, { conversationId: 'c', signal: controller.signal })
        .catch(() => undefined);
      const second: Calls = [];
      const resumed = await orchestrator(store, durability, respond(second)).resume('c');
      expect(second[0]).toEqual(['c:3', 2]);
      expect(resumed.state.projection).toBe(uninterrupted.state.projection);
      expect(resumed.dispatchCount).toBe(uninterrupted.dispatchCount);
      expect(resumed.usage.inputTokens).toBe(60);
      expect(resumed.usage.outputTokens).toBe(6);
    });
  }
});

describe('review3: the crash mark of a taken-over conversation', () => {
  /** A conversation cut inside a step (its lease left to lapse): invocation c:3 ran, not committed. */
  async function cutInsideAStep(store: ConversationStore, calls: Calls) {
    const controller = new AbortController();
    await orchestrator(store, 'sync', (m, _s, context) => {
      calls.push([context.idempotencyKey, context.attempt]);
      if (calls.length === 3) controller.abort();
      return { sender: 'x', content: m.content + 1 };
    })
      .run({ sender: 'user', content: 1 }, { conversationId: 'c', signal: controller.signal })
      .catch(() => undefined);
  }
  const logging =
    (calls: Calls): Responder<number, number>['respond'] =>
    (m, _s, context) => {
      calls.push([context.idempotencyKey, context.attempt]);
      return { sender: 'x', content: m.content + 1 };
    };

  // Was a defect (fixed): a resume aborted before its first commit (a shutdown during recovery)
  // releases the lease it took over, erasing the crash mark; c:3 then re-runs with attempt 1.
  it('a resume aborted before its first commit keeps it: the call that ran re-runs with attempt 2', async () => {
    const store = createMemoryStore();
    const calls: Calls = [];
    await cutInsideAStep(store, calls);
    expect(calls).toEqual([
      ['c:1', 1],
      ['c:2', 1],
      ['c:3', 1],
    ]);
    const aborted = new AbortController();
    aborted.abort();
    await expect(
      orchestrator(store, 'sync', logging([])).resume('c', { signal: aborted.signal }),
    ).rejects.toMatchObject({ name: 'ConversationAbortedError' });
    const again: Calls = [];
    await orchestrator(store, 'sync', logging(again)).resume('c');
    expect(again[0]).toEqual(['c:3', 2]);
  });

  // Was a defect (fixed): same, when the taken-over segment's first commit fails (store error).
  it('a resume whose first commit fails keeps it: the call that ran re-runs with attempt 2', async () => {
    const inner = createMemoryStore();
    let failNextCommit = false;
    const store: ConversationStore = {
      ...inner,
      name: 'flaky',
      commit(checkpoint, lease, leaseMs) {
        if (failNextCommit) {
          failNextCommit = false;
          return Promise.reject(new Error('connection reset'));
        }
        return inner.commit(checkpoint, lease, leaseMs);
      },
    };
    await cutInsideAStep(store, []);
    failNextCommit = true;
    await expect(orchestrator(store, 'sync', logging([])).resume('c')).rejects.toMatchObject({
      name: 'CheckpointError',
    });
    const again: Calls = [];
    await orchestrator(store, 'sync', logging(again)).resume('c');
    expect(again[0]).toEqual(['c:3', 2]);
  });
});

describe('review3: a responder that aborts its own run, then rejects', () => {
  // Was a defect (fixed): the run settles in the responder's synchronous part and drops its promise
  // without a handler; the later rejection is unhandled (Node 20 exits on it).
  it('leaves no unhandled rejection', async () => {
    const saved = process.listeners('unhandledRejection');
    process.removeAllListeners('unhandledRejection');
    const unhandled: unknown[] = [];
    process.on('unhandledRejection', (reason) => unhandled.push(reason));
    try {
      const controller = new AbortController();
      const o = new ConversationOrchestrator<number, number>({
        name: 'review3-unhandled',
        responders: [
          {
            name: 'a',
            respond: () => {
              controller.abort(new Error('user said stop'));
              return new Promise((_resolve, reject) =>
                setTimeout(() => reject(new Error('fetch aborted')), 5),
              );
            },
          },
        ],
        turnPolicy: roundRobin(),
        projection: { initial: () => 0, fold: (n) => n + 1 },
        termination: maxDispatches(3),
      });
      await expect(
        o.run({ sender: 'user', content: 1 }, { signal: controller.signal }),
      ).rejects.toMatchObject({ name: 'ConversationAbortedError' });
      await sleep(30);
      expect(unhandled).toEqual([]);
    } finally {
      process.removeAllListeners('unhandledRejection');
      for (const listener of saved) process.on('unhandledRejection', listener);
    }
  });
});

describe('review3: orchestrator_dispatches_total after a commit that landed late', () => {
  // Was a defect: a 'running' commit that landed but answered after storeTimeoutMs failed the
  // run; its dispatch was stored (the resume did not re-run it) and no process ever counted it.
  it('counts each committed dispatch exactly once', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry({ registry });
    const inner = createMemoryStore();
    let commits = 0;
    const store: ConversationStore = {
      ...inner,
      name: 'memory',
      async commit(checkpoint, lease, leaseMs) {
        const outcome = await inner.commit(checkpoint, lease, leaseMs);
        if (++commits === 3) await sleep(300);
        return outcome;
      },
    };
    const respond: Responder<number, number>['respond'] = (m) => ({
      sender: 'x',
      content: m.content + 1,
    });
    const options = { observers: [telemetry], leaseMs: 400, storeTimeoutMs: 100 };
    // The core asks the store whether the commit landed (it did, under this run's lease): the run
    // goes on rather than failing with its dispatch stored and counted nowhere.
    const ran = await orchestrator(store, 'sync', respond, options).run(
      { sender: 'user', content: 1 },
      { conversationId: 'c' },
    );
    expect(ran.dispatchCount).toBe(6);
    await sleep(350);
    // Ended: a resume answers the stored result and counts nothing again.
    const result = await orchestrator(store, 'sync', respond, options).resume('c');
    expect(result.dispatchCount).toBe(6);
    const metric = await registry.getSingleMetric('orchestrator_dispatches_total')?.get();
    const counted = (metric?.values ?? []).reduce((sum, v) => sum + v.value, 0);
    expect(counted).toBe(6);
  });
});

describe('review3: a store whose get() answers something other than a conversation', () => {
  it('rejects resume() and cancel() with a CheckpointError naming the store and get(), not a raw TypeError', async () => {
    const store: ConversationStore = {
      ...createMemoryStore(),
      name: 'odd',
      get: async () => null as never,
    };
    const o = orchestrator(store, 'sync', (m) => ({ sender: 'x', content: m.content + 1 }));
    for (const call of [() => o.resume('g'), () => o.cancel('g')]) {
      const error = (await call().catch((e: unknown) => e)) as Error;
      expect(error.name).toBe('CheckpointError');
      expect(error.message).toMatch(
        /^Conversation g could not be (resumed|cancelled): The store `odd` answered get\(\) with `null` \(null\), expected undefined or/,
      );
    }
  });
});

describe('review3: the JSON codec and what JSON silently changes', () => {
  // Was a defect (fixed): a non-enumerable own toJSON is not seen by the check; JSON writes what it
  // returns (price 10 is stored as 0).
  it('refuses an object with a non-enumerable toJSON', () => {
    const quote = { price: 10 };
    Object.defineProperty(quote, 'toJSON', { value: () => ({ price: 0 }) });
    expect(() => jsonCodec.encode({ projection: quote })).toThrow(/projection/);
  });

  // Was a defect (fixed): an Array subclass passes as a plain array (class instances are refused
  // elsewhere): it comes back a plain Array, its methods gone.
  it('refuses an instance of an Array subclass', () => {
    class Quotes extends Array<number> {}
    expect(() => jsonCodec.encode({ projection: Quotes.from([1, 2]) })).toThrow(/projection/);
  });

  // Was a defect (issue 43, finding 6): a getter that throws only when JSON reads it (the check's
  // read and the check run again after JSON failed both pass) was reported at path `$`.
  it("names the property whose getter throws only on JSON's read", () => {
    const fromJson = () => new Error().stack?.includes('JSON.stringify') === true;
    const book = { desk: 'rates', levels: [{ price: 1 }, {}] };
    Object.defineProperty(book.levels[1], 'price', {
      enumerable: true,
      get: () => {
        if (fromJson()) throw new Error('no price while writing');
        return 2;
      },
    });
    const error = (() => {
      try {
        jsonCodec.encode({ projection: { book }, queue: [] });
      } catch (e) {
        return e as Error & { path?: string };
      }
      return undefined;
    })();
    expect(error?.name).toBe('UnstorableValueError');
    expect(error?.path).toBe('projection.book.levels[1].price');
    expect(error?.message).toBe(
      'projection.book.levels[1].price is a value that changed while it was written (no price while writing), which JSON cannot store (give the orchestrator a `codec`)',
    );
  });
});
