import { getEventListeners } from 'node:events';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  anyOf,
  CONTINUE,
  ConversationAbortedError,
  type ConversationError,
  ConversationOrchestrator,
  converged,
  type Message,
  maxDispatches,
  stopWhen,
  type TerminationDecision,
} from '../../src/index.ts';

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

type Report = {
  inputTokens?: unknown;
  outputTokens?: unknown;
  cacheReadInputTokens?: unknown;
  model?: unknown;
};
type UsageScript = {
  invocations: { reports: Report[]; outcome: 'answer' | 'nothing' | 'throw'; async: boolean }[];
  turnReports: Report[];
  skip: boolean;
  stopAt: number;
};

const count = fc.oneof(
  { weight: 6, arbitrary: fc.nat({ max: 10_000 }) },
  { weight: 1, arbitrary: fc.constantFrom(-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '7') },
);
const report: fc.Arbitrary<Report> = fc.record(
  {
    inputTokens: count,
    outputTokens: count,
    cacheReadInputTokens: count,
    model: fc.constantFrom('gpt-4o', 'claude.sonnet:4', 'bad model', ''),
  },
  { requiredKeys: [] },
);
const usageScripts: fc.Arbitrary<UsageScript> = fc.record({
  invocations: fc.array(
    fc.record({
      reports: fc.array(report, { maxLength: 3 }),
      outcome: fc.constantFrom<'answer' | 'nothing' | 'throw'>(
        'answer',
        'answer',
        'nothing',
        'throw',
      ),
      async: fc.boolean(),
    }),
    { minLength: 1, maxLength: 12 },
  ),
  turnReports: fc.array(report, { maxLength: 2 }),
  skip: fc.boolean(),
  stopAt: fc.integer({ min: 1, max: 30 }),
});

/** Whether the loop must accept a report, judged independently of the code under test. */
function acceptable(r: Report): boolean {
  const countOk = (v: unknown) =>
    v === undefined || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0);
  const modelOk =
    r.model === undefined ||
    (typeof r.model === 'string' && /^[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}$/.test(r.model));
  return (
    countOk(r.inputTokens) && countOk(r.outputTokens) && countOk(r.cacheReadInputTokens) && modelOk
  );
}
const n = (v: unknown) => (typeof v === 'number' ? v : 0);

