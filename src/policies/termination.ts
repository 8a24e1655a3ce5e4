/**
 * Termination policies, evaluated after every successful dispatch. A policy's `start()` is called
 * once per conversation, so counters and streaks never leak from one run into the next.
 */

import {
  fail,
  guardedOptions,
  nonNegativeNumber,
  positiveInteger,
  positiveNumber,
} from '../core/shared/validate.ts';
import { warnUnsaved } from '../core/shared/warnings.ts';
import { describeValue } from '../core/spi/errors.ts';
import {
  CONTINUE,
  decisionExpected,
  isDecision,
  isReasonName,
  REASON_EXPECTED,
  type TerminationCheck,
  type TerminationPolicy,
} from '../core/spi/policy.ts';
import type { ConversationState, TerminationDecision } from '../core/spi/types.ts';

/**
 * Ends the conversation after `n` dispatches, with reason `max_dispatches`; the decision's
 * `observed` is the dispatch count and `limit` is `n`.
 */
export function maxDispatches<S, C = unknown>(n: number): TerminationPolicy<S, C> {
  positiveInteger('maxDispatches(n)', n);
  const stop = (count: number): TerminationDecision =>
    Object.freeze({
      terminate: true,
      reason: 'max_dispatches',
      policy: 'max_dispatches',
      observed: count,
      limit: n,
    });
  // In a run the count reaches n exactly: that decision is made once, not per conversation.
  const atLimit = stop(n);
  return {
    name: 'max_dispatches',
    stateless: true,
    start: () => (state) => {
      const count = state.dispatchCount;
      if (count < n) return CONTINUE;
      return count === n ? atLimit : stop(count);
    },
  };
}

/**
 * Ends the conversation at the first dispatch completed `ms` or more after it started, with reason
 * `timeout`. Checked after dispatches: to cut a hanging responder, set `dispatchTimeoutMs`.
 */
export function timeout<S, C = unknown>(ms: number): TerminationPolicy<S, C> {
  positiveNumber('timeout(ms)', ms);
  return {
    name: 'timeout',
    stateless: true,
    start: () => (_state, elapsedMs) =>
      elapsedMs >= ms
        ? Object.freeze({
            terminate: true,
            reason: 'timeout',
            policy: 'timeout',
            observed: elapsedMs,
            limit: ms,
          })
        : CONTINUE,
  };
}

/** Limits of `tokenBudget()`: at least one. Each is a positive integer number of tokens. */
export interface TokenBudgetOptions {
  /** Input plus output tokens (cache-read input tokens are part of the input, reasoning of the output). */
  readonly total?: number;
  /** Input tokens. */
  readonly input?: number;
  /** Output tokens. */
  readonly output?: number;
}

/**
 * Ends the conversation with reason `token_budget` after the first dispatch at which the tokens
 * reported so far (`state.usage`, the turn policy's and failed invocations' included) reach a
 * limit. Limits are checked in the order `total`, `input`, `output`; the decision's `observed`
 * is the deciding count and `limit` its limit.
 * @example anyOf(converged({ measure, tolerance: 0.01 }), tokenBudget({ total: 200_000 }))
 */
export function tokenBudget<S, C = unknown>(options: TokenBudgetOptions): TerminationPolicy<S, C> {
  if (typeof options !== 'object' || options === null)
    fail('tokenBudget(options)', 'an object { total?, input?, output? }', options);
  const { total, input, output } = guardedOptions(
    'tokenBudget(options)',
    options,
    (key) => `tokenBudget({ ${key} })`,
  );
  if (total === undefined && input === undefined && output === undefined) {
    fail('tokenBudget(options)', 'at least one of `total`, `input`, `output`', options);
  }
  const limit = (name: string, value: unknown): number =>
    value === undefined
      ? Number.POSITIVE_INFINITY
      : positiveInteger(`tokenBudget({ ${name} })`, value);
  const totalLimit = limit('total', total);
  const inputLimit = limit('input', input);
  const outputLimit = limit('output', output);
  const stop = (observed: number, limit: number): TerminationDecision =>
    Object.freeze({
      terminate: true,
      reason: 'token_budget',
      policy: 'token_budget',
      observed,
      limit,
    });
  return {
    name: 'token_budget',
    stateless: true,
    start: () => (state) => {
      // A state built by hand (a test, a replay) may have no usage: nothing was spent.
      const usage = state.usage;
      const inputTokens = usage?.inputTokens ?? 0;
      const outputTokens = usage?.outputTokens ?? 0;
      const spent = inputTokens + outputTokens;
      if (spent >= totalLimit) return stop(spent, totalLimit);
      if (inputTokens >= inputLimit) return stop(inputTokens, inputLimit);
      if (outputTokens >= outputLimit) return stop(outputTokens, outputLimit);
      return CONTINUE;
    },
  };
}

