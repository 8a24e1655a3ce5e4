/** Findings of the hostile review of durable conversations, each through the public API. */
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  CheckpointError,
  ConversationNotFoundError,
  ConversationOrchestrator,
  type ConversationState,
  type ConversationStore,
  createMemoryStore,
  maxDispatches,
  OrchestratorConfigError,
  PolicyError,
  type ResumeOptions,
  type RunOptions,
  roundRobin,
  suspend,
  type TerminationPolicy,
} from '../../src/index.ts';
import { createdAndReleased, firstCheckpoint } from '../helpers/first-checkpoint.ts';

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

describe('a resume that fails before its first commit', () => {
  function approvals(store: ConversationStore, attempts: number[]) {
    return new ConversationOrchestrator<number[], unknown>({
      name: 'approvals',
      responders: [
        {
          name: 'a',
          respond: (m, s, context) => {
            attempts.push(context.attempt);
            return s.dispatchCount === 1 && m.sender !== 'person'
              ? suspend('ok?')
              : { sender: 'a', content: s.dispatchCount };
          },
        },
      ],
      turnPolicy: roundRobin(),
      projection: {
        initial: () => [],
        fold: (s, m) => {
          if (m.content === 'garbled') throw new Error('cannot read the answer');
          return [...s, Number(m.content)];
        },
      },
      termination: maxDispatches(4),
      store,
    });
  }

  it('rejects with a PolicyError, leaves the conversation suspended and unleased, and a corrected answer ends it', async () => {
    const store = createMemoryStore();
    const attempts: number[] = [];
    const o = approvals(store, attempts);
    await o.run({ sender: 'user', content: 0 }, { conversationId: 'q4' });
    await expect(
      o.resume('q4', { input: { sender: 'person', content: 'garbled' } }),
    ).rejects.toBeInstanceOf(PolicyError);
    const stored = await store.get('q4');
    expect(stored).toMatchObject({ status: 'suspended', seq: 3, dispatchCount: 2 });
    expect(stored?.owner).toBeUndefined();
    attempts.length = 0;
    const ended = await o.resume('q4', { input: { sender: 'person', content: 7 } });
    expect(ended.decision.reason).toBe('max_dispatches');
    expect(ended.state.projection).toEqual([0, 7, 2, 3]);
    // A suspension answered, not a crash: nothing runs again, so no attempt is raised.
    expect(attempts).toEqual([1, 1]);
  });

  it("rejects with a PolicyError when a policy's start(saved) throws, and leaves the conversation resumable", async () => {
    const store = createMemoryStore();
    let refuse = true;
    const base = maxDispatches<number[], unknown>(4);
    const picky: TerminationPolicy<number[], unknown> = {
      name: 'picky',
      start: (saved?: unknown) => {
        if (saved !== undefined && refuse) throw new Error('saved state from another version');
        const check = base.start();
        return Object.assign(
          (s: ConversationState<number[], unknown>, ms: number) => check(s, ms),
          {
            save: () => 'saved',
          },
        );
      },
    };
    const o = new ConversationOrchestrator<number[], unknown>({
      name: 'approvals',
      responders: [
        {
          name: 'a',
          respond: (m, s) =>
            s.dispatchCount === 1 && m.sender !== 'person'
              ? suspend('ok?')
              : { sender: 'a', content: s.dispatchCount },
        },
      ],
      turnPolicy: roundRobin(),
      projection: { initial: () => [], fold: (s, m) => [...s, Number(m.content)] },
      termination: picky,
      store,
    });
    await o.run({ sender: 'user', content: 0 }, { conversationId: 'q5' });
    await expect(o.resume('q5', { input: { sender: 'person', content: 7 } })).rejects.toMatchObject(
      { name: 'PolicyError', stage: 'termination' },
    );
    const stored = await store.get('q5');
    expect(stored).toMatchObject({ status: 'suspended', seq: 3 });
    expect(stored?.owner).toBeUndefined();
    refuse = false;
    const ended = await o.resume('q5', { input: { sender: 'person', content: 7 } });
    expect(ended.decision.reason).toBe('max_dispatches');
  });
});

describe('a durable run that fails before its policies start', () => {
  it('commits the failure as its ending, so resume() tells it again', async () => {
    const store = createMemoryStore();
    const o = new ConversationOrchestrator<number[], unknown>({
      name: 'approvals',
      responders: [{ name: 'a', respond: () => undefined }],
      turnPolicy: roundRobin(),
      projection: {
        initial: () => {
          throw new Error('no initial state');
        },
        fold: (s) => s,
      },
      termination: maxDispatches(4),
      store,
    });
    await expect(
      o.run({ sender: 'user', content: 0 }, { conversationId: 'q6' }),
    ).rejects.toBeInstanceOf(PolicyError);
    const stored = await store.get('q6');
    expect(stored).toMatchObject({ status: 'ended', seq: 2 });
    expect(stored?.owner).toBeUndefined();
    await expect(o.resume('q6')).rejects.toMatchObject({
      name: 'PolicyError',
      message: 'The projection policy failed: no initial state',
    });
  });
});

