import { describe, expect, it } from 'vitest';
import {
  allOf,
  anyOf,
  CONTINUE,
  type ConversationState,
  converged,
  maxDispatches,
  OrchestratorConfigError,
  stopWhen,
  timeout,
  tokenBudget,
  type UsageTotals,
} from '../../src/index.ts';
import { counterOrchestrator } from '../helpers/desks.ts';

const at = (
  dispatchCount: number,
  projection = 0,
  usage: UsageTotals = { inputTokens: 0, outputTokens: 0 },
): ConversationState<number> => ({
  conversationId: 'c',
  projection,
  lastMessage: { sender: 'x', content: 0 },
  queueDepth: 0,
  dispatchCount,
  history: [],
  usage,
});
const spent = (inputTokens: number, outputTokens: number) =>
  at(1, 0, { inputTokens, outputTokens });
/** The decision that ends a conversation: `policy` (by default the reason) saw `observed`. */
const stop = (reason: string, observed: number, limit: number, policy = reason) => ({
  terminate: true,
  reason,
  policy,
  observed,
  limit,
});
/** The decision of an explaining `policy` that lets the conversation go on. */
const holdOn = (policy: string, observed: number, limit: number) => ({
  terminate: false,
  reason: 'continue',
  policy,
  observed,
  limit,
});