/** What `converged(options)` takes: a measure, how close it must come, and for how long. */
export interface ConvergedOptions<S, C = unknown> {
  /** A number measured on the state: the spread of the desks' quotes, say. */
  readonly measure: (state: ConversationState<S, C>) => number;
  /** Converged when `|measure - target| <= tolerance`. */
  readonly tolerance: number;
  /**
   * Consecutive dispatches the measure must stay within tolerance.
   * @default 1
   */
  readonly consecutive?: number;
  /** @default 0 */
  readonly target?: number;
  /** @default 'converged' */
  readonly reason?: string;
}

/**
 * Ends the conversation once a numeric measure of the state stays within `tolerance` of `target`
 * for `consecutive` dispatches in a row. A measure that is not a finite number (NaN, ±Infinity, a
 * string) counts as not converged: it breaks the streak.
 *
 * Every decision explains itself: `observed` is the distance `|measure - target|` (the measure
 * itself with the default target 0 and a non-negative measure) and `limit` the tolerance, on
 * continuing decisions too (policy `converged`), so the decisions trace the convergence curve. The
 * streak is not a third number: it is the run of consecutive decisions whose `observed <= limit`,
 * and the terminating decision is the `consecutive`-th of them. A measure that is not a finite
 * number gives a plain continue (no `observed`).
 * @example converged({ measure: (s) => s.projection.spread, tolerance: 0.01, consecutive: 3 })
 */
export function converged<S, C = unknown>(
  options: ConvergedOptions<S, C>,
): TerminationPolicy<S, C> {
  if (typeof options !== 'object' || options === null)
    fail('converged(options)', 'an object', options);
  options = guardedOptions('converged(options)', options, (key) => `converged({ ${key} })`);
  if (typeof options.measure !== 'function')
    fail('converged({ measure })', 'a function', options.measure);
  const tolerance = nonNegativeNumber('converged({ tolerance })', options.tolerance);
  const consecutive = positiveInteger('converged({ consecutive })', options.consecutive ?? 1);
  const target = options.target ?? 0;
  if (!Number.isFinite(target)) fail('converged({ target })', 'a finite number', target);
  const reason = reasonName('converged({ reason })', options.reason ?? 'converged');
  const measure = options.measure;
  return {
    name: 'converged',
    start(saved) {
      // Resumed: the streak saved at the last commit.
      let streak =
        typeof saved === 'number' && Number.isSafeInteger(saved) && saved >= 0 ? saved : 0;
      const check: TerminationCheck<S, C> = (state) => {
        const value: unknown = measure(state);
        if (typeof value !== 'number' || !Number.isFinite(value)) {
          streak = 0;
          return CONTINUE;
        }
        const distance = Math.abs(value - target);
        streak = distance <= tolerance ? streak + 1 : 0;
        return streak >= consecutive
          ? { terminate: true, reason, policy: 'converged', observed: distance, limit: tolerance }
          : {
              terminate: false,
              reason: 'continue',
              policy: 'converged',
              observed: distance,
              limit: tolerance,
            };
      };
      check.save = () => streak;
      return check;
    },
  };
}

/** Ends the conversation when `predicate(state)` is true, with the given reason. */
export function stopWhen<S, C = unknown>(
  predicate: (state: ConversationState<S, C>, elapsedMs: number) => boolean,
  reason = 'stopped',
): TerminationPolicy<S, C> {
  if (typeof predicate !== 'function') fail('stopWhen(predicate)', 'a function', predicate);
  reasonName('stopWhen(predicate, reason)', reason);
  const stop = Object.freeze({ terminate: true, reason, policy: 'stop_when' });
  return {
    name: 'stop_when',
    stateless: true,
    start: () => (state, elapsedMs) => (predicate(state, elapsedMs) ? stop : CONTINUE),
  };
}

/**
 * Terminates as soon as any member does; the decision is that member's (its reason, policy,
 * observed and limit). Every member is evaluated after every dispatch, so stateful members keep
 * counting. While none terminates, the decision is the first member's continuing decision that
 * explains itself (has `observed`, e.g. `converged`'s), else `CONTINUE`: no new object either way.
 */
