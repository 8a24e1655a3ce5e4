/**
 * How a durable conversation ends in the store: the ending stored once (its projection not
 * twice), a stored failure keeping its class, a deletion during the run named as such, values
 * JSON would change refused with their path, `cancel()`, and the observers told whether a
 * segment's end ended the conversation (`ended`). Each through the public API.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  CheckpointError,
  type CheckpointOptions,
  ConversationAbortedError,
  type ConversationEnd,
  ConversationLeaseError,
  ConversationNotFoundError,
  type ConversationObserver,
  ConversationOrchestrator,
  type ConversationStore,
  createMemoryStore,
  DispatchDeadlineError,
  maxDispatches,
  OrchestratorConfigError,
  PolicyError,
  type Responder,
  ResponderError,
  roundRobin,
  suspend,
} from '../../src/index.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';
import { oneResponder } from '../helpers/durable-orchestrators.ts';

interface Options<S> {
  readonly store?: ConversationStore;
  readonly observers?: ConversationObserver<S, unknown>[];
  readonly dispatchTimeoutMs?: number;
  readonly steps?: number;
  readonly projection?: { initial: () => S; fold: (s: S, m: { content: unknown }) => S };
  readonly checkpoints?: CheckpointOptions;
}

function make<S = number>(respond: Responder<S, unknown>['respond'], options: Options<S> = {}) {
  return oneResponder(respond, {
    ...options,
    name: 'endings',
    store: options.store ?? createMemoryStore(),
  });
}

const input = { sender: 'user', content: 'go' };
const answer = () => ({ sender: 'a', content: 'ok' });

/** An observer that keeps each segment's end. */
function endings<S>(): { observer: ConversationObserver<S, unknown>; ends: ConversationEnd<S>[] } {
  const ends: ConversationEnd<S>[] = [];
  return {
    ends,
    observer: {
      startConversation: () => ({ onConversationEnd: (end) => void ends.push(end) }),
    },
  };
}

