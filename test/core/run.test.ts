/**
 * The loop against hostile responders and policies: it stays interruptible whatever they return,
 * nothing happens after it settles, and what it hands back is exact.
 */
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import {
  allOf,
  anyOf,
  ConversationAbortedError,
  type ConversationError,
  type ConversationObserver,
  ConversationOrchestrator,
  type Message,
  maxDispatches,
  type OrchestratorOptions,
  PolicyError,
  type TerminationDecision,
  type TerminationPolicy,
  timeout,
} from '../../src/index.ts';

type Counter = OrchestratorOptions<number, number>;

/** One responder that answers the last number plus one; how it answers is up to the test. */
function counter(
  respond: (m: Message<number>) => unknown,
  options: Partial<Counter> = {},
): ConversationOrchestrator<number, number> {
  return new ConversationOrchestrator<number, number>({
    name: 'counter',
    responders: [
      {
        name: 'a',
        respond: respond as Counter['responders'][number]['respond'],
      },
    ],
    turnPolicy: (_m, _s, rs) => rs,
    projection: { initial: () => 0, fold: (_s, m) => m.content },
    termination: maxDispatches(5_000_000),
    ...options,
  });
}

const next = (m: Message<number>): Message<number> => ({ sender: 'a', content: m.content + 1 });

/** An observer that records every hook call, and whether any came after the run settled. */
function recordingObserver() {
  const calls: string[] = [];
  let settled = false;
  let afterSettle = 0;
  const note = (name: string) => {
    calls.push(name);
    if (settled) afterSettle++;
  };
  const observer: ConversationObserver<number, number> = {
    startConversation: () => ({
      onResponderStart: () => note('start'),
      onDispatch: (info) => note(`dispatch ${info.dispatchCount}`),
      onResponderEnd: () => note('end'),
      onListenerError: () => note('listenerError'),
      onConversationEnd: () => note('conversationEnd'),
    }),
  };
  return {
    observer,
    calls,
    settle: () => {
      settled = true;
    },
    afterSettle: () => afterSettle,
    dispatches: () => calls.filter((c) => c.startsWith('dispatch')).length,
  };
}

async function outcome<T>(promise: Promise<T>) {
  return promise.then(
    (result) => ({ ok: true as const, result }),
    (error: ConversationError<number, number>) => ({ ok: false as const, error }),
  );
}

/**
 * Runs a counter orchestrator with `respond` and a 1 ms interval timer that aborts the run once it
 * has seen the conversation progress between two of its ticks (so timers ran during the run), and
 * checks that the abort ended the run at exactly the dispatch the timer saw, long before its
 * natural end at 5,000,000 dispatches.
 */
async function expectAbortedByATimer(
  respond: (m: Message<number>) => unknown,
  options: Partial<Counter> = {},
): Promise<void> {
  let dispatches = 0;
  const o = counter(respond, {
    ...options,
    listener: (_s, _d, n) => {
      dispatches = n;
    },
  });
  const controller = new AbortController();
  const ticks: number[] = [];
  const interval = setInterval(() => {
    ticks.push(dispatches);
    if (new Set(ticks.filter((n) => n > 0)).size >= 2) controller.abort(new Error('enough'));
  }, 1);
  let ended: Awaited<ReturnType<typeof outcome>>;
  try {
    ended = await outcome(o.run({ sender: 'user', content: 0 }, { signal: controller.signal }));
  } finally {
    clearInterval(interval);
  }
  expect(ended.ok).toBe(false);
  if (ended.ok) return;
  expect(ended.error).toBeInstanceOf(ConversationAbortedError);
  expect(ended.error.dispatchCount).toBe(ticks.at(-1));
  expect(ended.error.dispatchCount).toBeLessThan(5_000_000);
}

