/**
 * The loop against hostile responders and policies: it stays interruptible whatever they return,
 * nothing happens after it settles, and what it hands back is exact.
 */
import { getEventListeners } from 'node:events';
import { describe, expect, it } from 'vitest';
import {
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
} from '../src/index.ts';

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
 * Runs `o` with a 1 ms interval timer that aborts the run once it has seen the conversation
 * progress between two of its ticks: the timer ran at least twice during the run.
 */
async function abortedByATimer(o: ConversationOrchestrator<number, number>, count: () => number) {
  const controller = new AbortController();
  const ticks: number[] = [];
  const interval = setInterval(() => {
    ticks.push(count());
    if (new Set(ticks.filter((n) => n > 0)).size >= 2) controller.abort(new Error('enough'));
  }, 1);
  try {
    const ended = await outcome(
      o.run({ sender: 'user', content: 0 }, { signal: controller.signal }),
    );
    return { ended, ticks };
  } finally {
    clearInterval(interval);
  }
}

describe('the loop gives the event loop a turn whatever responders return', () => {
  it.each([
    ['already-resolved promises', (m: Message<number>) => Promise.resolve(next(m))],
    ['async functions without I/O', async (m: Message<number>) => next(m)],
    [
      'a mix of sync answers and resolved promises',
      (m: Message<number>) => (m.content % 2 === 0 ? next(m) : Promise.resolve(next(m))),
    ],
  ])('lets a timer fire and an abort land during %s', async (_label, respond) => {
    let dispatches = 0;
    const o = counter(respond, {
      listener: (_s, _d, n) => {
        dispatches = n;
      },
    });
    const { ended, ticks } = await abortedByATimer(o, () => dispatches);
    expect(ended.ok).toBe(false);
    if (ended.ok) return;
    expect(ended.error).toBeInstanceOf(ConversationAbortedError);
    // The abort, raised by the timer mid-run, ended the run at the dispatch the timer saw, long
    // before its natural end at 5,000,000 dispatches.
    expect(ended.error.dispatchCount).toBe(ticks.at(-1));
    expect(ended.error.dispatchCount).toBeLessThan(5_000_000);
  });

  it('ends a run of already-resolved promises at its timeout() (checked after every dispatch)', async () => {
    const result = await counter((m) => Promise.resolve(next(m)), {
      termination: timeout(20),
    }).run({ sender: 'user', content: 0 });
    expect(result.decision.reason).toBe('timeout');
    expect(result.dispatchCount).toBeLessThan(5_000_000);
  });

  it('lets a timer fire and an abort land when an async turn policy answers at once', async () => {
    let dispatches = 0;
    const o = counter(next, {
      turnPolicy: async (_m, _s, rs) => rs,
      listener: (_s, _d, n) => {
        dispatches = n;
      },
    });
    const { ended, ticks } = await abortedByATimer(o, () => dispatches);
    expect(ended.ok).toBe(false);
    if (ended.ok) return;
    expect(ended.error.reason).toBe('aborted');
    expect(ended.error.dispatchCount).toBe(ticks.at(-1));
    expect(ended.error.dispatchCount).toBeLessThan(5_000_000);
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
    expect(process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length).toBe(before);
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