describe('resume() of a checkpoint this version cannot read', () => {
  const cases: [string, string, string][] = [
    ['null', 'null', 'expected `state` to be an object, got `null` (null)'],
    [
      '{"v":2}',
      'of another format version',
      'expected `v` to be 1 (the checkpoint format this version writes), got `2` (number)',
    ],
    [
      JSON.stringify({
        v: 1,
        input: { sender: 'user', content: 0 },
        projection: [],
        lastMessage: { sender: 'user', content: 0 },
        dispatchCount: 0,
        invocations: 0,
        attempt: 1,
        segment: 1,
        elapsedMs: 0,
      }),
      'without a queue',
      'expected `queue` to be an array of messages, got `undefined` (undefined)',
    ],
  ];
  for (const [state, what, why] of cases) {
    it(`rejects a state ${what} with a CheckpointError naming the conversation, and releases it`, async () => {
      const store = createMemoryStore();
      await createdAndReleased(store, firstCheckpoint('q7', 'asks', state), 'writer/1/x', 1_000);
      let calls = 0;
      const o = counter('asks', store, () => {
        calls++;
        return 'ok?';
      });
      const resumed = o.resume('q7');
      await expect(resumed).rejects.toBeInstanceOf(CheckpointError);
      await expect(resumed).rejects.toMatchObject({
        message: `Conversation q7's checkpoint is not one this version can resume: ${why}`,
      });
      expect(calls).toBe(0);
      const stored = await store.get('q7');
      expect(stored).toMatchObject({ status: 'running', seq: 1 });
      expect(stored?.owner).toBeUndefined();
    });
  }
});

describe('a store that answers something other than an outcome', () => {
  function answering(method: 'create' | 'commit' | 'acquire', answer: unknown): ConversationStore {
    const memory = createMemoryStore();
    return { ...memory, name: 'odd', [method]: async () => answer };
  }

  it('fails run() with a CheckpointError naming the store and create(), never a hang', async () => {
    const run = counter('asks', answering('create', undefined), () => 'ok?').run(
      { sender: 'user', content: 0 },
      { conversationId: 'q8' },
    );
    await expect(run).rejects.toBeInstanceOf(CheckpointError);
    await expect(run).rejects.toMatchObject({
      message:
        'Conversation q8 could not be checkpointed at its creation: The store `odd` answered create() with `undefined` (undefined), expected { created: true, lease } or { created: false }',
    });
  });

  it('fails run() with a CheckpointError naming the store and commit(), never a hang', async () => {
    const store = answering('commit', { ok: 'yes' });
    const run = counter('asks', store, () => 'ok?').run(
      { sender: 'user', content: 0 },
      { conversationId: 'q9' },
    );
    await expect(run).rejects.toBeInstanceOf(CheckpointError);
    await expect(run).rejects.toMatchObject({
      dispatchCount: 1,
      message:
        "Conversation q9 could not be checkpointed at the commit of dispatch 1: The store `odd` answered commit() with `{\"ok\":\"yes\"}` (object), expected { ok: true, lease } or { ok: false, reason: 'fenced' | 'sequence' | 'not_found' }",
    });
    // Left running as last committed. Dispatch 1 ran but is not stored: the lease is not released
    // (a clean release would make its re-run say attempt 1); recover() takes it over at once here
    // (the holder's segment is over) and re-runs that dispatch with attempt 2, its key unchanged.
    expect(await store.get('q9')).toMatchObject({ status: 'running', seq: 1 });
    expect((await store.get('q9'))?.owner).toBeDefined();
  });

  it('fails resume() with a CheckpointError naming the store and acquire()', async () => {
    const store = answering('acquire', { status: 'acquired' });
    await store.create(
      firstCheckpoint(
        'q10',
        'asks',
        JSON.stringify({ v: 1, input: { sender: 'user', content: 0 }, fresh: true }),
      ),
      'gone/1/x',
      60_000,
    );
    const resumed = counter('asks', store, () => 'ok?').resume('q10');
    await expect(resumed).rejects.toBeInstanceOf(CheckpointError);
    await expect(resumed).rejects.toMatchObject({
      message: expect.stringMatching(
        /^Conversation q10 could not be resumed: The store `odd` answered acquire\(\) with `\{"status":"acquired"\}` \(object\), expected \{ status: 'acquired', checkpoint, lease, takenOver, entries\? \(strings\) \}/,
      ),
    });
  });
});