export function anyOf<S, C = unknown>(
  ...policies: readonly TerminationPolicy<S, C>[]
): TerminationPolicy<S, C> {
  members('anyOf', policies);
  return composite(
    `any_of(${policies.map((p) => p.name).join(',')})`,
    policies,
    (checks) => (state, elapsedMs) => {
      let decided: TerminationDecision | undefined;
      let explained: TerminationDecision | undefined;
      for (let i = 0; i < checks.length; i++) {
        const decision = memberDecision(policies, checks, i, state, elapsedMs);
        if (decision.terminate) decided ??= decision;
        else if (explained === undefined && decision.observed !== undefined) explained = decision;
      }
      return decided ?? explained ?? CONTINUE;
    },
  );
}

/**
 * Terminates when every member says terminate after the same dispatch. The decision carries the
 * first member's reason, observed and limit; `policy` lists every member. While some member
 * continues, the decision is the first continuing member's if it explains itself (has
 * `observed`: what still holds the conversation back), else `CONTINUE`.
 */
export function allOf<S, C = unknown>(
  ...policies: readonly TerminationPolicy<S, C>[]
): TerminationPolicy<S, C> {
  members('allOf', policies);
  const name = `all_of(${policies.map((p) => p.name).join(',')})`;
  return composite(name, policies, (checks) => (state, elapsedMs) => {
    let first: TerminationDecision | undefined;
    let holding: TerminationDecision | undefined;
    let all = true;
    for (let i = 0; i < checks.length; i++) {
      const decision = memberDecision(policies, checks, i, state, elapsedMs);
      if (decision.terminate) first ??= decision;
      else {
        if (all && decision.observed !== undefined) holding = decision;
        all = false;
      }
    }
    if (!all || first === undefined) return holding ?? CONTINUE;
    const ending: { -readonly [K in keyof TerminationDecision]: TerminationDecision[K] } = {
      terminate: true,
      reason: first.reason,
      policy: name,
    };
    if (first.observed !== undefined) ending.observed = first.observed;
    if (first.limit !== undefined) ending.limit = first.limit;
    return ending;
  });
}

type Check<S, C> = ReturnType<TerminationPolicy<S, C>['start']>;

/**
 * A composite's members, started afresh, or (resumed: `saved` is the array its `save()` made)
 * each with its own saved state; a stateful member without `save` is warned of once.
 */
function startMembers<S, C>(
  policies: readonly TerminationPolicy<S, C>[],
  saved: unknown,
): TerminationCheck<S, C>[] {
  if (saved === undefined) return policies.map((p) => p.start());
  const states = Array.isArray(saved) ? saved : [];
  return policies.map((p, i) => {
    const state: unknown = states[i];
    const check = p.start(state === null ? undefined : state);
    if (check.save === undefined && p.stateless !== true) warnUnsaved('termination', p.name);
    return check;
  });
}

/**
 * A composite of `policies` named `name`: stateless when every member is, its members started
 * together and saved together (an array), each dispatch decided by the check `decide` makes of
 * the members' checks.
 */
function composite<S, C>(
  name: string,
  policies: readonly TerminationPolicy<S, C>[],
  decide: (checks: readonly Check<S, C>[]) => TerminationCheck<S, C>,
): TerminationPolicy<S, C> {
  return {
    name,
    stateless: policies.every((p) => p.stateless === true),
    start(saved) {
      const checks = startMembers(policies, saved);
      const check = decide(checks);
      check.save = () => checks.map((c) => c.save?.() ?? null);
      return check;
    },
  };
}

/**
 * Member `index`'s answer to this dispatch, checked as the loop checks a policy's: a composite
 * hides no bad answer.
 */
function memberDecision<S, C>(
  policies: readonly TerminationPolicy<S, C>[],
  checks: readonly Check<S, C>[],
  index: number,
  state: ConversationState<S, C>,
  elapsedMs: number,
): TerminationDecision {
  const decision: unknown = (checks[index] as Check<S, C>)(state, elapsedMs);
  if (isDecision(decision)) return decision;
  throw new TypeError(
    `Expected ${decisionExpected(String(policies[index]?.name))} (member ${index} of a composite), got ${describeValue(decision)}`,
  );
}

function members(combinator: string, policies: readonly unknown[]): void {
  if (policies.length === 0) fail(`${combinator}(...policies)`, 'at least one policy', policies);
  policies.forEach((p, i) => {
    if (
      typeof p !== 'object' ||
      p === null ||
      typeof (p as { start?: unknown }).start !== 'function'
    ) {
      fail(`${combinator}(...policies)[${i}]`, 'a termination policy ({ name, start() })', p);
    }
  });
}

/** Reasons become endings and metric labels: short snake_case, none the loop reserves. */
export function reasonName(option: string, value: unknown): string {
  if (!isReasonName(value)) {
    fail(option, REASON_EXPECTED, value);
  }
  return value;
}