describe('the loop gives the event loop a turn whatever responders return', () => {
  const asyncTurn: Counter['turnPolicy'] = async (_m, _s, rs) => rs;
  it.each<[string, (m: Message<number>) => unknown, Partial<Counter>]>([
    ['already-resolved promises', (m) => Promise.resolve(next(m)), {}],
    ['async functions without I/O', async (m) => next(m), {}],
    [
      'a mix of sync answers and resolved promises',
      (m) => (m.content % 2 === 0 ? next(m) : Promise.resolve(next(m))),
      {},
    ],
    ['an async turn policy that answers at once', next, { turnPolicy: asyncTurn }],
    [
      'an async turn policy and async responders (every step waits)',
      async (m) => next(m),
      { turnPolicy: asyncTurn },
    ],
    [
      'one message answered by millions of async responders',
      async () => undefined,
      {
        turnPolicy: (_m, _s, rs) =>
          Array.from({ length: 5_000_000 }, () => rs[0] as (typeof rs)[0]),
      },
    ],
  ])('lets a timer fire and an abort land during %s', async (_label, respond, options) => {
    await expectAbortedByATimer(respond, options);
  });

  it('ends a run of already-resolved promises at its timeout() (checked after every dispatch)', async () => {
    const result = await counter((m) => Promise.resolve(next(m)), {
      termination: timeout(20),
    }).run({ sender: 'user', content: 0 });
    expect(result.decision.reason).toBe('timeout');
    expect(result.dispatchCount).toBeLessThan(5_000_000);
  });
});

describe('nothing happens after the run has settled', () => {
  it('drops the answer of a synchronous responder that aborts the run itself', async () => {
    const controller = new AbortController();
    const listened: number[] = [];
    const folded: number[] = [];
    const recorder = recordingObserver();
    const o = new ConversationOrchestrator<number, number>({
      name: 'self_abort',
      responders: [
        {
          name: 'a',
          respond: (m) => {
            if (m.content === 2) controller.abort(new Error('from inside'));
            return next(m);
          },
        },
      ],
      turnPolicy: (_m, _s, rs) => rs,
      projection: {
        initial: () => 0,
        fold: (_s, m) => {
          folded.push(m.content);
          return m.content;
        },
      },
      termination: maxDispatches(10),
      listener: (_s, _d, n) => {
        listened.push(n);
      },
      observers: [recorder.observer],
    });
    const ended = await outcome(
      o.run({ sender: 'user', content: 0 }, { signal: controller.signal }),
    );
    recorder.settle();
    await new Promise((resolve) => setImmediate(resolve));
    expect(ended.ok).toBe(false);
    if (ended.ok) return;
    expect(ended.error.reason).toBe('aborted');
    expect(ended.error.dispatchCount).toBe(2);
    expect(ended.error.state.projection).toBe(2);
    expect(folded).toEqual([1, 2]);
    expect(listened).toEqual([1, 2]);
    expect(recorder.dispatches()).toBe(2);
    expect(recorder.calls.at(-1)).toBe('conversationEnd');
    expect(recorder.afterSettle()).toBe(0);
  });

  it.each([
    ['the fold', 'fold'],
    ['the termination policy', 'termination'],
    ['the listener', 'listener'],
  ] as const)('stops at once when %s aborts the run', async (_label, where) => {
    const controller = new AbortController();
    const listened: number[] = [];
    const checked: number[] = [];
    const abortAt = 3;
    const o = new ConversationOrchestrator<number, number>({
      name: 'abort_inside',
      responders: [{ name: 'a', respond: next }],
      turnPolicy: (_m, _s, rs) => rs,
      projection: {
        initial: () => 0,
        fold: (_s, m) => {
          if (where === 'fold' && m.content === abortAt) controller.abort();
          return m.content;
        },
      },
      termination: {
        name: 'checking',
        start: () => (state) => {
          checked.push(state.dispatchCount);
          if (where === 'termination' && state.dispatchCount === abortAt) controller.abort();
          return { terminate: false, reason: 'continue' };
        },
      },
      listener: (_s, _d, n) => {
        listened.push(n);
        if (where === 'listener' && n === abortAt) controller.abort();
      },
    });
    const ended = await outcome(
      o.run({ sender: 'user', content: 0 }, { signal: controller.signal }),
    );
    await new Promise((resolve) => setImmediate(resolve));
    expect(ended.ok).toBe(false);
    if (ended.ok) return;
    expect(ended.error.reason).toBe('aborted');
    // A dispatch counts once it is decided: an abort from the fold or the termination policy ends
    // the run before dispatch 3 counts; one from the listener comes after it did.
    const counted = where === 'listener' ? abortAt : abortAt - 1;
    expect(ended.error.dispatchCount).toBe(counted);
    expect(listened).toEqual(Array.from({ length: counted }, (_, i) => i + 1));
    expect(checked.at(-1)).toBe(where === 'fold' ? abortAt - 1 : abortAt);
  });

  it('ignores a late answer after an abort and leaves no timer or abort listener behind', async () => {
    const controller = new AbortController();
    let answer: ((m: Message<number>) => void) | undefined;
    const listened: number[] = [];
    const o = counter(
      (m) =>
        m.content < 2
          ? next(m)
          : new Promise<Message<number>>((resolve) => {
              answer = resolve;
            }),
      {
        dispatchTimeoutMs: 60_000,
        listener: (_s, _d, n) => {
          listened.push(n);
        },
      },
    );
    const before = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const run = outcome(o.run({ sender: 'user', content: 0 }, { signal: controller.signal }));
    await new Promise((resolve) => setImmediate(resolve));
    controller.abort();
    const ended = await run;
    answer?.({ sender: 'a', content: 99 });
    await new Promise((resolve) => setImmediate(resolve));
    expect(ended.ok).toBe(false);
    expect(listened).toEqual([1, 2]);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    // At most as many as before: the run left none (a timer of an earlier test may have fired
    // meanwhile, which made an exact count fail on a loaded machine).
    expect(
      process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length,
    ).toBeLessThanOrEqual(before);
  });

  it('removes its abort listener and leaves no immediate after a normal end', async () => {
    const controller = new AbortController();
    const result = await counter(next, {
      termination: maxDispatches(100_000),
      yieldIntervalMs: 0,
    }).run({ sender: 'user', content: 0 }, { signal: controller.signal });
    expect(result.dispatchCount).toBe(100_000);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
    expect(process.getActiveResourcesInfo()).not.toContain('Immediate');
  });

  it('ignores a foreign thenable that answers twice', async () => {
    const listened: number[] = [];
    const twice = (m: Message<number>) => ({
      // biome-ignore lint/suspicious/noThenProperty: a hostile foreign thenable is the point
      then(onValue: (value: Message<number>) => void) {
        onValue(next(m));
        onValue({ sender: 'a', content: -1 });
      },
    });
    const result = await counter(twice, {
      termination: maxDispatches(3),
      listener: (_s, _d, n) => {
        listened.push(n);
      },
    }).run({ sender: 'user', content: 0 });
    expect(result.state.projection).toBe(3);
    expect(listened).toEqual([1, 2, 3]);
  });
});

