/**
 * One recorded conversation replayed: the state a termination policy would have seen at each
 * recorded dispatch, rebuilt from the recording and handed to the candidate (no responder, no
 * model call), and the candidate's ending compared with the recorded one.
 */

import type { TerminationPolicy } from '../core/spi/policy.ts';
import { isDecision, isReasonName } from '../core/spi/policy.ts';
import type { ConversationState, Message } from '../core/spi/types.ts';
import { type Candidate, type CandidatesByOrchestrator, isTerminationPolicy } from './candidate.ts';
import type { RecordedConversation, RecordedUsage } from './format.ts';
import { describeThrown } from './serialize.ts';

/** Token totals as the state carries them (`state.usage`): zeros until something is reported. */
export interface ReplayedUsage {
  /** Input (prompt) tokens. */
  readonly inputTokens: number;
  /** Output (completion) tokens. */
  readonly outputTokens: number;
  /** Input tokens read from a prompt cache, when any report had them. */
  readonly cacheReadInputTokens?: number;
  /** Output tokens spent on reasoning, when any report had them. */
  readonly reasoningOutputTokens?: number;
}

/**
 * The state replay hands the candidate at dispatch `n`: `projection` is that dispatch's recorded
 * `record(state)` (undefined where none was recorded), `lastMessage` has the recorded sender and no
 * content, `history` is empty, `usage` the running totals.
 */
export interface ReplayedState<R = unknown> extends ConversationState<R, undefined> {
  /** The running token totals at that dispatch, as recorded. */
  readonly usage: ReplayedUsage;
}

/** What the candidate did with one recorded conversation. */
export type CandidateEnding =
  | {
      /** It said terminate after dispatch `dispatchCount`. */
      readonly outcome: 'stopped';
      /** The dispatch after which it said terminate. */
      readonly dispatchCount: number;
      /** Its decision's reason. */
      readonly reason: string;
      /** Its decision's deciding policy, when it named one. */
      readonly policy?: string;
      /** What the deciding policy measured, when the decision said. */
      readonly observed?: number;
      /** The limit it compared that with, when the decision said. */
      readonly limit?: number;
      /** The recorded elapsed time at that dispatch, in milliseconds. */
      readonly elapsedMs: number;
    }
  | {
      /** It never said terminate on the recorded dispatches. */
      readonly outcome: 'ran_past';
    }
  | {
      /** It threw, or answered what is not a decision (the run would have failed there). */
      readonly outcome: 'failed';
      /** The dispatch whose check failed. */
      readonly dispatchCount: number;
      /** What it threw or answered, as text. */
      readonly error: string;
    };

/**
 * How the candidate's ending compares with the recorded one:
 * - `earlier`: it stopped before the recorded last dispatch;
 * - `same`: it stopped at the recorded last dispatch, or never stopped where the recorded
 *   conversation ended without a decision (queue exhausted, an error, an abort: that ending
 *   would have come anyway);
 * - `later`: it never stopped where the recorded policy did (how much longer is unknown: no
 *   model is called);
 * - `unknown`: the recording is truncated before the candidate decided, or the candidate failed.
 */
export type Comparison = 'earlier' | 'same' | 'later' | 'unknown';

/** One recorded conversation replayed: how it ended, what the candidate did, and the difference. */
export interface ReplayedConversation {
  /** The recorded conversation's id. */
  readonly conversationId: string;
  /** The recorded orchestrator's name. */
  readonly orchestrator: string;
  /** How the recorded conversation ended. */
  readonly recorded: {
    /** The recorded ending's reason. */
    readonly reason: string;
    /** The recorded deciding policy, when a decision ended it. */
    readonly policy?: string;
    /** Dispatches of the recorded conversation. */
    readonly dispatchCount: number;
    /** Its elapsed time at the end, in milliseconds. */
    readonly elapsedMs: number;
    /** Input plus output tokens of the whole conversation (0 when none were reported). */
    readonly tokens: number;
    /** Whether dispatches past the recorder's cap were left out. */
    readonly truncated: boolean;
    /** Whether the recorded conversation ended converged (its ending's policy or reason). */
    readonly converged: boolean;
  };
  /** What the candidate did with it. */
  readonly candidate: CandidateEnding;
  /** The candidate's ending against the recorded one. */
  readonly comparison: Comparison;
  /**
   * Fields of the projection the candidate read that the recording does not have
   * (`projection.sprd`, a misspelling of `spread`), at most 10, up to the first dispatch where it
   * read none (watching stops there); empty when every field it read was there.
   */
  readonly missingFields: readonly string[];
  /**
   * Whether the candidate read such a field at every dispatch it checked: what it measured was
   * undefined (or NaN) throughout, so its verdict on this conversation says nothing.
   */
  readonly unmeasured: boolean;
  /** What stopping earlier saves; zeros unless `earlier`. */
  readonly saved: {
    /** Recorded dispatches after the candidate's stop. */
    readonly dispatches: number;
    /** Tokens reported after the candidate's stop (the recorded total minus those at the stop). */
    readonly tokens: number;
    /** Recorded time after the candidate's stop, in milliseconds. */
    readonly timeMs: number;
  };
}

