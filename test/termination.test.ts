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
} from '../src/index.ts';
import { counterOrchestrator } from './helpers/desks.ts';

const at = (dispatchCount: number, projection = 0): ConversationState<number> => ({
  conversationId: 'c',
  projection,
  lastMessage: { sender: 'x', content: 0 },
  queueDepth: 0,
  dispatchCount,
  history: [],
});

describe('termination policies', () => {
  it('maxDispatches(n) terminates at the n-th dispatch', () => {
    const check = maxDispatches<number>(3).start();
    expect([1, 2, 3].map((n) => check(at(n), 0))).toEqual([
      CONTINUE,
      CONTINUE,
      { terminate: true, reason: 'max_dispatches', policy: 'max_dispatches' },
    ]);
  });

  it('timeout(ms) terminates at the first dispatch at or past ms', () => {
    const check = timeout<number>(100).start();
    expect(check(at(1), 99.9)).toBe(CONTINUE);
    expect(check(at(2), 100)).toEqual({ terminate: true, reason: 'timeout', policy: 'timeout' });
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
    expect(check(at(2, 10.4), 0)).toEqual({
      terminate: true,
      reason: 'agreed',
      policy: 'converged',
    });
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
    expect(check(at(2), 0)).toEqual({
      terminate: true,
      reason: 'max_dispatches',
      policy: 'max_dispatches',
    });
    expect(calls).toBe(2);
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
    expect(check(at(3, 9), 0)).toEqual({
      terminate: true,
      reason: 'max_dispatches',
      policy: 'all_of(max_dispatches,stop_when)',
    });
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
  ])('rejects bad arguments clearly (%#)', (make, message) => {
    expect(make).toThrow(new OrchestratorConfigError(message));
  });
});