describe('usage invariants (property-based)', () => {
  it('totals are the sum of the accepted reports, per responder and turn policy; dispatch usages and refused reports add up', async () => {
    await fc.assert(
      fc.asyncProperty(usageScripts, async (script) => {
        let invocation = 0;
        let settled = false;
        const expected = { input: 0, output: 0, cache: undefined as number | undefined };
        const perResponder = new Map<string, { input: number; output: number }>();
        let turnInput = 0;
        let turnReported = false;
        let refusedOtherwise = 0;
        let accepted = 0;
        let heard = 0;
        let inDispatches = 0;
        let failedInvocations = 0;
        const states: number[] = [];
        const spend = (
          who: string | undefined,
          reports: Report[],
          reportUsage: (u: never) => void,
        ) => {
          for (const r of reports) {
            try {
              reportUsage(r as never);
            } catch (error) {
              if (!(error instanceof TypeError) || acceptable(r)) refusedOtherwise++;
              continue;
            }
            if (!acceptable(r)) {
              refusedOtherwise++;
              continue;
            }
            if (settled) continue;
            accepted++;
            expected.input += n(r.inputTokens);
            expected.output += n(r.outputTokens);
            if (r.cacheReadInputTokens !== undefined)
              expected.cache = (expected.cache ?? 0) + n(r.cacheReadInputTokens);
            if (who === undefined) {
              turnReported = true;
              turnInput += n(r.inputTokens);
            } else {
              const t = perResponder.get(who) ?? { input: 0, output: 0 };
              t.input += n(r.inputTokens);
              t.output += n(r.outputTokens);
              perResponder.set(who, t);
            }
          }
        };
        const o = new ConversationOrchestrator<number, number>({
          name: 'usage_prop',
          responders: ['a', 'b', 'c'].map((name) => ({
            name,
            respond: (m: Message<number>, _s, context) => {
              const step = script.invocations[invocation++ % script.invocations.length];
              if (step === undefined) return undefined;
              spend(name, step.reports, context.reportUsage);
              const answer =
                step.outcome === 'nothing' ? undefined : { sender: name, content: m.content + 1 };
              if (step.outcome === 'throw') {
                failedInvocations++;
                if (step.async) return Promise.reject(new Error('scripted'));
                throw new Error('scripted');
              }
              return step.async ? Promise.resolve(answer) : answer;
            },
          })),
          turnPolicy: (m, _s, rs, context) => {
            spend(undefined, script.turnReports, context.reportUsage);
            return rs.filter((r) => r.name !== m.sender);
          },
          projection: { initial: () => 0, fold: (_s, m) => m.content },
          termination: maxDispatches(script.stopAt),
          onResponderError: script.skip ? 'skip' : 'stop',
          listener: (s) => {
            states.push(s.usage.inputTokens);
          },
          observers: [
            {
              startConversation: () => ({
                onUsage: () => {
                  heard++;
                },
                onDispatch: (info) => {
                  inDispatches += info.usage?.inputTokens ?? 0;
                },
              }),
            },
          ],
          maxQueueLength: 100_000,
        });
        const outcome = await o.run({ sender: 'user', content: 0 }).then(
          (r) => ({ usage: r.usage, state: r.state }),
          (e: ConversationError<number>) => ({ usage: e.usage, state: e.state }),
        );
        settled = true;
        const { usage } = outcome;
        expect(refusedOtherwise).toBe(0);
        expect(heard).toBe(accepted);
        expect(usage.inputTokens).toBe(expected.input);
        expect(usage.outputTokens).toBe(expected.output);
        expect(usage.cacheReadInputTokens).toBe(expected.cache);
        expect(outcome.state.usage.inputTokens).toBe(expected.input);
        expect(usage.turnPolicy?.inputTokens).toBe(turnReported ? turnInput : undefined);
        expect(
          Object.fromEntries(
            Object.entries(usage.byResponder).map(([k, v]) => [
              k,
              { input: v.inputTokens, output: v.outputTokens },
            ]),
          ),
        ).toEqual(Object.fromEntries(perResponder));
        // Dispatch usages never count a token twice, nor one of the turn policy.
        expect(inDispatches).toBeLessThanOrEqual(expected.input - turnInput);
        if (failedInvocations === 0) expect(inDispatches).toBe(expected.input - turnInput);
        // state.usage never goes down.
        expect(states).toEqual([...states].sort((x, y) => x - y));
      }),
      { numRuns: 300 },
    );
  });
});

describe('decisions explain themselves (property-based)', () => {
  it('converged() terminates exactly when its last `consecutive` decisions had observed <= limit; anyOf passes on that explanation', () => {
    fc.assert(
      fc.property(
        fc.array(fc.oneof(fc.double({ min: -5, max: 5, noNaN: true }), fc.constant(Number.NaN)), {
          minLength: 1,
          maxLength: 40,
        }),
        fc.double({ min: 0, max: 2, noNaN: true }),
        fc.integer({ min: 1, max: 4 }),
        (values, tolerance, consecutive) => {
          const check = anyOf(
            converged<number>({ measure: (s) => s.projection, tolerance, consecutive, target: 1 }),
            maxDispatches<number>(1_000),
          ).start();
          const decisions: TerminationDecision[] = [];
          for (const [i, value] of values.entries()) {
            const decision = check(
              {
                conversationId: 'p',
                projection: value,
                lastMessage: { sender: 'x', content: 0 },
                queueDepth: 0,
                dispatchCount: i + 1,
                history: [],
                usage: { inputTokens: 0, outputTokens: 0 },
              },
              0,
            );
            decisions.push(decision);
            if (Number.isFinite(value)) {
              expect(decision).toMatchObject({
                policy: 'converged',
                observed: Math.abs(value - 1),
                limit: tolerance,
              });
            } else expect(decision).toBe(CONTINUE);
            const streak = decisions
              .slice(-consecutive)
              .filter((d) => d.observed !== undefined && (d.limit ?? -1) >= d.observed);
            expect(decision.terminate).toBe(
              decisions.length >= consecutive && streak.length === consecutive,
            );
            if (decision.terminate) break;
          }
        },
      ),
      { numRuns: 500 },
    );
  });
});
