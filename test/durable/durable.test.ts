/** Durable conversations on the memory store, through the public API (issue 28). */
import { describe, expect, it } from 'vitest';
import {
  CheckpointError,
  ConversationExistsError,
  ConversationLeaseError,
  ConversationNotFoundError,
  ConversationOrchestrator,
  type ConversationStore,
  createMemoryStore,
  type Durability,
  maxDispatches,
  type OrchestratorOptions,
  type Responder,
  roundRobin,
  suspend,
} from '../../src/index.ts';

type Tally = { total: number; last: unknown };

function orchestrator(
  extra: Partial<OrchestratorOptions<Tally, unknown>> & { store: ConversationStore },
  responders?: Responder<Tally, unknown>[],
) {
  return new ConversationOrchestrator<Tally, unknown>({
    name: 'durable_test',
    responders: responders ?? [
      { name: 'a', respond: (m) => ({ sender: 'a', content: Number(m.content) + 1 }) },
      { name: 'b', respond: (m) => ({ sender: 'b', content: Number(m.content) + 1 }) },
    ],
    turnPolicy: roundRobin(),
    projection: {
      initial: () => ({ total: 0, last: undefined }),
      fold: (s, m) => ({
        total: s.total + (typeof m.content === 'number' ? m.content : 0),
        last: m.content,
      }),
    },
    termination: maxDispatches(10),
    ...extra,
  });
}

describe('run() with a store', () => {
  it('commits the conversation as ended with its result', async () => {
    const store = createMemoryStore();
    const result = await orchestrator({ store }).run(
      { sender: 'user', content: 0 },
      { conversationId: 'c1' },
    );
    expect(result.dispatchCount).toBe(10);
    expect(result.state.projection.total).toBe(55);
    const stored = await store.get('c1');
    expect(stored?.status).toBe('ended');
    expect(stored?.dispatchCount).toBe(10);
    expect(stored?.seq).toBe(11); // create, 9 running commits, the ending
    expect(
      (stored?.result as { state: { projection: Tally } } | undefined)?.state.projection.total,
    ).toBe(55);
  });

  it('rejects an id already stored with ConversationExistsError and runs nothing', async () => {
    const store = createMemoryStore();
    const o = orchestrator({ store });
    await o.run({ sender: 'user', content: 0 }, { conversationId: 'c1' });
    let calls = 0;
    const again = orchestrator({ store }, [{ name: 'a', respond: () => void calls++ }]);
    await expect(
      again.run({ sender: 'user', content: 0 }, { conversationId: 'c1' }),
    ).rejects.toBeInstanceOf(ConversationExistsError);
    expect(calls).toBe(0);
  });

  it('generates an id when none is given and stores under it', async () => {
    const store = createMemoryStore();
    const result = await orchestrator({ store }).run({ sender: 'user', content: 0 });
    expect((await store.get(result.conversationId))?.status).toBe('ended');
  });

  for (const durability of ['sync', 'async', 'exit'] as Durability[]) {
    it(`ends the same in '${durability}' mode as without a store`, async () => {
      const plain = await orchestrator({ store: undefined as never }).run({
        sender: 'user',
        content: 0,
      });
      const store = createMemoryStore();
      const durable = await orchestrator({ store, durability }).run({ sender: 'user', content: 0 });
      expect(durable.state.projection).toEqual(plain.state.projection);
      expect(durable.dispatchCount).toBe(plain.dispatchCount);
      const seq = (await store.get(durable.conversationId))?.seq;
      expect(seq).toBe(durability === 'exit' ? 2 : durability === 'sync' ? 11 : seq);
    });
  }
});

