// The loop's direct onDispatch call (one observation with onDispatch only) and a settled run
// letting go of its observations and its resolve/reject: observers hear of exactly the
// dispatches the result reports, nothing after the end, and the promise settles once.
import { describe, expect, it } from 'vitest';
import type { ConversationObservation, ConversationObserver } from '../../src/core/spi/observer.ts';
import { maxDispatches, type OrchestratorOptions, type Responder } from '../../src/index.ts';
import { counterOrchestrator } from '../helpers/desks.ts';

type Opts = Partial<OrchestratorOptions<number, number>>;

function make(responders: Responder<number, number>[], extra: Opts = {}) {
  return counterOrchestrator({
    name: 'settle',
    responders,
    termination: maxDispatches(5),
    ...extra,
  });
}

const inc: Responder<number, number> = {
  name: 'inc',
  respond: (m) => ({ sender: 'inc', content: m.content + 1 }),
};
const asyncInc: Responder<number, number> = {
  name: 'ainc',
  respond: async (m) => ({ sender: 'ainc', content: m.content + 1 }),
};

/** Records every hook call; `afterEnd` counts calls that came after onConversationEnd. */
function recorder(shape: 'dispatchOnly' | 'all') {
  const log: string[] = [];
  let ended = 0;
  let afterEnd = 0;
  const note = (name: string) => {
    if (ended > 0) afterEnd++;
    log.push(name);
  };
  const observer: ConversationObserver<number, number> = {
    startConversation() {
      const o: ConversationObservation<number, number> = {
        onDispatch(info) {
          note(`dispatch ${info.dispatchCount}`);
        },
        onConversationEnd() {
          note('end');
          ended++;
        },
      };
      if (shape === 'all') {
        o.onResponderStart = () => note('start');
        o.onResponderEnd = (_i, _d, f) => note(f ? 'responderFailed' : 'responderEnd');
        o.onListenerError = () => note('listenerError');
        o.runResponder = (_i, invoke) => invoke();
      }
      return o;
    },
  };
  return {
    observer,
    log,
    get ended() {
      return ended;
    },
    get afterEnd() {
      return afterEnd;
    },
  };
}