describe('the stored ending', () => {
  it('holds the projection once: a projection over half of maxCheckpointBytes still ends, and resume() answers it', async () => {
    const store = createMemoryStore({ maxCheckpointBytes: 1_000_000 });
    const big = 'x'.repeat(600_000);
    const o = make<string>(answer, { store, projection: { initial: () => '', fold: () => big } });
    const result = await o.run(input, { conversationId: 'big' });
    expect(result.decision.reason).toBe('max_dispatches');
    const stored = await store.get('big');
    expect(stored?.status).toBe('ended');
    const again = await o.resume('big');
    expect(again.state.projection).toBe(big);
    expect(again.dispatchCount).toBe(3);
  });

  it('committing whole states, still refuses a projection past maxCheckpointBytes, naming both sizes', async () => {
    const store = createMemoryStore({ maxCheckpointBytes: 1_000_000 });
    const big = 'x'.repeat(1_100_000);
    const o = make<string>(answer, {
      store,
      checkpoints: { incremental: false },
      projection: { initial: () => '', fold: () => big },
    });
    const error = await o.run(input, { conversationId: 'huge' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CheckpointError);
    expect((error as CheckpointError).message).toMatch(
      /expected at most 1000000 bytes \(the store's maxCheckpointBytes\), got 1100\d{3}/,
    );
  });

  it('with entries, refuses a conversation past checkpoints.maxConversationBytes, naming it and both sizes, its state handed back', async () => {
    const store = createMemoryStore({ maxCheckpointBytes: 1_000_000 });
    const big = 'x'.repeat(1_100_000);
    const o = make<string>(answer, {
      store,
      checkpoints: { maxConversationBytes: 1_050_000 },
      projection: { initial: () => '', fold: () => big },
    });
    const error = await o.run(input, { conversationId: 'huge' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CheckpointError);
    expect((error as CheckpointError).message).toMatch(
      /outgrew the orchestrator's checkpoints\.maxConversationBytes: expected at most 1050000 bytes in the store, got 1100\d{3}/,
    );
    expect((error as CheckpointError).state.projection).toBe(big);
    // Ended in the store as failed, not left running for recover() to retry forever.
    expect((await store.get('huge'))?.status).toBe('ended');
  });

  it('holds checkpoints.maxConversationBytes when every commit is whole too, and at the creation', async () => {
    const store = createMemoryStore();
    const grown = 'y'.repeat(30_000);
    const whole = make<string>(answer, {
      store,
      checkpoints: { incremental: false, maxConversationBytes: 20_000 },
      projection: { initial: () => '', fold: () => grown },
    });
    const error = await whole.run(input, { conversationId: 'whole' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CheckpointError);
    expect((error as CheckpointError).message).toMatch(
      /checkpoints\.maxConversationBytes: expected at most 20000 bytes in the store, got 30\d{3}/,
    );
    expect((error as CheckpointError).state.projection).toBe(grown);
    expect((await store.get('whole'))?.status).toBe('ended');
    // An input the bound cannot hold is refused before anything is stored.
    const tiny = make<string>(answer, {
      store,
      checkpoints: { maxConversationBytes: 10 },
      projection: { initial: () => '', fold: () => '' },
    });
    const refused = await tiny.run(input, { conversationId: 'tiny' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(CheckpointError);
    expect((refused as CheckpointError).message).toMatch(
      /maxConversationBytes: expected at most 10 bytes in the store, got \d+/,
    );
    expect(await store.get('tiny')).toBeUndefined();
  });
});

describe('a stored failure, resumed', () => {
  it('rejects with the class it failed with: a ResponderError names its responder and keeps the usage', async () => {
    const store = createMemoryStore();
    let n = 0;
    const o = make(
      (_m, _s, context) => {
        context.reportUsage({ inputTokens: 5, outputTokens: 2 });
        if (++n === 2) throw new Error('boom');
        return answer();
      },
      { store },
    );
    const first = await o.run(input, { conversationId: 'r1' }).catch((e: unknown) => e);
    expect(first).toBeInstanceOf(ResponderError);
    const again = await o.resume('r1').catch((e: unknown) => e);
    expect(again).toBeInstanceOf(ResponderError);
    expect(again).toMatchObject({
      name: 'ResponderError',
      responder: 'a',
      reason: 'error',
      message: (first as ResponderError).message,
      dispatchCount: 1,
      conversationId: 'r1',
    });
    expect((again as ResponderError).usage).toMatchObject({ inputTokens: 10, outputTokens: 4 });
    expect((again as ResponderError).state.projection).toBe(1);
  });

  it('keeps a PolicyError stage and a DispatchDeadlineError deadline', async () => {
    const store = createMemoryStore();
    const folding = make(answer, {
      store,
      projection: {
        initial: () => 0,
        fold: () => {
          throw new Error('no fold');
        },
      },
    });
    await expect(folding.run(input, { conversationId: 'p1' })).rejects.toBeInstanceOf(PolicyError);
    const policy = await folding.resume('p1').catch((e: unknown) => e);
    expect(policy).toBeInstanceOf(PolicyError);
    expect((policy as PolicyError).stage).toBe('projection');

    const slow = make(() => new Promise(() => {}), { store, dispatchTimeoutMs: 20 });
    await expect(slow.run(input, { conversationId: 'd1' })).rejects.toBeInstanceOf(
      DispatchDeadlineError,
    );
    const deadline = await slow.resume('d1').catch((e: unknown) => e);
    expect(deadline).toBeInstanceOf(DispatchDeadlineError);
    expect(deadline).toMatchObject({ responder: 'a', deadlineMs: 20, reason: 'deadline' });
  });
});

describe('a conversation deleted while it runs', () => {
  it('stops with a ConversationLeaseError that says it was deleted, carrying the state reached', async () => {
    const store = createMemoryStore();
    let n = 0;
    const o = make(
      async () => {
        if (++n === 2) await store.delete('gone');
        return answer();
      },
      { store },
    );
    const error = await o.run(input, { conversationId: 'gone' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConversationLeaseError);
    expect((error as ConversationLeaseError).message).toMatch(
      /^Conversation gone was deleted from the store while it ran/,
    );
    expect((error as ConversationLeaseError).dispatchCount).toBe(2);
  });
});

describe('values JSON would change', () => {
  const cases: [string, () => unknown, string][] = [
    ['-0', () => ({ at: -0 }), 'projection.at'],
    [
      'a symbol-keyed property',
      () => ({ inner: { [Symbol('k')]: 1 } }),
      'projection.inner[Symbol(k)]',
    ],
    [
      'a getter that throws',
      () => ({
        get x(): number {
          throw new Error('no read');
        },
      }),
      'projection.x',
    ],
  ];
  for (const [what, value, path] of cases) {
    it(`refuses ${what} with a CheckpointError naming ${path}`, async () => {
      const o = make<unknown>(answer, { projection: { initial: () => 0, fold: value } });
      const error = await o.run(input).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CheckpointError);
      expect((error as CheckpointError).path).toBe(path);
      expect((error as CheckpointError).message).toContain(path);
    });
  }
});

describe('cancel()', () => {
  it('ends a suspended conversation as aborted: resume() then rejects with that error and the state reached', async () => {
    const store = createMemoryStore();
    const { observer, ends } = endings<number>();
    const o = make(
      (_m, s) => (s.dispatchCount === 1 ? suspend({ question: 'go on?' }) : answer()),
      { store, observers: [observer], steps: 5 },
    );
    const waiting = await o.run(input, { conversationId: 's1' });
    expect(waiting.suspended).toBeDefined();
    expect(await o.cancel('s1', { reason: 'nobody answered' })).toBe(true);
    expect((await store.get('s1'))?.status).toBe('ended');
    const error = await o.resume('s1').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConversationAbortedError);
    expect(error).toMatchObject({ reason: 'aborted', dispatchCount: waiting.dispatchCount });
    expect((error as ConversationAbortedError).cause).toBe('nobody answered');
    expect((error as ConversationAbortedError).state.projection).toBe(1);
    // Nothing ran: the cancel segment invoked no responder; it is an ending, the suspension not.
    expect(ends.map((e) => [e.ok, e.ended])).toEqual([
      [true, false],
      [false, true],
    ]);
    expect(await o.cancel('s1')).toBe(false);
    expect(await o.recover()).toMatchObject({ resumed: 0 });
  });

  it('ends a conversation an abort left running, which recover() then leaves alone', async () => {
    const store = createMemoryStore();
    const controller = new AbortController();
    let calls = 0;
    const o = make(
      () => {
        calls++;
        if (calls === 2) controller.abort();
        return answer();
      },
      { store, steps: 10 },
    );
    await expect(
      o.run(input, { conversationId: 'a1', signal: controller.signal }),
    ).rejects.toBeInstanceOf(ConversationAbortedError);
    expect((await store.get('a1'))?.status).toBe('running');
    expect(await o.cancel('a1')).toBe(true);
    expect(await o.recover()).toEqual({
      resumed: 0,
      ended: 0,
      suspended: 0,
      failed: 0,
      skipped: 0,
    });
    expect(calls).toBe(2);
  });

  it('refuses a conversation a live run holds, an unknown id, a bad id or options, and an orchestrator without a store', async () => {
    const store = createMemoryStore();
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const o = make(() => gate.then(answer), { store });
    const running = o.run(input, { conversationId: 'live' });
    await new Promise((r) => setTimeout(r, 20));
    await expect(o.cancel('live')).rejects.toBeInstanceOf(ConversationLeaseError);
    release();
    await running;
    await expect(o.cancel('nobody')).rejects.toBeInstanceOf(ConversationNotFoundError);
    await expect(o.cancel('bad id!')).rejects.toBeInstanceOf(OrchestratorConfigError);
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    await expect(o.cancel('live', proxy)).rejects.toThrow(
      /Expected `options` to be an object whose options can be read/,
    );
    const memoryOnly = new ConversationOrchestrator<number, unknown>({
      name: 'plain',
      responders: [{ name: 'a', respond: answer }],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (n) => n + 1 },
      termination: maxDispatches(1),
    });
    await expect(memoryOnly.cancel('x')).rejects.toThrow(
      /Expected the orchestrator to have a `store`/,
    );
  });
});

describe('the observers learn whether a segment ended the conversation', () => {
  it('ended: true when the ending landed, false when the store refused it (then recover() ends it)', async () => {
    const inner = createMemoryStore();
    let failEnding = true;
    const store: ConversationStore = Object.assign(Object.create(inner) as ConversationStore, {
      commit: (...args: Parameters<ConversationStore['commit']>) => {
        if (args[0].status === 'ended' && failEnding) {
          failEnding = false;
          return Promise.reject(new Error('disk full'));
        }
        return inner.commit(...args);
      },
    });
    const { observer, ends } = endings<number>();
    const o = make(answer, { store, observers: [observer] });
    await expect(o.run(input, { conversationId: 'e1' })).rejects.toBeInstanceOf(CheckpointError);
    expect((await inner.get('e1'))?.status).toBe('running');
    expect(await o.recover()).toMatchObject({ resumed: 1, ended: 1 });
    expect(ends.map((e) => [e.ok, e.ended])).toEqual([
      [false, false],
      [true, true],
    ]);
    const plain = endings<number>();
    await new ConversationOrchestrator<number, unknown>({
      name: 'plain',
      responders: [{ name: 'a', respond: answer }],
      turnPolicy: roundRobin(),
      projection: { initial: () => 0, fold: (n) => n + 1 },
      termination: maxDispatches(1),
      observers: [plain.observer],
    }).run(input);
    expect(plain.ends.map((e) => e.ended)).toEqual([undefined]);
  });
});

describe('list() limits of the embedded stores', () => {
  it('answers none for limit 0 and rejects a limit that is not a non-negative integer, naming it', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'co-list-limit-'));
    const stores: ConversationStore[] = [
      createMemoryStore(),
      createSqliteStore({ path: join(dir, 'list.db') }),
    ];
    try {
      for (const store of stores) {
        expect(await store.list({ limit: 0 })).toEqual([]);
        for (const limit of [-1, 1.5, Number.NaN]) {
          await expect(store.list({ limit })).rejects.toThrow(
            /list\(\) expected `limit` to be a non-negative integer/,
          );
        }
      }
    } finally {
      for (const store of stores) await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