describe('suspend() and resume()', () => {
  const approving = (): Responder<Tally, unknown> => {
    let asked = false;
    return {
      name: 'person',
      respond: (m) => {
        if (!asked) {
          asked = true;
          return suspend({ question: 'approve?' });
        }
        return { sender: 'person', content: m.content };
      },
    };
  };

  it('resolves with result.suspended, a continuing decision, and goes on from the input', async () => {
    for (const durability of ['sync', 'async', 'exit'] as Durability[]) {
      const store = createMemoryStore();
      const responders = [
        {
          name: 'a',
          respond: (m: { content: unknown }) => ({ sender: 'a', content: Number(m.content) + 1 }),
        },
        approving(),
      ];
      const o = orchestrator({ store, durability }, responders);
      const first = await o.run({ sender: 'user', content: 0 }, { conversationId: 'w' });
      expect(first.suspended).toEqual({ responder: 'person', payload: { question: 'approve?' } });
      expect(first.decision.terminate).toBe(false);
      expect(first.dispatchCount).toBe(2);
      expect((await store.get('w'))?.status).toBe('suspended');
      const second = await orchestrator({ store, durability }, responders).resume('w', {
        input: { sender: 'user', content: 100 },
      });
      expect(second.suspended).toBeUndefined();
      expect(second.dispatchCount).toBe(10);
      // 1 from a, the answer 100 folded, then a and person alternate on it: 101, 101, 102 ...
      expect(second.state.projection.total).toBe(
        1 + 100 + 101 + 101 + 102 + 102 + 103 + 103 + 104 + 104,
      );
      expect((await store.get('w'))?.status).toBe('ended');
    }
  });

  it('lets exactly one of two concurrent resumes apply; the other invokes nothing and rejects', async () => {
    const store = createMemoryStore();
    const o = orchestrator({ store }, [
      { name: 'a', respond: (m) => ({ sender: 'a', content: Number(m.content) + 1 }) },
      approving(),
    ]);
    await o.run({ sender: 'user', content: 0 }, { conversationId: 'w' });
    const outcomes = await Promise.allSettled([
      o.resume('w', { input: { sender: 'user', content: 1 } }),
      o.resume('w', { input: { sender: 'user', content: 2 } }),
    ]);
    const kinds = outcomes.map((o) => o.status).sort();
    expect(kinds).toEqual(['fulfilled', 'rejected']);
    const rejected = outcomes.find((o) => o.status === 'rejected') as PromiseRejectedResult;
    expect(rejected.reason).toBeInstanceOf(ConversationLeaseError);
    expect((await store.get('w'))?.dispatchCount).toBe(10);
  });

  it('resolves an ended conversation with its stored result and runs nothing', async () => {
    const store = createMemoryStore();
    const done = await orchestrator({ store }).run(
      { sender: 'user', content: 0 },
      { conversationId: 'e' },
    );
    let calls = 0;
    const again = await orchestrator({ store }, [
      { name: 'a', respond: () => void calls++ },
    ]).resume('e');
    expect(calls).toBe(0);
    expect(again.dispatchCount).toBe(done.dispatchCount);
    expect(again.state.projection).toEqual(done.state.projection);
    expect(again.decision).toEqual(done.decision);
  });

  it('rejects an unknown id with ConversationNotFoundError', async () => {
    await expect(
      orchestrator({ store: createMemoryStore() }).resume('nope'),
    ).rejects.toBeInstanceOf(ConversationNotFoundError);
  });
});

describe('fencing and leases', () => {
  it("refuses a stale holder's commits: its run rejects with ConversationLeaseError and invokes nothing more", async () => {
    let clock = 1_000_000;
    const store = createMemoryStore({ now: () => clock });
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const staleCalls: string[] = [];
    const stale = orchestrator({ store, leaseMs: 1_000 }, [
      {
        name: 'a',
        respond: async (m, _s, context) => {
          staleCalls.push(context.idempotencyKey);
          if (staleCalls.length === 3) await gate;
          return { sender: 'a', content: Number(m.content) + 1 };
        },
      },
    ]);
    const staleRun = stale.run({ sender: 'user', content: 0 }, { conversationId: 'f' });
    while (staleCalls.length < 3) await new Promise((r) => setImmediate(r));
    // The stale holder stalls past its lease; another process takes the conversation over.
    clock += 5_000;
    const attempts: [string, number][] = [];
    const taker = orchestrator({ store, leaseMs: 1_000 }, [
      {
        name: 'a',
        respond: (m, _s, context) => {
          attempts.push([context.idempotencyKey, context.attempt]);
          return { sender: 'a', content: Number(m.content) + 1 };
        },
      },
    ]);
    const taken = await taker.resume('f');
    expect(taken.dispatchCount).toBe(10);
    // The dispatch in flight at the takeover runs again with its key and attempt 2.
    expect(attempts[0]).toEqual(['f:3', 2]);
    expect(attempts.slice(1).every(([, attempt]) => attempt === 1)).toBe(true);
    release();
    await expect(staleRun).rejects.toBeInstanceOf(ConversationLeaseError);
    expect(staleCalls).toEqual(['f:1', 'f:2', 'f:3']);
    expect((await store.get('f'))?.dispatchCount).toBe(10);
  });

  it('rejects a resume while a live process holds the conversation', async () => {
    const store = createMemoryStore();
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const o = orchestrator({ store }, [
      { name: 'a', respond: async () => gate.then(() => undefined) },
    ]);
    const running = o.run({ sender: 'user', content: 0 }, { conversationId: 'h' });
    await new Promise((r) => setTimeout(r, 10));
    const error = await o.resume('h').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConversationLeaseError);
    expect((error as ConversationLeaseError).holder).toMatch(/\/\d+\//);
    release();
    await running;
  });
});

