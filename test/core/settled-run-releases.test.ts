import { describe, expect, it } from 'vitest';
import type { RunConfig } from '../../src/core/loop/config.ts';
import { ConversationRun } from '../../src/core/loop/run.ts';
import type { ConversationObserver } from '../../src/core/spi/observer.ts';
import { maxDispatches, type Responder, roundRobin } from '../../src/index.ts';

const gc = (globalThis as { gc?: () => void }).gc as () => void;

/** A run's configuration as the orchestrator builds it, with `responders` and one `observer`. */
function config(
  responders: Responder<number, number>[],
  observer: ConversationObserver<number, number>,
): RunConfig<number, number> {
  return {
    name: 'release',
    responders,
    responderNames: responders.map((r) => r.name),
    providers: responders.map(() => undefined),
    responderIndex: new Map<Responder<number, number> | string, number>(
      responders.flatMap((r, i) => [
        [r, i],
        [r.name, i],
      ]),
    ),
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (s, m) => s + m.content },
    termination: maxDispatches(5),
    listener: undefined,
    observers: [observer],
    dispatchTimeoutMs: undefined,
    maxQueueLength: 1000,
    historySize: 0,
    onResponderError: 'stop',
    onListenerError: () => {},
    yieldIntervalMs: 5,
  };
}

/** An observer whose observations hold a payload the test watches through a WeakRef. */
function watchedObserver(refs: WeakRef<object>[]): ConversationObserver<number, number> {
  return {
    startConversation() {
      const payload = { events: new Array<number>(1000).fill(0) };
      refs.push(new WeakRef(payload));
      return {
        onDispatch(info) {
          payload.events[info.dispatchCount] = info.elapsedMs;
        },
        onConversationEnd() {
          payload.events[0] = 1;
        },
      };
    },
  };
}

const counter: Responder<number, number> = {
  name: 'counter',
  respond: async (m) => ({ sender: 'counter', content: m.content + 1 }),
};
const failing: Responder<number, number> = {
  name: 'failing',
  respond: async () => {
    throw new Error('boom');
  },
};

describe('a settled run', () => {
  it.each([
    ['ends', [counter]],
    ['fails', [failing]],
  ] as const)(
    'that %s lets go of what its observers made, while the run object lives on',
    async (_, responders) => {
      const refs: WeakRef<object>[] = [];
      const run = new ConversationRun(
        config([...responders], watchedObserver(refs)),
        {
          sender: 'user',
          content: 0,
        },
        {},
      );
      await run.execute().catch(() => undefined);
      // A WeakRef keeps its target until the job that made it ends.
      await new Promise((resolve) => setImmediate(resolve));
      gc();
      expect(refs).toHaveLength(1);
      // The run is still reachable (held here); what its observer made for it is not.
      expect(run).toBeInstanceOf(ConversationRun);
      expect(refs[0]?.deref()).toBeUndefined();
    },
  );

  it('keeps the payload while the run is going (the check above can fail)', async () => {
    const refs: WeakRef<object>[] = [];
    let during: boolean | undefined;
    const slow: Responder<number, number> = {
      name: 'slow',
      respond: async (m) => {
        if (m.content === 2) {
          await new Promise((resolve) => setImmediate(resolve));
          gc();
          during = refs[0]?.deref() !== undefined;
        }
        return { sender: 'slow', content: m.content + 1 };
      },
    };
    const run = new ConversationRun(
      config([slow], watchedObserver(refs)),
      {
        sender: 'user',
        content: 0,
      },
      {},
    );
    await run.execute();
    expect(during).toBe(true);
  });
});
