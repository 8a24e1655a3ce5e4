import { getEventListeners } from 'node:events';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  anyOf,
  ConversationAbortedError,
  type ConversationError,
  ConversationOrchestrator,
  type Message,
  maxDispatches,
  stopWhen,
  type TerminationDecision,
} from '../src/index.ts';

type Script = { outputs: number[][]; failAt: number | undefined; stopAt: number; async: boolean[] };

/**
 * Random conversations: each invocation answers with a scripted number of messages (0-3), some
 * responders are async, an optional failure at invocation k, termination at dispatch stopAt.
 */
const scripts = fc.record({
  outputs: fc.array(fc.array(fc.integer({ min: 0, max: 1000 }), { maxLength: 3 }), {
    minLength: 1,
    maxLength: 40,
  }),
  failAt: fc.option(fc.integer({ min: 1, max: 40 }), { nil: undefined }),
  stopAt: fc.integer({ min: 1, max: 60 }),
  async: fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
});

function build(script: Script) {
  let invocation = 0;
  const folded: number[] = [];
  const produced: number[] = [];
  const calls: { n: number; d: TerminationDecision; projection: number[] }[] = [];
  const o = new ConversationOrchestrator<number[], number>({
    name: 'prop',
    responders: ['a', 'b', 'c'].map((name, r) => ({
      name,
      respond: () => {
        invocation++;
        if (invocation === script.failAt) throw new Error('scripted');
        const values = script.outputs[(invocation - 1) % script.outputs.length] ?? [];
        const out: Message<number>[] = values.map((content) => ({ sender: name, content }));
        produced.push(...values);
        return script.async[r] ? Promise.resolve(out) : out;
      },
    })),
    turnPolicy: (_m, _s, rs) => rs,
    projection: {
      initial: () => [],
      fold: (s, m) => {
        folded.push(m.content);
        return [...s, m.content];
      },
    },
    termination: anyOf(
      stopWhen((s) => s.dispatchCount >= script.stopAt, 'scripted_stop'),
      maxDispatches(60),
    ),
    listener: (s, d, n) => {
      calls.push({ n, d, projection: s.projection });
    },
    maxQueueLength: 100_000,
  });
  return { o, folded, produced, calls };
}

describe('invariants of the loop (property-based)', () => {
  it('listener calls equal dispatches, counts run 1..N, only the last decision terminates, the fold sees every output in order', async () => {
    await fc.assert(
      fc.asyncProperty(scripts, async (script) => {
        const { o, folded, produced, calls } = build(script);
        const outcome = await o.run({ sender: 'user', content: -1 }).then(
          (result) => ({ ok: true as const, result }),
          (error: unknown) => ({ ok: false as const, error }),
        );
        const dispatches = outcome.ok
          ? outcome.result.dispatchCount
          : (outcome.error as ConversationError).dispatchCount;
        expect(calls.length).toBe(dispatches);
        expect(calls.map((c) => c.n)).toEqual(Array.from({ length: dispatches }, (_, i) => i + 1));
        const terminating = calls.filter((c) => c.d.terminate);
        if (outcome.ok && outcome.result.decision.reason !== 'queue_exhausted') {
          expect(terminating.length).toBe(1);
          expect(calls.at(-1)?.d.terminate).toBe(true);
        } else {
          expect(terminating.length).toBe(0);
        }
        expect(folded).toEqual(produced);
        const state = outcome.ok
          ? outcome.result.state
          : (outcome.error as ConversationError<number[]>).state;
        expect(state.projection).toEqual(produced);
        expect(state.dispatchCount).toBe(dispatches);
      }),
      { numRuns: 300 },
    );
  });

  it('a failure or an abort still yields the state reached', async () => {
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 200 }), async (abortAfter) => {
        const controller = new AbortController();
        const seen: number[] = [];
        const o = new ConversationOrchestrator<number, number>({
          name: 'abort',
          responders: [
            { name: 'a', respond: async (m) => ({ sender: 'a', content: m.content + 1 }) },
          ],
          turnPolicy: (_m, _s, rs) => rs,
          projection: { initial: () => 0, fold: (_s, m) => m.content },
          termination: maxDispatches(10_000),
          listener: (s, _d, n) => {
            seen.push(s.projection);
            if (n === abortAfter) controller.abort();
          },
        });
        const error = await o
          .run({ sender: 'user', content: 0 }, { signal: controller.signal })
          .catch((e) => e);
        expect(error).toBeInstanceOf(ConversationAbortedError);
        const e = error as ConversationAbortedError<number>;
        expect(e.dispatchCount).toBe(abortAfter);
        expect(e.state.projection).toBe(abortAfter);
        expect(seen.length).toBe(abortAfter);
      }),
      { numRuns: 100 },
    );
  });
});