describe("the termination policy's answer is checked", () => {
  const returning = (value: unknown): TerminationPolicy<number, number> => ({
    name: 'sloppy',
    start: () => () => value as TerminationDecision,
  });

  it.each([
    [true, '`true` (boolean)'],
    [undefined, '`undefined` (undefined)'],
    ['stop', '`"stop"` (string)'],
    [{ terminate: 'yes', reason: 'done' }, '`{"terminate":"yes","reason":"done"}` (object)'],
    [null, '`null` (null)'],
  ])('rejects a decision of %j with a PolicyError saying what came', async (value, shown) => {
    const listened: unknown[] = [];
    const ended = await outcome(
      counter(next, {
        termination: returning(value),
        listener: (_s, d) => {
          listened.push(d);
        },
      }).run({ sender: 'user', content: 0 }),
    );
    expect(ended.ok).toBe(false);
    if (ended.ok) return;
    expect(ended.error).toBeInstanceOf(PolicyError);
    expect((ended.error as PolicyError).stage).toBe('termination');
    expect(ended.error.message).toBe(
      `The termination policy failed: Expected termination policy \`sloppy\` to return a decision ({ terminate: boolean, reason: string }), got ${shown}`,
    );
    expect(ended.error.dispatchCount).toBe(0);
    expect(listened).toEqual([]);
  });

  it('does not count the dispatch whose termination check threw, and keeps what it folded', async () => {
    const listened: number[] = [];
    const recorder = recordingObserver();
    const ended = await outcome(
      counter(next, {
        termination: {
          name: 'throws_at_4',
          start: () => (state) => {
            if (state.dispatchCount === 4) throw new Error('policy bug');
            return { terminate: false, reason: 'continue' };
          },
        },
        listener: (_s, _d, n) => {
          listened.push(n);
        },
        observers: [recorder.observer],
      }).run({ sender: 'user', content: 0 }),
    );
    expect(ended.ok).toBe(false);
    if (ended.ok) return;
    expect(ended.error).toBeInstanceOf(PolicyError);
    expect(ended.error.message).toBe('The termination policy failed: policy bug');
    expect(ended.error.dispatchCount).toBe(3);
    expect(ended.error.state.dispatchCount).toBe(3);
    // The fourth answer was folded before the check threw: nothing is lost.
    expect(ended.error.state.projection).toBe(4);
    expect(ended.error.state.lastMessage).toEqual({ sender: 'a', content: 4 });
    expect(listened).toEqual([1, 2, 3]);
    expect(recorder.dispatches()).toBe(3);
  });
});