const NO_HISTORY: readonly never[] = Object.freeze([]);

/** Keys that code probes without meaning a field (await, JSON.stringify, coercion): never missing. */
const PROBES = new Set(['then', 'toJSON', 'constructor', 'valueOf', 'toString', 'inspect']);
/** Fields kept in `missingFields` (and in the report's `unmeasured.fields`). */
export const MAX_MISSING_FIELDS = 10;

/**
 * `value` as the candidate sees it, noting every field it reads that is not there (the path,
 * `projection.sprd`): a misspelled measure reads undefined on every dispatch and says nothing.
 */
function watched<T>(value: T, path: string, onMissing: (field: string) => void): T {
  if (typeof value !== 'object' || value === null) return value;
  return new Proxy(value, {
    get(target, key, receiver) {
      if (typeof key === 'symbol' || PROBES.has(key)) return Reflect.get(target, key, receiver);
      const field = `${path}.${key}`;
      if (!(key in target)) {
        onMissing(field);
        return undefined;
      }
      return watched(Reflect.get(target, key, receiver), field, onMissing);
    },
  });
}

function tokensOf(usage: RecordedUsage | ReplayedUsage | undefined): number {
  return usage === undefined ? 0 : usage.inputTokens + usage.outputTokens;
}

function addUsage(a: ReplayedUsage, b: RecordedUsage | undefined): ReplayedUsage {
  if (b === undefined) return a;
  const sum: {
    inputTokens: number;
    outputTokens: number;
    cacheReadInputTokens?: number;
    reasoningOutputTokens?: number;
  } = { inputTokens: a.inputTokens + b.inputTokens, outputTokens: a.outputTokens + b.outputTokens };
  for (const kind of ['cacheReadInputTokens', 'reasoningOutputTokens'] as const) {
    if (a[kind] !== undefined || b[kind] !== undefined) sum[kind] = (a[kind] ?? 0) + (b[kind] ?? 0);
  }
  return sum;
}

const ZERO: ReplayedUsage = Object.freeze({ inputTokens: 0, outputTokens: 0 });

/** Whether an ending (recorded or the candidate's) is a convergence. */
export function isConverged(ending: {
  readonly reason: string;
  readonly policy?: string | undefined;
}): boolean {
  return ending.policy === 'converged' || ending.reason === 'converged';
}

/** Whether the recorded conversation was ended by a termination decision (not the loop). */
function endedByDecision(recording: RecordedConversation): boolean {
  return recording.ending.error === undefined && recording.ending.reason !== 'queue_exhausted';
}

/**
 * Runs `termination` over one recorded conversation: a fresh `start()`, then its check on the
 * state rebuilt at each recorded dispatch, until it says terminate. Given candidates per
 * orchestrator, the one of the recording's orchestrator (none: the candidate `failed`).
 */