type Mode = 'sync' | 'resolved' | 'delayed' | 'throw' | 'reject' | 'abort';
type Hostile = {
  modes: Mode[];
  turn: 'sync' | 'async';
  termination: { kind: 'normal' | 'throws' | 'not_a_decision'; at: number };
  abortAfterMs: number | undefined;
  skip: boolean;
};

const hostile = fc.record({
  modes: fc.array(
    fc.constantFrom<Mode>('sync', 'resolved', 'delayed', 'throw', 'reject', 'abort'),
    {
      minLength: 1,
      maxLength: 30,
    },
  ),
  turn: fc.constantFrom<'sync' | 'async'>('sync', 'async'),
  termination: fc.record({
    kind: fc.constantFrom<'normal' | 'throws' | 'not_a_decision'>(
      'normal',
      'throws',
      'not_a_decision',
    ),
    at: fc.integer({ min: 1, max: 80 }),
  }),
  abortAfterMs: fc.option(fc.integer({ min: 0, max: 4 }), { nil: undefined }),
  skip: fc.boolean(),
});

describe('invariants under hostile responders (property-based)', () => {
  it('listener and observers see exactly dispatchCount dispatches, nothing after the settle, nothing left behind', async () => {
    await fc.assert(
      fc.asyncProperty(hostile, async (h: Hostile) => {
        const controller = new AbortController();
        let invocation = 0;
        let settled = false;
        let afterSettle = 0;
        let listened = 0;
        let observed = 0;
        let ends = 0;
        const timersBefore = process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
        const o = new ConversationOrchestrator<number, number>({
          name: 'hostile',
          responders: ['a', 'b'].map((name) => ({
            name,
            respond: (m: Message<number>) => {
              const mode = h.modes[invocation++ % h.modes.length] as Mode;
              const answer = { sender: name, content: m.content + 1 };
              switch (mode) {
                case 'sync':
                  return answer;
                case 'resolved':
                  return Promise.resolve(answer);
                case 'delayed':
                  return new Promise<Message<number>>((r) => setTimeout(() => r(answer), 0));
                case 'throw':
                  throw new Error('scripted');
                case 'reject':
                  return Promise.reject(new Error('scripted'));
                case 'abort':
                  controller.abort();
                  return answer;
              }
            },
          })),
          turnPolicy:
            h.turn === 'sync'
              ? (m, _s, rs) => rs.filter((r) => r.name !== m.sender)
              : async (m, _s, rs) => rs.filter((r) => r.name !== m.sender),
          projection: {
            initial: () => 0,
            fold: (_s, m) => {
              if (settled) afterSettle++;
              return m.content;
            },
          },
          termination: {
            name: 'scripted',
            start: () => (state) => {
              if (settled) afterSettle++;
              if (h.termination.kind !== 'normal' && state.dispatchCount === h.termination.at) {
                if (h.termination.kind === 'throws') throw new Error('policy bug');
                return 'oops' as unknown as TerminationDecision;
              }
              return state.dispatchCount >= 60
                ? { terminate: true, reason: 'enough' }
                : { terminate: false, reason: 'continue' };
            },
          },
          onResponderError: h.skip ? 'skip' : 'stop',
          dispatchTimeoutMs: 10_000,
          listener: () => {
            listened++;
            if (settled) afterSettle++;
          },
          observers: [
            {
              startConversation: () => ({
                onDispatch: () => {
                  observed++;
                  if (settled) afterSettle++;
                },
                onResponderStart: () => {
                  if (settled) afterSettle++;
                },
                onConversationEnd: () => {
                  ends++;
                },
              }),
            },
          ],
        });
        const abortTimer =
          h.abortAfterMs === undefined
            ? undefined
            : setTimeout(() => controller.abort(), h.abortAfterMs);
        const outcome = await o
          .run({ sender: 'user', content: 0 }, { signal: controller.signal })
          .then(
            (result) => ({
              ok: true as const,
              dispatchCount: result.dispatchCount,
              state: result.state,
            }),
            (error: ConversationError<number>) => ({
              ok: false as const,
              dispatchCount: error.dispatchCount,
              state: error.state,
            }),
          );
        settled = true;
        clearTimeout(abortTimer);
        // Let every late answer (delayed promises, timers) arrive: none may reach a hook.
        await new Promise((r) => setTimeout(r, 2));
        expect(listened).toBe(outcome.dispatchCount);
        expect(observed).toBe(outcome.dispatchCount);
        expect(outcome.state.dispatchCount).toBe(outcome.dispatchCount);
        expect(afterSettle).toBe(0);
        expect(ends).toBe(1);
        expect(getEventListeners(controller.signal, 'abort')).toHaveLength(0);
        // No dispatch deadline timer left behind (the 10 s deadline would still be pending).
        expect(
          process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length,
        ).toBeLessThanOrEqual(timersBefore);
      }),
      { numRuns: 200 },
    );
  });
});