describe('failures of the store and of values', () => {
  it('fails at the dispatch with a value JSON cannot store, naming conversation, dispatch and path', async () => {
    for (const [bad, what] of [
      [10n, 'a BigInt'],
      [() => 1, 'a function'],
      [new Map(), 'a Map'],
    ] as const) {
      const store = createMemoryStore();
      const o = orchestrator({ store }, [
        {
          name: 'a',
          respond: (_m, s) =>
            s.dispatchCount === 2 ? { sender: 'a', content: bad } : { sender: 'a', content: 1 },
        },
      ]);
      const error = (await o
        .run({ sender: 'user', content: 0 }, { conversationId: 'v' })
        .catch((e: unknown) => e)) as CheckpointError<Tally>;
      expect(error).toBeInstanceOf(CheckpointError);
      expect(error.path).toBe('projection.last');
      expect(error.message).toContain('Conversation v could not be checkpointed at dispatch 3');
      expect(error.message).toContain(`projection.last is ${what}`);
      expect(error.dispatchCount).toBe(3);
      expect(error.state.projection.last).toBe(bad);
      // It can never be stored: the conversation ends as failed there (recover() leaves it).
      expect(await store.get('v')).toMatchObject({ status: 'ended', dispatchCount: 3 });
    }
  });

  it('names the path of a cycle', async () => {
    const cyclic: { self?: unknown } = {};
    cyclic.self = cyclic;
    const o = orchestrator({ store: createMemoryStore() }, [
      { name: 'a', respond: () => ({ sender: 'a', content: cyclic }) },
    ]);
    const error = (await o
      .run({ sender: 'user', content: 0 })
      .catch((e: unknown) => e)) as CheckpointError;
    expect(error.path).toBe('projection.last.self');
  });

  it('fails with a clear error bounded by storeTimeoutMs when the store never answers', async () => {
    const store = createMemoryStore();
    const stuck: ConversationStore = { ...store, commit: () => new Promise(() => {}) };
    const o = orchestrator({ store: stuck, storeTimeoutMs: 50 });
    const error = (await o
      .run({ sender: 'user', content: 0 })
      .catch((e: unknown) => e)) as CheckpointError<Tally>;
    expect(error).toBeInstanceOf(CheckpointError);
    expect(error.message).toContain('did not answer commit (seq 2) within 50 ms');
    expect(error.dispatchCount).toBe(1);
    expect(error.state.projection.total).toBe(1);
  });

  it('fails with the store error when the store throws, and the conversation stays recoverable', async () => {
    const store = createMemoryStore();
    let failing = true;
    const flaky: ConversationStore = {
      ...store,
      commit: (c, l, ms) =>
        failing && c.seq === 4 ? Promise.reject(new Error('disk full')) : store.commit(c, l, ms),
    };
    const o = orchestrator({ store: flaky });
    const error = (await o
      .run({ sender: 'user', content: 0 }, { conversationId: 'r' })
      .catch((e: unknown) => e)) as CheckpointError;
    expect(error).toBeInstanceOf(CheckpointError);
    expect(error.message).toContain('disk full');
    expect((await store.get('r'))?.status).toBe('running');
    failing = false;
    const recovered = await o.recover();
    expect(recovered).toEqual({ resumed: 1, ended: 1, suspended: 0, failed: 0, skipped: 0 });
    expect((await store.get('r'))?.dispatchCount).toBe(10);
  });
});

describe('storage', () => {
  it('does not grow with the dispatch count (10 vs 10,000 dispatches)', async () => {
    const bytesAfter = async (n: number): Promise<number> => {
      const store = createMemoryStore();
      let seen = 0;
      const o = orchestrator({ store, termination: maxDispatches(n) }, [
        {
          name: 'a',
          respond: () => {
            seen++;
            return { sender: 'a', content: 1 };
          },
        },
      ]);
      const run = o.run({ sender: 'user', content: 0 }, { conversationId: 'b' });
      // Measured while running, at the last dispatch's checkpoint, and after the end.
      await run;
      expect(seen).toBe(n);
      return store.storedBytes();
    };
    const small = await bytesAfter(10);
    const large = await bytesAfter(10_000);
    // Only the digits of the counters differ.
    expect(large - small).toBeLessThan(60);
    expect(large).toBeLessThan(1_500);
  });

  it('purges ended conversations past the retention', async () => {
    let clock = 0;
    const store = createMemoryStore({ retentionMs: 1_000, now: () => clock });
    await orchestrator({ store }).run({ sender: 'user', content: 0 }, { conversationId: 'p' });
    clock += 999;
    expect(await store.purgeExpired()).toBe(0);
    clock += 1;
    expect(await store.purgeExpired()).toBe(1);
    expect(await store.get('p')).toBeUndefined();
  });
});

describe('recover()', () => {
  it('resumes running conversations no live process holds and tells how they ended', async () => {
    const store = createMemoryStore();
    const o = orchestrator({ store });
    // Aborted runs stay resumable (lease released, status running).
    for (const id of ['r1', 'r2', 'r3']) {
      const controller = new AbortController();
      const run = orchestrator({ store }, [
        {
          name: 'a',
          respond: (m, s) => {
            if (s.dispatchCount === 4) controller.abort();
            return { sender: 'a', content: Number(m.content) + 1 };
          },
        },
      ]).run({ sender: 'user', content: 0 }, { conversationId: id, signal: controller.signal });
      await expect(run).rejects.toThrow('aborted');
      expect((await store.get(id))?.status).toBe('running');
    }
    expect(await o.recover({ concurrency: 2 })).toEqual({
      resumed: 3,
      ended: 3,
      suspended: 0,
      failed: 0,
      skipped: 0,
    });
    for (const id of ['r1', 'r2', 'r3']) expect((await store.get(id))?.dispatchCount).toBe(10);
  });
});