describe('the final state is final', () => {
  it('reports an empty queue at queue_exhausted', async () => {
    const o = new ConversationOrchestrator<number, number>({
      name: 'fanout',
      responders: [
        {
          name: 'a',
          respond: (m) =>
            m.sender === 'user'
              ? [
                  { sender: 'a', content: 1 },
                  { sender: 'a', content: 2 },
                  { sender: 'a', content: 3 },
                ]
              : undefined,
        },
      ],
      turnPolicy: (_m, _s, rs) => rs,
      projection: { initial: () => 0, fold: (s, m) => s + m.content },
      termination: maxDispatches(100),
    });
    const result = await o.run({ sender: 'user', content: 0 });
    expect(result.decision.reason).toBe('queue_exhausted');
    expect(result.dispatchCount).toBe(4);
    expect(result.state.queueDepth).toBe(0);
    expect(result.state.dispatchCount).toBe(4);
    expect(result.state.projection).toBe(6);
  });

  it('reports the queue as it stood when a terminating decision ends the run', async () => {
    const result = await counter((m) => [next(m), next(m)], {
      termination: maxDispatches(3),
    }).run({ sender: 'user', content: 0 });
    expect(result.dispatchCount).toBe(3);
    // 1 answer to the input (2 queued), then two more answers of 2 each, one message consumed each.
    expect(result.state.queueDepth).toBe(4);
  });
});

/** Collects process warnings of `type` while `body` runs. */
async function warningsDuring(type: string, body: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  const onWarning = (w: Error) => {
    if (w.name === type) seen.push(w.message);
  };
  process.on('warning', onWarning);
  try {
    await body();
    // Warnings are emitted on the next tick.
    await new Promise((resolve) => setImmediate(resolve));
    return seen;
  } finally {
    process.off('warning', onWarning);
  }
}