describe('termination policies', () => {
  it('maxDispatches(n) terminates at the n-th dispatch', () => {
    const check = maxDispatches<number>(3).start();
    expect([1, 2, 3].map((n) => check(at(n), 0))).toEqual([
      CONTINUE,
      CONTINUE,
      stop('max_dispatches', 3, 3),
    ]);
    // Asked past its limit (a composite, a replay), it says what it counted.
    expect(check(at(5), 0)).toMatchObject({ observed: 5, limit: 3 });
  });

  it('timeout(ms) terminates at the first dispatch at or past ms', () => {
    const check = timeout<number>(100).start();
    expect(check(at(1), 99.9)).toBe(CONTINUE);
    expect(check(at(2), 100.25)).toEqual(stop('timeout', 100.25, 100));
  });

  it('converged() needs k consecutive dispatches within tolerance, and a miss resets the streak', () => {
    const check = converged<number>({
      measure: (s) => s.projection,
      tolerance: 1,
      consecutive: 3,
    }).start();
    const decisions = [0.5, 0.2, 5, 0.1, 0.9, 1].map((v, i) => check(at(i + 1, v), 0).terminate);
    expect(decisions).toEqual([false, false, false, false, false, true]);
  });

  it('converged() treats NaN, Infinity and non-numbers as not converged and honours target and reason', () => {
    const check = converged<number>({
      measure: (s) => s.projection,
      tolerance: 0.5,
      target: 10,
      reason: 'agreed',
    }).start();
    expect(check(at(1, Number.NaN), 0)).toBe(CONTINUE);
    expect(check(at(1, Number.POSITIVE_INFINITY), 0)).toBe(CONTINUE);
    // A measure that is not a number (a bug in the measure) never counts as converged.
    expect(check(at(1, '10' as unknown as number), 0)).toBe(CONTINUE);
    expect(check(at(2, 10.25), 0)).toEqual(stop('agreed', 0.25, 0.5, 'converged'));
  });

  it('keeps per-conversation state: a streak never leaks into the next run', async () => {
    // Each conversation's projection hits 1 (within tolerance) once at its 1st dispatch; with
    // consecutive: 2 a leaked streak would end the second run at dispatch 1.
    const policy = converged<number>({
      measure: (s) => (s.dispatchCount === 1 ? 0 : 99),
      tolerance: 0,
      consecutive: 2,
    });
    const o = counterOrchestrator({ termination: anyOf(policy, maxDispatches(5)) });
    const first = await o.run({ sender: 'user', content: 0 });
    const second = await o.run({ sender: 'user', content: 0 });
    expect([first.dispatchCount, second.dispatchCount]).toEqual([5, 5]);
    expect(second.decision.reason).toBe('max_dispatches');
  });

  it('converged() explains every decision: the distance to target and the tolerance, the streak as the run of observed <= limit', () => {
    const check = converged<number>({
      measure: (s) => s.projection,
      tolerance: 1,
      consecutive: 2,
      target: 3,
    }).start();
    const decisions = [7, 3.5, 1, 2.5].map((v, i) => check(at(i + 1, v), 0));
    expect(decisions).toEqual([
      holdOn('converged', 4, 1),
      holdOn('converged', 0.5, 1),
      holdOn('converged', 2, 1),
      holdOn('converged', 0.5, 1),
    ]);
    expect(check(at(5, 3), 0)).toEqual(stop('converged', 0, 1));
  });

  it('stopWhen(predicate, reason) terminates with that reason', () => {
    const check = stopWhen<number>((s) => s.projection > 10, 'enough').start();
    expect(check(at(1, 5), 0)).toBe(CONTINUE);
    expect(check(at(2, 11), 0)).toEqual({ terminate: true, reason: 'enough', policy: 'stop_when' });
  });

  it('anyOf() says which member decided and keeps evaluating every member', () => {
    let calls = 0;
    const counting = stopWhen<number>(() => {
      calls++;
      return false;
    });
    const check = anyOf(maxDispatches<number>(2), counting).start();
    expect(check(at(1), 0)).toBe(CONTINUE);
    expect(check(at(2), 0)).toEqual(stop('max_dispatches', 2, 2));
    expect(calls).toBe(2);
  });

  it("anyOf() passes on the first explaining member's continuing decision, and the decider's when one terminates", () => {
    const check = anyOf(
      maxDispatches<number>(3),
      converged<number>({ measure: (s) => s.projection, tolerance: 0.1 }),
      timeout<number>(1_000),
    ).start();
    const first = check(at(1, 5), 0);
    expect(first).toEqual(holdOn('converged', 5, 0.1));
    expect(check(at(2, 0.05), 0)).toEqual(stop('converged', 0.05, 0.1));
    expect(check(at(3, 9), 2_000)).toEqual(stop('max_dispatches', 3, 3));
    // A composite of members that never explain themselves continues with the shared CONTINUE.
    expect(anyOf(maxDispatches<number>(5), timeout<number>(10)).start()(at(1), 0)).toBe(CONTINUE);
  });

  it("allOf() passes on the first member's observed and limit when all terminate, else what holds it back", () => {
    const check = allOf(
      maxDispatches<number>(2),
      converged<number>({ measure: (s) => s.projection, tolerance: 1 }),
    ).start();
    expect(check(at(1, 0), 0)).toBe(CONTINUE);
    expect(check(at(2, 4), 0)).toEqual(holdOn('converged', 4, 1));
    expect(check(at(3, 0.5), 0)).toEqual(
      stop('max_dispatches', 3, 2, 'all_of(max_dispatches,converged)'),
    );
  });

  it('allOf() terminates only when every member does, naming all members', () => {
    const policy = allOf(
      maxDispatches<number>(2),
      stopWhen<number>((s) => s.projection >= 7, 'big'),
    );
    expect(policy.name).toBe('all_of(max_dispatches,stop_when)');
    const check = policy.start();
    expect(check(at(2, 1), 0)).toBe(CONTINUE);
    expect(check(at(1, 9), 0)).toBe(CONTINUE);
    expect(check(at(3, 9), 0)).toEqual(
      stop('max_dispatches', 3, 2, 'all_of(max_dispatches,stop_when)'),
    );
  });

  it.each([
    [
      () => maxDispatches(0),
      'Expected `maxDispatches(n)` to be a positive integer, got `0` (number)',
    ],
    [() => timeout(-5), 'Expected `timeout(ms)` to be a positive finite number, got `-5` (number)'],
    [
      () => converged({ measure: () => 0, tolerance: -1 }),
      'Expected `converged({ tolerance })` to be a non-negative finite number, got `-1` (number)',
    ],
    [
      () => stopWhen(() => true, 'Not Snake'),
      'Expected `stopWhen(predicate, reason)` to be a snake_case reason of 1-40 characters other than continue, queue_exhausted, aborted, deadline, error, queue_overflow, got `"Not Snake"` (string)',
    ],
    [() => anyOf(), 'Expected `anyOf(...policies)` to be at least one policy, got `[]` (array)'],
    [
      () => tokenBudget({}),
      'Expected `tokenBudget(options)` to be at least one of `total`, `input`, `output`, got `{}` (object)',
    ],
    [
      () => tokenBudget(null as never),
      'Expected `tokenBudget(options)` to be an object { total?, input?, output? }, got `null` (null)',
    ],
    [
      () => {
        const { proxy, revoke } = Proxy.revocable({ total: 10 }, {});
        revoke();
        return tokenBudget(proxy);
      },
      'Expected `tokenBudget(options)` to be an object whose options can be read, got `(a revoked Proxy)` (object)',
    ],
    [
      () =>
        tokenBudget(
          Object.defineProperty({}, 'input', {
            get() {
              throw new Error('getter');
            },
          }),
        ),
      'Expected `tokenBudget({ input })` to be readable, reading it threw: getter',
    ],
    [
      () =>
        converged(
          Object.defineProperty({ measure: () => 0 }, 'tolerance', {
            get() {
              throw new Error('getter');
            },
          }) as never,
        ),
      'Expected `converged({ tolerance })` to be readable, reading it threw: getter',
    ],
    [
      () => tokenBudget({ total: 0 }),
      'Expected `tokenBudget({ total })` to be a positive integer, got `0` (number)',
    ],
    [
      () => tokenBudget({ input: 10, output: 2.5 }),
      'Expected `tokenBudget({ output })` to be a positive integer, got `2.5` (number)',
    ],
    [
      () => tokenBudget({ input: Number.NaN }),
      'Expected `tokenBudget({ input })` to be a positive integer, got `NaN` (number)',
    ],
    [
      () => tokenBudget({ total: '1000' as never }),
      'Expected `tokenBudget({ total })` to be a positive integer, got `"1000"` (string)',
    ],
  ])('rejects bad arguments clearly (%#)', (make, message) => {
    expect(make).toThrow(new OrchestratorConfigError(message));
  });

  describe('tokenBudget()', () => {
    it('terminates with token_budget once input + output tokens reach `total`', () => {
      const check = tokenBudget<number>({ total: 100 }).start();
      expect(check(spent(60, 39), 0)).toBe(CONTINUE);
      expect(check(spent(60, 40), 0)).toEqual(stop('token_budget', 100, 100));
    });

    it('checks `total`, then `input`, then `output`, and reports the deciding count', () => {
      const check = tokenBudget<number>({ total: 1000, input: 50, output: 10 }).start();
      expect(check(spent(49, 9), 0)).toBe(CONTINUE);
      expect(check(spent(70, 20), 0)).toMatchObject({ observed: 70, limit: 50 });
      expect(check(spent(10, 12), 0)).toMatchObject({ observed: 12, limit: 10 });
      expect(check(spent(900, 200), 0)).toMatchObject({ observed: 1100, limit: 1000 });
    });

    it('counts nothing spent for a state without usage (one built by hand)', () => {
      const check = tokenBudget<number>({ output: 1 }).start();
      const { usage: _usage, ...bare } = at(1);
      expect(check(bare as ConversationState<number>, 0)).toBe(CONTINUE);
    });

    it('stops a conversation through the orchestrator, composed with anyOf and allOf', async () => {
      const spending = (termination: ReturnType<typeof tokenBudget<number, number>>) =>
        counterOrchestrator({
          responders: [
            {
              name: 'a',
              respond: (m, _s, context) => {
                context.reportUsage({ inputTokens: 30, outputTokens: 5 });
                return { sender: 'a', content: m.content + 1 };
              },
            },
          ],
          termination,
        }).run({ sender: 'user', content: 0 });
      const alone = await spending(tokenBudget({ total: 100 }));
      expect(alone.dispatchCount).toBe(3);
      expect(alone.decision).toEqual(stop('token_budget', 105, 100));
      expect(alone.usage.inputTokens).toBe(90);
      const either = await spending(anyOf(maxDispatches(50), tokenBudget({ output: 20 })));
      expect(either.dispatchCount).toBe(4);
      expect(either.decision).toMatchObject({ reason: 'token_budget', policy: 'token_budget' });
      const both = await spending(allOf(tokenBudget({ input: 60 }), maxDispatches(5)));
      expect(both.dispatchCount).toBe(5);
      expect(both.decision).toMatchObject({
        reason: 'token_budget',
        policy: 'all_of(token_budget,max_dispatches)',
      });
    });
  });
});