describe('the lease heartbeat', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('renews the lease at every beat, every leaseMs / 3, while a responder runs long', async () => {
    vi.useFakeTimers({ now: 1_000_000 });
    const memory = createMemoryStore();
    // Each commit takes 10 ms: the first beat comes 990 ms after the commit of dispatch 1 landed.
    const store: ConversationStore = {
      ...memory,
      commit: async (checkpoint, lease, leaseMs) => {
        await new Promise((resolve) => setTimeout(resolve, 10));
        return memory.commit(checkpoint, lease, leaseMs);
      },
    };
    let answer: (() => void) | undefined;
    const o = new ConversationOrchestrator<number, unknown>({
      name: 'slow',
      responders: [
        { name: 'a', respond: () => ({ sender: 'a', content: 1 }) },
        {
          name: 'b',
          respond: () =>
            new Promise((resolve) => {
              answer = () => resolve({ sender: 'b', content: 2 });
            }),
        },
      ],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (s) => s + 1 },
      termination: maxDispatches(2),
      store,
      leaseMs: 3_000,
    });
    const run = o.run({ sender: 'user', content: 0 }, { conversationId: 'h1' });
    await vi.advanceTimersByTimeAsync(10);
    expect(answer).toBeTypeOf('function');
    const expiries: (number | undefined)[] = [];
    await vi.advanceTimersByTimeAsync(990);
    expiries.push((await store.get('h1'))?.leaseExpiresAt);
    for (let beat = 2; beat <= 4; beat++) {
      await vi.advanceTimersByTimeAsync(1_000);
      expiries.push((await store.get('h1'))?.leaseExpiresAt);
    }
    // Each beat (at 1, 2, 3 and 4 s) took the lease to its time + leaseMs.
    expect(expiries.map((at) => (at ?? 0) - 1_000_000)).toEqual([4_000, 5_000, 6_000, 7_000]);
    answer?.();
    await vi.advanceTimersByTimeAsync(20);
    await expect(run).resolves.toMatchObject({ dispatchCount: 2 });
  });

  it('refuses a storeTimeoutMs past half the leaseMs, naming both', () => {
    expect(() => counterWith({ leaseMs: 1_000, storeTimeoutMs: 600 })).toThrow(
      new OrchestratorConfigError(
        'Expected `storeTimeoutMs` to be at most half of `leaseMs` (1000 / 2 = 500 ms, so that a lease renewal lands before the lease expires), got `600` (number)',
      ),
    );
  });

  it('bounds store calls by half the leaseMs when storeTimeoutMs is not given and that is under 5 s', async () => {
    vi.useFakeTimers();
    const memory = createMemoryStore();
    const o = counterWith({
      leaseMs: 1_000,
      store: { ...memory, create: () => new Promise(() => {}) },
    });
    const run = o.run({ sender: 'user', content: 0 }, { conversationId: 'h2' });
    const settled = expect(run).rejects.toMatchObject({
      message:
        'Conversation h2 could not be checkpointed at its creation: The store did not answer create within 500 ms (storeTimeoutMs)',
    });
    await vi.advanceTimersByTimeAsync(500);
    await settled;
  });
});

function counterWith(options: {
  leaseMs: number;
  storeTimeoutMs?: number;
  store?: ConversationStore;
}) {
  return new ConversationOrchestrator<number[], unknown>({
    name: 'asks',
    responders: [{ name: 'a', respond: () => undefined }],
    turnPolicy: roundRobin(),
    projection: { initial: () => [], fold: (s) => s },
    termination: maxDispatches(4),
    store: options.store ?? createMemoryStore(),
    ...options,
  });
}

describe('the options of run() and resume()', () => {
  it("reads resume()'s input once: what the first read gave is what the conversation gets", async () => {
    const store = createMemoryStore();
    const o = counter('asks', store, () => 'ok?');
    await o.run({ sender: 'user', content: 0 }, { conversationId: 'r1' });
    let reads = 0;
    const options = {
      get input() {
        reads++;
        return reads === 1 ? { sender: 'person', content: 7 } : { sender: 'intruder', content: 99 };
      },
    };
    const ended = await o.resume('r1', options);
    expect(reads).toBe(1);
    expect(ended.state.projection).toEqual([0, 7, 2, 3]);
  });

  it("reads run()'s conversationId once", async () => {
    let reads = 0;
    const options = {
      get conversationId() {
        reads++;
        return `r${reads + 1}`;
      },
    };
    const result = await counter('asks', createMemoryStore(), () => 'ok?').run(
      { sender: 'user', content: 0 },
      options,
    );
    expect(reads).toBe(1);
    expect(result.conversationId).toBe('r2');
  });

  it('names the option whose getter throws, for run() and resume() alike', async () => {
    const o = counter('asks', createMemoryStore(), () => 'ok?');
    const throwing = (key: string) =>
      Object.defineProperty({}, key, {
        get() {
          throw new Error('no access');
        },
      });
    await expect(
      o.run({ sender: 'user', content: 0 }, throwing('signal') as RunOptions),
    ).rejects.toThrow(
      new OrchestratorConfigError('Expected `signal` to be readable, reading it threw: no access'),
    );
    await expect(o.resume('r3', throwing('input') as ResumeOptions)).rejects.toThrow(
      new OrchestratorConfigError('Expected `input` to be readable, reading it threw: no access'),
    );
  });
});