describe('observers that misbehave never break the run', () => {
  const unprintable = () => {
    const value = Object.create(null) as object;
    return value;
  };

  it.each([
    ['startConversation returns null', { startConversation: () => null }],
    [
      'startConversation throws something unprintable',
      {
        startConversation: () => {
          throw unprintable();
        },
      },
    ],
    [
      'onConversationEnd throws something unprintable',
      {
        startConversation: () => ({
          onConversationEnd: () => {
            throw unprintable();
          },
        }),
      },
    ],
    [
      'onDispatch throws something unprintable',
      {
        startConversation: () => ({
          onDispatch: () => {
            throw unprintable();
          },
        }),
      },
    ],
    [
      'runConversation throws after running the conversation',
      {
        startConversation: () => ({
          runConversation: (run: () => unknown) => {
            run();
            throw new Error('wrapper bug');
          },
        }),
      },
    ],
    [
      'runConversation runs the conversation twice',
      {
        startConversation: () => ({
          runConversation: (run: () => unknown) => {
            run();
            return run();
          },
        }),
      },
    ],
    [
      'runConversation never runs it',
      { startConversation: () => ({ runConversation: () => undefined }) },
    ],
    [
      'runResponder throws before invoking',
      {
        startConversation: () => ({
          runResponder: () => {
            throw new Error('hook bug');
          },
        }),
      },
    ],
    [
      'runResponder never invokes',
      { startConversation: () => ({ runResponder: () => undefined }) },
    ],
    [
      'runResponder invokes twice',
      {
        startConversation: () => ({
          runResponder: (_i: number, invoke: () => unknown) => {
            invoke();
            return invoke();
          },
        }),
      },
    ],
  ])('finishes the conversation exactly when %s', async (_label, observer) => {
    let invocations = 0;
    const listened: number[] = [];
    const o = counter(
      async (m) => {
        invocations++;
        return next(m);
      },
      {
        termination: maxDispatches(3),
        observers: [observer as unknown as ConversationObserver<number, number>],
        listener: (_s, _d, n) => {
          listened.push(n);
        },
      },
    );
    const warnings = await warningsDuring('ConversationObserverWarning', async () => {
      const result = await o.run({ sender: 'user', content: 0 });
      expect(result.decision.reason).toBe('max_dispatches');
      expect(result.dispatchCount).toBe(3);
      expect(result.state.projection).toBe(3);
    });
    expect(invocations).toBe(3);
    expect(listened).toEqual([1, 2, 3]);
    // Reported, rate-limited: at most one warning per minute per process.
    expect(warnings.length).toBeLessThanOrEqual(1);
  });

  it('lets an abort raised in onDispatch land after the listener heard of that dispatch', async () => {
    const controller = new AbortController();
    const recorder = recordingObserver();
    const listened: number[] = [];
    const aborter: ConversationObserver<number, number> = {
      startConversation: () => ({
        onDispatch: (info) => {
          if (info.dispatchCount === 3) controller.abort();
        },
      }),
    };
    const ended = await outcome(
      counter(next, {
        observers: [aborter, recorder.observer],
        listener: (_s, _d, n) => {
          listened.push(n);
        },
      }).run({ sender: 'user', content: 0 }, { signal: controller.signal }),
    );
    expect(ended.ok).toBe(false);
    if (ended.ok) return;
    expect(ended.error.reason).toBe('aborted');
    expect(ended.error.dispatchCount).toBe(3);
    expect(listened).toEqual([1, 2, 3]);
    expect(recorder.dispatches()).toBe(3);
  });

  it('keeps a terminating decision when the listener aborts on hearing it', async () => {
    const controller = new AbortController();
    const result = await counter(next, {
      termination: maxDispatches(3),
      listener: (_s, d) => {
        if (d.terminate) controller.abort();
      },
    }).run({ sender: 'user', content: 0 }, { signal: controller.signal });
    expect(result.decision.reason).toBe('max_dispatches');
    expect(result.dispatchCount).toBe(3);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('passes each responder its declared provider', async () => {
    let providers: readonly (string | undefined)[] | undefined;
    await new ConversationOrchestrator<number, number>({
      name: 'providers',
      responders: [
        { name: 'llm', provider: 'openai', respond: () => undefined },
        { name: 'desk', respond: () => undefined },
      ],
      turnPolicy: (_m, _s, rs) => rs,
      projection: { initial: () => 0, fold: (s) => s },
      termination: maxDispatches(5),
      observers: [
        {
          startConversation: (start) => {
            providers = start.providers;
            return undefined;
          },
        },
      ],
    }).run({ sender: 'user', content: 0 });
    expect(providers).toEqual(['openai', undefined]);
  });
});

describe('odd answers are failures of whoever gave them, said clearly', () => {
  const throwingThen = () => ({
    // biome-ignore lint/suspicious/noThenProperty: a hostile thenable is the point
    get then(): never {
      throw new Error('then getter');
    },
  });

  it('ignores what a listener returns even when its then getter throws', async () => {
    const errors: unknown[] = [];
    const result = await counter(next, {
      termination: maxDispatches(3),
      listener: throwingThen,
      onListenerError: (e) => errors.push(e),
    }).run({ sender: 'user', content: 0 });
    expect(result.dispatchCount).toBe(3);
    expect(errors.map((e) => (e as Error).message)).toEqual([
      'then getter',
      'then getter',
      'then getter',
    ]);
  });

  it("treats a responder answer whose then getter throws as that responder's failure", async () => {
    const ended = await outcome(
      counter(throwingThen, { termination: maxDispatches(3) }).run({ sender: 'user', content: 0 }),
    );
    expect(ended.ok).toBe(false);
    if (ended.ok) return;
    expect(ended.error.message).toBe('Responder `a` failed: then getter');
  });

  it('uses the native then of a Promise subclass, so it settles once', async () => {
    class Twice<T> extends Promise<T> {
      // biome-ignore lint/suspicious/noThenProperty: a Promise subclass that settles twice is the point
      override then<A = T, B = never>(
        ok?: ((value: T) => A | PromiseLike<A>) | null,
        ko?: ((reason: unknown) => B | PromiseLike<B>) | null,
      ): Promise<A | B> {
        const derived = super.then(ok, ko);
        super.then(ok, ko);
        return derived;
      }
    }
    const listened: number[] = [];
    const result = await counter((m) => Twice.resolve(next(m)), {
      termination: maxDispatches(4),
      listener: (s, _d, n) => {
        listened.push(n * 100 + s.projection);
      },
    }).run({ sender: 'user', content: 0 });
    expect(result.state.projection).toBe(4);
    expect(listened).toEqual([101, 202, 303, 404]);
  });

  it('says which element of an array answer is not a message', async () => {
    const ended = await outcome(
      counter((m) => [next(m), 42], { termination: maxDispatches(3) }).run({
        sender: 'user',
        content: 0,
      }),
    );
    expect(ended.ok).toBe(false);
    if (ended.ok) return;
    expect(ended.error.message).toBe(
      'Expected responder `a` to return a message ({ sender: string, content }), an array of messages or nothing, got `42` (number) at index 1 of its array',
    );
  });

  it("names a responder object that is not one of the orchestrator's own", async () => {
    const stranger = { name: 'a', respond: next };
    const ended = await outcome(
      counter(next, { turnPolicy: () => [stranger] }).run({ sender: 'user', content: 0 }),
    );
    expect(ended.ok).toBe(false);
    if (ended.ok) return;
    expect(ended.error.message).toBe(
      'The turn policy failed: The turn policy selected a responder object named `"a"` (string) that is not one of `counter`\'s (select by name, or pass the orchestrator\'s own responder objects) (known: a)',
    );
  });

  it('checks the decisions of the members of anyOf and allOf', async () => {
    const sloppy: TerminationPolicy<number, number> = {
      name: 'sloppy',
      start: () => () => true as unknown as TerminationDecision,
    };
    for (const termination of [
      anyOf(sloppy, maxDispatches(10)),
      allOf(maxDispatches(10), sloppy),
    ]) {
      const ended = await outcome(
        counter(next, { termination }).run({ sender: 'user', content: 0 }),
      );
      expect(ended.ok).toBe(false);
      if (ended.ok) continue;
      expect(ended.error).toBeInstanceOf(PolicyError);
      expect(ended.error.message).toMatch(
        /^The termination policy failed: Expected termination policy `sloppy` to return a decision \(\{ terminate: boolean, reason: string \}\) \(member \d of a composite\), got `true` \(boolean\)$/,
      );
    }
  });

  it('refuses a terminating reason that is not snake_case or that the loop reserves', async () => {
    for (const reason of ['aborted', 'Hello World!', '']) {
      const ended = await outcome(
        counter(next, {
          termination: { name: 'odd', start: () => () => ({ terminate: true, reason }) },
        }).run({ sender: 'user', content: 0 }),
      );
      expect(ended.ok).toBe(false);
      if (ended.ok) continue;
      expect(ended.error.message).toContain(
        'Expected termination policy `odd` to end with a snake_case reason of 1-40 characters other than continue, queue_exhausted, aborted, deadline, error, queue_overflow, got',
      );
    }
  });

  it('reports an onResponderError function that throws, and stops', async () => {
    const warnings = await warningsDuring('ConversationResponderErrorPolicyWarning', async () => {
      const ended = await outcome(
        counter(
          () => {
            throw new Error('responder bug');
          },
          {
            onResponderError: () => {
              throw new Error('policy bug');
            },
          },
        ).run({ sender: 'user', content: 0 }),
      );
      expect(ended.ok).toBe(false);
    });
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toContain(
      'onResponderError of orchestrator `counter` threw (the run stops): policy bug',
    );
  });
});

describe('many runs share one signal', () => {
  it('adds one abort listener for all of them and leaves none behind', async () => {
    const controller = new AbortController();
    const warnings = await warningsDuring('MaxListenersExceededWarning', async () => {
      const runs = Array.from({ length: 50 }, () =>
        counter((m) => new Promise<Message<number>>((r) => setTimeout(() => r(next(m)), 1)), {
          termination: maxDispatches(20),
        }).run({ sender: 'user', content: 0 }, { signal: controller.signal }),
      );
      await new Promise((resolve) => setImmediate(resolve));
      expect(getEventListeners(controller.signal, 'abort')).toHaveLength(1);
      const results = await Promise.all(runs);
      expect(results.every((r) => r.dispatchCount === 20)).toBe(true);
    });
    expect(warnings).toEqual([]);
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });

  it('aborts every run that shares it', async () => {
    const controller = new AbortController();
    const runs = Array.from({ length: 20 }, () =>
      outcome(
        counter((m) => new Promise<Message<number>>((r) => setTimeout(() => r(next(m)), 5))).run(
          { sender: 'user', content: 0 },
          { signal: controller.signal },
        ),
      ),
    );
    await new Promise((resolve) => setTimeout(resolve, 1));
    controller.abort();
    const ended = await Promise.all(runs);
    expect(ended.map((e) => (e.ok ? 'ok' : e.error.reason))).toEqual(Array(20).fill('aborted'));
    expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
  });
});