describe('the direct onDispatch call', () => {
  it('a throwing, `this`-using, replaced and deleted onDispatch: the run goes on, counts agree', async () => {
    const heard: number[] = [];
    const listened: number[] = [];
    const observer: ConversationObserver<number, number> = {
      startConversation() {
        const obs = {
          mine: heard,
          onDispatch(this: { mine: number[] }, info: { dispatchCount: number }) {
            this.mine.push(info.dispatchCount);
            if (info.dispatchCount === 2) {
              (obs as { onDispatch?: unknown }).onDispatch = function (
                this: { mine: number[] },
                i: { dispatchCount: number },
              ) {
                this.mine.push(-i.dispatchCount);
                throw new Error('replaced and throwing');
              };
            }
            if (info.dispatchCount === 4) throw new Error('boom');
          },
        };
        return obs as unknown as ConversationObservation<number, number>;
      },
    };
    const result = await make([inc], {
      observers: [observer],
      listener: (_s, _d, n) => {
        listened.push(n);
      },
    }).run({ sender: 'u', content: 0 });
    expect(result.dispatchCount).toBe(5);
    expect(listened).toEqual([1, 2, 3, 4, 5]);
    expect(heard).toEqual([1, 2, -3, -4, -5]);
  });

  it('a getter onDispatch is read at each dispatch (as through Observations.dispatched)', async () => {
    let reads = 0;
    const heard: number[] = [];
    const observer: ConversationObserver<number, number> = {
      startConversation() {
        return {
          get onDispatch() {
            reads++;
            return (info: { dispatchCount: number }) => heard.push(info.dispatchCount);
          },
        } as ConversationObservation<number, number>;
      },
    };
    const result = await make([inc], { observers: [observer] }).run({ sender: 'u', content: 0 });
    expect(heard).toEqual([1, 2, 3, 4, 5]);
    expect(result.dispatchCount).toBe(5);
    expect(reads).toBe(1 + 5);
  });

  it('an onDispatch that aborts: observer, listener and error agree on the count', async () => {
    const controller = new AbortController();
    const heard: number[] = [];
    const listened: number[] = [];
    const observer: ConversationObserver<number, number> = {
      startConversation: () => ({
        onDispatch(info) {
          heard.push(info.dispatchCount);
          if (info.dispatchCount === 3) controller.abort(new Error('stop'));
        },
      }),
    };
    const o = make([asyncInc], {
      observers: [observer],
      termination: maxDispatches(100),
      listener: (_s, _d, n) => {
        listened.push(n);
      },
    });
    const error = await o
      .run({ sender: 'u', content: 0 }, { signal: controller.signal })
      .catch((e) => e);
    expect(error.reason).toBe('aborted');
    expect(error.dispatchCount).toBe(3);
    expect(error.state.dispatchCount).toBe(3);
    expect(heard).toEqual([1, 2, 3]);
    expect(listened).toEqual([1, 2, 3]);
  });

  it.each([
    ['one observer with onDispatch only', 1, 'dispatchOnly'],
    ['two observers with onDispatch only', 2, 'dispatchOnly'],
    ['one with every hook', 1, 'all'],
  ] as const)(
    '%s plus an observer returning undefined: each hears every dispatch once',
    async (_, n, shape) => {
      const recorders = Array.from({ length: n }, () => recorder(shape));
      const none: ConversationObserver<number, number> = { startConversation: () => undefined };
      const result = await make([inc, asyncInc], {
        observers: [none, ...recorders.map((r) => r.observer), none],
      }).run({ sender: 'u', content: 0 });
      for (const r of recorders) {
        expect(r.log.filter((l) => l.startsWith('dispatch'))).toEqual(
          Array.from({ length: result.dispatchCount }, (_x, i) => `dispatch ${i + 1}`),
        );
        expect(r.ended).toBe(1);
        expect(r.afterEnd).toBe(0);
      }
    },
  );
  it('an onDispatch that re-enters the orchestrator and throws', async () => {
    const outerHeard: number[] = [];
    const inner: Promise<{ dispatchCount: number }>[] = [];
    const observer: ConversationObserver<number, number> = {
      startConversation(start) {
        return {
          onDispatch(info) {
            if (start.conversationId !== 'outer') return;
            outerHeard.push(info.dispatchCount);
            // Same orchestrator, from inside the sole onDispatch: runs to its end right here.
            inner.push(
              o.run({ sender: 'u', content: 10 }, { conversationId: `in${info.dispatchCount}` }),
            );
            throw new Error('after re-entering');
          },
        };
      },
    };
    const listened: string[] = [];
    const o = make([inc], {
      observers: [observer],
      termination: maxDispatches(3),
      listener: (s, _d, n) => {
        listened.push(`${s.conversationId}:${n}`);
      },
    });
    const result = await o.run({ sender: 'u', content: 0 }, { conversationId: 'outer' });
    expect(result.dispatchCount).toBe(3);
    expect(result.state.projection).toBe(6);
    expect(outerHeard).toEqual([1, 2, 3]);
    expect((await Promise.all(inner)).map((r) => r.dispatchCount)).toEqual([3, 3, 3]);
    expect(listened.filter((l) => l.startsWith('outer'))).toEqual([
      'outer:1',
      'outer:2',
      'outer:3',
    ]);
    expect(listened).toHaveLength(12);
  });
});

describe('a hook that throws a value whose every property read throws (a revoked-like Proxy)', () => {
  // README: a hook that throws "anything, even a value that cannot be printed" never breaks the
  // run. describeCause's fallback (Object.prototype.toString) reads @@toStringTag, which throws
  // here, so hookFailed itself throws and the conversation fails (pre-existing in errors.ts; the
  // new direct onDispatch call goes through the same hookFailed).
  const hostile = () =>
    new Proxy(
      {},
      {
        get() {
          throw new Error('no');
        },
      },
    );
  it.each([
    ['sole onDispatch (direct call)', 1],
    ['onDispatch beside another observer (Observations.dispatched)', 2],
  ])('%s', async (_, observers) => {
    const thrower: ConversationObserver<number, number> = {
      startConversation: () => ({
        onDispatch() {
          throw hostile();
        },
      }),
    };
    const quiet: ConversationObserver<number, number> = {
      startConversation: () => ({ onDispatch() {} }),
    };
    const result = await make([inc], {
      observers: observers === 1 ? [thrower] : [thrower, quiet],
    }).run({ sender: 'u', content: 0 });
    expect(result.dispatchCount).toBe(5);
  });

  it('a revoked Proxy thrown from onDispatch', async () => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    const result = await make([inc], {
      observers: [
        {
          startConversation: () => ({
            onDispatch() {
              throw proxy;
            },
          }),
        },
      ],
    }).run({ sender: 'u', content: 0 });
    expect(result.dispatchCount).toBe(5);
  });
});

