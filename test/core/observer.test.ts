import { describe, expect, it } from 'vitest';
import {
  type ConversationEnd,
  type ConversationObserver,
  type Message,
  maxDispatches,
  ResponderError,
} from '../../src/index.ts';
import { counterOrchestrator } from '../helpers/desks.ts';

function recorder() {
  const events: string[] = [];
  const ends: ConversationEnd<number, number>[] = [];
  const observer: ConversationObserver<number, number> = {
    startConversation(start) {
      events.push(`start ${start.conversationId} [${start.responders.join(',')}]`);
      return {
        onResponderStart: (i) => events.push(`responder-start ${i}`),
        runResponder: (i, invoke) => {
          events.push(`run ${i}`);
          return invoke();
        },
        onResponderEnd: (i, _ms, failure) =>
          events.push(
            `responder-end ${i}${failure ? ` failed: ${(failure.error as Error).message}` : ''}`,
          ),
        onDispatch: (info) =>
          events.push(
            `dispatch ${info.dispatchCount} by ${info.responderIndex} ${info.decision.reason}`,
          ),
        onConversationEnd: (end) => {
          ends.push(end);
          events.push(`end ${end.ok}`);
        },
      };
    },
  };
  return { observer, events, ends };
}

describe('the lifecycle SPI', () => {
  it('reports start, each responder, each dispatch and the end, in order', async () => {
    const { observer, events, ends } = recorder();
    const listenerCalls: number[] = [];
    await counterOrchestrator({
      termination: maxDispatches(2),
      observers: [observer],
      listener: (_s, _d, n) => {
        listenerCalls.push(n);
      },
    }).run({ sender: 'user', content: 0 }, { conversationId: 'x' });
    expect(events).toEqual([
      'start x [a,b,c]',
      'responder-start 0',
      'run 0',
      'responder-end 0',
      'dispatch 1 by 0 continue',
      'responder-start 1',
      'run 1',
      'responder-end 1',
      'dispatch 2 by 1 max_dispatches',
      'end true',
    ]);
    expect(listenerCalls).toEqual([1, 2]);
    expect(ends[0]?.ok && ends[0].result.dispatchCount).toBe(2);
  });

  it('reports a failed conversation with its error, once', async () => {
    const { observer, events, ends } = recorder();
    const o = counterOrchestrator({
      observers: [observer],
      responders: [
        {
          name: 'x',
          respond: (m: Message<number>) => {
            if (m.content === 1) throw new Error('nope');
            return { sender: 'x', content: 1 };
          },
        },
      ],
    });
    await expect(o.run({ sender: 'user', content: 0 })).rejects.toBeInstanceOf(ResponderError);
    expect(events.slice(-3)).toEqual(['run 0', 'responder-end 0 failed: nope', 'end false']);
    expect(ends).toHaveLength(1);
    const end = ends[0];
    expect(end?.ok === false && end.error.dispatchCount).toBe(1);
  });

  it('survives an observer that throws', async () => {
    const broken: ConversationObserver<number, number> = {
      startConversation: () => ({
        onConversationEnd: () => {
          throw new Error('observer bug');
        },
      }),
    };
    const result = await counterOrchestrator({ observers: [broken] }).run({
      sender: 'user',
      content: 0,
    });
    expect(result.state.projection).toBe(55);
  });
});

describe('a listener failure after the run settled', () => {
  it('reaches the observer’s onLateListenerError, never a hook of the ended observation', async () => {
    const heard: string[] = [];
    const observer: ConversationObserver<number, number> = {
      startConversation: () => ({
        onListenerError: (error) => heard.push(`observation: ${(error as Error).message}`),
        onConversationEnd: () => heard.push('end'),
      }),
      onLateListenerError: (error, orchestrator, conversationId) =>
        heard.push(`late: ${(error as Error).message} ${orchestrator} ${conversationId}`),
    };
    let rejectLate: (() => void) | undefined;
    await counterOrchestrator({
      observers: [observer],
      termination: maxDispatches(2),
      // A turn of the event loop after each dispatch: the first rejection lands while it runs.
      yieldIntervalMs: 0,
      onListenerError: () => {},
      listener: (_s, _d, n) =>
        n === 1
          ? Promise.reject(new Error('early'))
          : new Promise((_resolve, reject) => {
              rejectLate = () => reject(new Error('late'));
            }),
    }).run({ sender: 'user', content: 0 }, { conversationId: 'c-7' });
    rejectLate?.();
    await new Promise((r) => setImmediate(r));
    expect(heard).toEqual(['observation: early', 'end', 'late: late counter c-7']);
  });
});