export function replayConversation<R = unknown>(
  recording: RecordedConversation,
  candidates: Candidate<R>,
): ReplayedConversation {
  const termination = isTerminationPolicy(candidates)
    ? (candidates as TerminationPolicy<R, undefined>)
    : Object.hasOwn(candidates, recording.orchestrator)
      ? (candidates as CandidatesByOrchestrator<R>)[recording.orchestrator]
      : undefined;
  const ending = recording.ending;
  const dispatches = recording.dispatches;
  let candidate: CandidateEnding = { outcome: 'ran_past' };
  let usage = ZERO;
  let tokensAtStop = 0;
  let check: ReturnType<TerminationPolicy<R, undefined>['start']> | undefined;
  const missing = new Set<string>();
  /** Whether every dispatch checked so far read a field the recording does not have. */
  let unmeasured = true;
  let checkedAny = false;
  let missedNow = false;
  const onMissing = (field: string): void => {
    missedNow = true;
    if (missing.size < MAX_MISSING_FIELDS) missing.add(field);
  };
  if (termination === undefined) {
    candidate = {
      outcome: 'failed',
      dispatchCount: 0,
      error: `no candidate for orchestrator ${JSON.stringify(recording.orchestrator)} (candidates for: ${Object.keys(candidates).join(', ')})`,
    };
  } else
    try {
      check = termination.start();
      if (typeof check !== 'function') throw new TypeError('start() did not return a function');
    } catch (error) {
      candidate = {
        outcome: 'failed',
        dispatchCount: 0,
        error: `start() failed: ${describeThrown(error)}`,
      };
    }
  for (let i = 0; check !== undefined && i < dispatches.length; i++) {
    const d = dispatches[i] as RecordedConversation['dispatches'][number];
    usage = d.usage ?? addUsage(usage, d.tokens);
    const lastMessage: Message<undefined> = { sender: d.sender ?? d.responder, content: undefined };
    const state: ReplayedState<R> = {
      conversationId: recording.conversationId,
      // Watched until a dispatch reads no missing field (then the conversation is measured and
      // watching costs nothing more): a field read that the recording lacks is noted.
      projection: (unmeasured ? watched(d.record, 'projection', onMissing) : d.record) as R,
      lastMessage,
      queueDepth: d.queueDepth,
      dispatchCount: d.n,
      history: NO_HISTORY,
      usage,
    };
    let decision: unknown;
    missedNow = false;
    try {
      decision = check(state, d.elapsedMs);
      checkedAny = true;
      if (!missedNow) unmeasured = false;
    } catch (error) {
      candidate = { outcome: 'failed', dispatchCount: d.n, error: describeThrown(error) };
      break;
    }
    if (!isDecision(decision)) {
      candidate = {
        outcome: 'failed',
        dispatchCount: d.n,
        error: `it returned what is not a decision ({ terminate: boolean, reason: string })`,
      };
      break;
    }
    if (!decision.terminate) continue;
    if (!isReasonName(decision.reason)) {
      candidate = {
        outcome: 'failed',
        dispatchCount: d.n,
        error: `it ended with reason ${JSON.stringify(decision.reason)}, not a snake_case reason of its own`,
      };
      break;
    }
    const observed = (decision as { observed?: unknown }).observed;
    const limit = (decision as { limit?: unknown }).limit;
    candidate = {
      outcome: 'stopped',
      dispatchCount: d.n,
      reason: decision.reason,
      ...(typeof decision.policy === 'string' ? { policy: decision.policy } : {}),
      ...(typeof observed === 'number' ? { observed } : {}),
      ...(typeof limit === 'number' ? { limit } : {}),
      elapsedMs: d.elapsedMs,
    };
    tokensAtStop = tokensOf(usage);
    break;
  }
  const recordedTokens =
    recording.usage !== undefined ? tokensOf(recording.usage) : tokensOf(usage);
  const truncated = recording.truncated === true;
  let comparison: Comparison;
  if (candidate.outcome === 'stopped') {
    comparison = candidate.dispatchCount < ending.dispatchCount ? 'earlier' : 'same';
  } else if (candidate.outcome === 'failed') comparison = 'unknown';
  else if (truncated) comparison = 'unknown';
  else comparison = endedByDecision(recording) ? 'later' : 'same';
  const saved =
    comparison === 'earlier' && candidate.outcome === 'stopped'
      ? {
          dispatches: ending.dispatchCount - candidate.dispatchCount,
          tokens: Math.max(0, recordedTokens - tokensAtStop),
          timeMs: Math.max(0, ending.elapsedMs - candidate.elapsedMs),
        }
      : { dispatches: 0, tokens: 0, timeMs: 0 };
  return {
    conversationId: recording.conversationId,
    orchestrator: recording.orchestrator,
    missingFields: [...missing],
    unmeasured: checkedAny && unmeasured,
    recorded: {
      reason: ending.reason,
      ...(ending.policy !== undefined ? { policy: ending.policy } : {}),
      dispatchCount: ending.dispatchCount,
      elapsedMs: ending.elapsedMs,
      tokens: recordedTokens,
      truncated,
      converged: isConverged(ending),
    },
    candidate,
    comparison,
    saved,
  };
}