describe('onConversationEnd throwing a revoked Proxy', () => {
  // Describing such a failure once threw inside Observations.ended, so the run's promise never
  // settled.
  it.each(['resolves', 'rejects'] as const)('the run still %s', async (how) => {
    const { proxy, revoke } = Proxy.revocable({}, {});
    revoke();
    const o = make(
      how === 'resolves'
        ? [inc]
        : [
            {
              name: 'bad',
              respond: () => {
                throw new Error('responder fails');
              },
            },
          ],
      {
        observers: [
          {
            startConversation: () => ({
              onConversationEnd() {
                throw proxy;
              },
            }),
          },
        ],
      },
    );
    const outcome = await Promise.race([
      o.run({ sender: 'u', content: 0 }).then(
        () => 'resolved',
        () => 'rejected',
      ),
      new Promise((r) => setTimeout(() => r('never settled'), 200)),
    ]);
    expect(outcome).toBe(how === 'resolves' ? 'resolved' : 'rejected');
  });
});

describe('a settled run', () => {
  it('an onConversationEnd that starts another run on the same orchestrator, and throws', async () => {
    const ends: string[] = [];
    let inner: Promise<unknown> | undefined;
    let depth = 0;
    const obs2: ConversationObserver<number, number> = {
      startConversation(start) {
        return {
          onConversationEnd(end) {
            ends.push(`${start.conversationId}:${end.ok ? end.result.dispatchCount : 'failed'}`);
            if (depth++ === 0) {
              inner = o2.run({ sender: 'u', content: 100 }, { conversationId: 'inner' });
              throw new Error('onConversationEnd throws after starting a run');
            }
          },
        };
      },
    };
    const o2 = make([inc], { termination: maxDispatches(3), observers: [obs2] });
    const outer = await o2.run({ sender: 'u', content: 0 }, { conversationId: 'outer' });
    expect(outer.conversationId).toBe('outer');
    expect(outer.dispatchCount).toBe(3);
    expect(outer.state.projection).toBe(6);
    const innerResult = (await inner) as { conversationId: string; state: { projection: number } };
    expect(innerResult.conversationId).toBe('inner');
    expect(innerResult.state.projection).toBe(101 + 102 + 103);
    // Sync responders: the inner run completes inside the outer's onConversationEnd.
    expect(ends).toEqual(['outer:3', 'inner:3']);
  });

  it('late answers after an abort or a deadline call no observer hook and settle nothing twice', async () => {
    for (const how of ['abort', 'deadline'] as const) {
      const r = recorder('all');
      let release: (() => void) | undefined;
      const slow: Responder<number, number> = {
        name: 'slow',
        respond: (m) =>
          m.content >= 2
            ? new Promise((resolve, reject) => {
                release = () => {
                  resolve({ sender: 'slow', content: m.content + 1 });
                  reject(new Error('late too'));
                };
              })
            : { sender: 'slow', content: m.content + 1 },
      };
      const controller = new AbortController();
      const listenerErrors: unknown[] = [];
      const o = make([slow], {
        observers: [r.observer],
        termination: maxDispatches(10),
        ...(how === 'deadline' ? { dispatchTimeoutMs: 20 } : {}),
        listener: () => Promise.reject(new Error('listener rejects late')),
        onListenerError: (e) => listenerErrors.push(e),
      });
      const settled: string[] = [];
      const p = o.run({ sender: 'u', content: 0 }, { signal: controller.signal }).then(
        (v) => settled.push(`ok ${v.dispatchCount}`),
        (e) => settled.push(`${e.reason} ${e.dispatchCount} ${e.state?.dispatchCount}`),
      );
      await new Promise((resolve) => setTimeout(resolve, 5));
      if (how === 'abort') controller.abort(new Error('stop'));
      await p;
      release?.();
      controller.abort();
      await new Promise((resolve) => setTimeout(resolve, 30));
      expect(settled).toEqual([`${how === 'abort' ? 'aborted' : 'deadline'} 2 2`]);
      expect(r.ended).toBe(1);
      expect(r.afterEnd).toBe(0);
      expect(listenerErrors).toHaveLength(2);
    }
  });
});
