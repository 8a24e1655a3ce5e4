/**
 * Replay: the state a termination policy would have seen at each recorded dispatch, rebuilt from
 * the recording, handed to a candidate policy; no responder, no model call. One conversation is
 * `replayConversation()`; `replay()` streams any number of them into a summary of bounded size.
 */

import { fail, isFunction, positiveInteger } from '../core/shared/validate.ts';
import type { TerminationPolicy } from '../core/spi/policy.ts';
import { isDecision, isReasonName } from '../core/spi/policy.ts';
import type { ConversationState, Message } from '../core/spi/types.ts';
import type { RecordedConversation, RecordedUsage } from './format.ts';
import { type ReadOptions, type RecordingSource, readRecordings } from './read.ts';
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
const MAX_MISSING_FIELDS = 10;

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
function isConverged(ending: {
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
 * A candidate per orchestrator, by the orchestrator's name: a recording of several orchestrators
 * (each with its own policy) replays each conversation against its orchestrator's candidate.
 */
export type CandidatesByOrchestrator<R = unknown> = Readonly<
  Record<string, TerminationPolicy<R, undefined>>
>;

/** What replay runs: one candidate for every conversation, or one per orchestrator. */
export type Candidate<R = unknown> = TerminationPolicy<R, undefined> | CandidatesByOrchestrator<R>;

/** Whether a value is a candidate per orchestrator: a plain object of termination policies, at least one. */
export function isCandidatesByOrchestrator(value: unknown): value is CandidatesByOrchestrator {
  if (typeof value !== 'object' || value === null || isTerminationPolicy(value)) return false;
  const values = Object.values(value);
  return values.length > 0 && values.every(isTerminationPolicy);
}

/** The candidate's name: the policy's, or `orchestrator: name` for each orchestrator. */
export function candidateName(candidate: Candidate<never>): string {
  if (isTerminationPolicy(candidate)) return candidate.name;
  return Object.entries(candidate)
    .map(([orchestrator, policy]) => `${orchestrator}: ${policy.name}`)
    .join(', ');
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

/** A recorded total, what the candidate saves of it, and the share. */
export interface Saving {
  /** The total over the recorded conversations. */
  readonly recorded: number;
  /** How much of it the candidate's earlier stops save. */
  readonly saved: number;
  /** `saved / recorded`, 0 when nothing was recorded. */
  readonly share: number;
}

/** A conversation in one of the report's lists. */
export interface ListedConversation {
  /** The recorded conversation's id. */
  readonly conversationId: string;
  /** The recorded orchestrator's name. */
  readonly orchestrator: string;
  /** How the recorded conversation ended. */
  readonly recorded: {
    /** Dispatches of the recorded conversation. */
    readonly dispatchCount: number;
    /** The recorded ending's reason. */
    readonly reason: string;
  };
  /** What the candidate did with it. */
  readonly candidate: CandidateEnding;
}

/** A bounded list: the first `maxListed` conversations and how many there were. */
export interface ConversationList {
  /** How many conversations belong in the list (also those past `maxListed`). */
  readonly count: number;
  /** The first `maxListed` of them. */
  readonly conversations: readonly ListedConversation[];
}

/** One point of the report's chart: recorded dispatches against the candidate's. */
export interface ChartPoint {
  /** The recorded conversation's id. */
  readonly conversationId: string;
  /** Its recorded dispatches. */
  readonly recorded: number;
  /** The candidate's stopping dispatch; null when it ran past the recording or failed. */
  readonly candidate: number | null;
  /** What the candidate did: stopped (at `candidate`), ran past the recording, or failed. */
  readonly outcome: CandidateEnding['outcome'];
  /** The candidate's ending against the recorded one. */
  readonly comparison: Comparison;
}

/** What `replay()` found: counts by comparison, what the candidate saves, bounded lists, a chart. */
export interface ReplayReport {
  /** The candidate's name (`orchestrator: name, …` for candidates by orchestrator). */
  readonly policy: string;
  /** Recorded conversations replayed. */
  readonly conversations: number;
  /** Conversations the candidate stopped earlier than recorded. */
  readonly earlier: number;
  /** Conversations it ended where they ended. */
  readonly same: number;
  /** Conversations it would have let run on. */
  readonly later: number;
  /** Conversations where the comparison is unknown (truncated recording, failed candidate). */
  readonly unknown: number;
  /** Dispatches recorded and saved. */
  readonly dispatches: Saving;
  /** Tokens (input plus output) recorded and saved. */
  readonly tokens: Saving;
  /** Conversation time recorded and saved, in milliseconds. */
  readonly timeMs: Saving;
  /** Conversations the candidate cut, with a reason other than converging, before they converged. */
  readonly risk: ConversationList;
  /** Conversations the candidate ended `converged` earlier than recorded. */
  readonly convergedEarlier: ConversationList;
  /** Conversations where the candidate threw or answered something that is not a decision. */
  readonly failed: ConversationList;
  /** Truncated recordings (the candidate may have decided past what was kept). */
  readonly truncated: number;
  /** Recorded dispatches without `record` (the candidate saw `projection: undefined` there). */
  readonly dispatchesWithoutRecord: number;
  /**
   * Conversations where the candidate read, at every dispatch it checked, a field the recording
   * does not have (its measure was undefined throughout: a misspelled field, or one `record`
   * did not keep), and the first 10 such fields (`projection.sprd`). Non-zero is a warning: the
   * comparison of those conversations says nothing about the candidate.
   */
  readonly unmeasured: {
    /** How many conversations. */
    readonly count: number;
    /** The fields read that were not there, at most 10. */
    readonly fields: readonly string[];
  };
  /** Bad lines skipped (`skipBad`). */
  readonly skippedLines: number;
  /** At most `chartSize` conversations, chosen evenly at random (seeded: the same input gives the same chart). */
  readonly chart: readonly ChartPoint[];
}

/** What `replay(recordings, termination, options)` takes besides the recordings and the candidate. */
export interface ReplayOptions extends ReadOptions {
  /**
   * Conversations kept in each of the report's lists (`risk`, `convergedEarlier`, `failed`).
   * @default 100
   */
  readonly maxListed?: number;
  /**
   * Conversations kept for the chart (a reservoir sample).
   * @default 2000
   */
  readonly chartSize?: number;
  /** Called with every replayed conversation, as it is replayed (to keep them all, say). */
  readonly onConversation?: (replayed: ReplayedConversation) => void;
}

function share(saved: number, recorded: number): number {
  return recorded > 0 ? saved / recorded : 0;
}

function listed(r: ReplayedConversation): ListedConversation {
  return {
    conversationId: r.conversationId,
    orchestrator: r.orchestrator,
    recorded: { dispatchCount: r.recorded.dispatchCount, reason: r.recorded.reason },
    candidate: r.candidate,
  };
}

class BoundedList {
  count = 0;
  readonly conversations: ListedConversation[] = [];
  constructor(readonly max: number) {}
  add(r: ReplayedConversation): void {
    this.count++;
    if (this.conversations.length < this.max) this.conversations.push(listed(r));
  }
  toJSON(): ConversationList {
    return { count: this.count, conversations: this.conversations };
  }
}

/** A small seeded generator (mulberry32): the chart's sample is the same for the same input. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Whether a value is a termination policy (`{ name, start() }`), as replay and the CLI need one. */
export function isTerminationPolicy(value: unknown): value is TerminationPolicy<unknown, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { name?: unknown }).name === 'string' &&
    typeof (value as { start?: unknown }).start === 'function'
  );
}

/** Lines skipped by a `readRecordings()`/`readRecordingFiles()` stream handed to `replay()`. */
function nestedSkipped(recordings: RecordingSource): number {
  const skipped = (recordings as { skipped?: unknown }).skipped;
  return typeof skipped === 'number' ? skipped : 0;
}

/**
 * Replays every recorded conversation against `termination` and sums up what it would have
 * changed. `recordings`: a path to an NDJSON file, or an array or (async) iterable of recorded
 * conversations (parsed objects or NDJSON lines). Memory stays bounded whatever their number:
 * one conversation at a time, bounded lists and chart.
 */
export async function replay<R = unknown>(
  recordings: RecordingSource,
  termination: Candidate<R>,
  options: ReplayOptions = {},
): Promise<ReplayReport> {
  if (!isTerminationPolicy(termination) && !isCandidatesByOrchestrator(termination)) {
    fail(
      'replay(recordings, termination)',
      'a termination policy ({ name, start() }) or an object of them by orchestrator name',
      termination,
    );
  }
  if (
    typeof recordings !== 'string' &&
    !(
      recordings !== null &&
      typeof recordings === 'object' &&
      (Symbol.iterator in recordings || Symbol.asyncIterator in recordings)
    )
  ) {
    fail(
      'replay(recordings)',
      'a path, an array or an (async) iterable of recorded conversations',
      recordings,
    );
  }
  const maxListed =
    options.maxListed === undefined
      ? 100
      : positiveInteger('replay({ maxListed })', options.maxListed);
  const chartSize =
    options.chartSize === undefined
      ? 2000
      : positiveInteger('replay({ chartSize })', options.chartSize);
  if (options.onConversation !== undefined)
    isFunction('replay({ onConversation })', options.onConversation);
  const stream = readRecordings(recordings, options);
  const counts = {
    conversations: 0,
    earlier: 0,
    same: 0,
    later: 0,
    unknown: 0,
    truncated: 0,
    withoutRecord: 0,
    unmeasured: 0,
  };
  const unmeasuredFields = new Set<string>();
  const totals = {
    dispatches: 0,
    tokens: 0,
    timeMs: 0,
    savedDispatches: 0,
    savedTokens: 0,
    savedTimeMs: 0,
  };
  const risk = new BoundedList(maxListed);
  const convergedEarlier = new BoundedList(maxListed);
  const failed = new BoundedList(maxListed);
  const chart: ChartPoint[] = [];
  const random = seeded(21);
  for await (const recording of stream) {
    const r = replayConversation(recording, termination);
    counts.conversations++;
    counts[r.comparison]++;
    if (r.recorded.truncated) counts.truncated++;
    if (r.unmeasured) {
      counts.unmeasured++;
      for (const field of r.missingFields)
        if (unmeasuredFields.size < MAX_MISSING_FIELDS) unmeasuredFields.add(field);
    }
    for (const d of recording.dispatches) if (d.record === undefined) counts.withoutRecord++;
    totals.dispatches += r.recorded.dispatchCount;
    totals.tokens += r.recorded.tokens;
    totals.timeMs += r.recorded.elapsedMs;
    totals.savedDispatches += r.saved.dispatches;
    totals.savedTokens += r.saved.tokens;
    totals.savedTimeMs += r.saved.timeMs;
    if (r.candidate.outcome === 'failed') failed.add(r);
    if (r.comparison === 'earlier' && r.candidate.outcome === 'stopped') {
      if (isConverged(r.candidate)) convergedEarlier.add(r);
      else if (r.recorded.converged) risk.add(r);
    }
    const point: ChartPoint = {
      conversationId: r.conversationId,
      recorded: r.recorded.dispatchCount,
      candidate: r.candidate.outcome === 'stopped' ? r.candidate.dispatchCount : null,
      outcome: r.candidate.outcome,
      comparison: r.comparison,
    };
    // Reservoir sampling: every conversation equally likely to be charted.
    if (chart.length < chartSize) chart.push(point);
    else {
      const j = Math.floor(random() * counts.conversations);
      if (j < chartSize) chart[j] = point;
    }
    options.onConversation?.(r);
  }
  return {
    policy: candidateName(termination as Candidate<never>),
    conversations: counts.conversations,
    earlier: counts.earlier,
    same: counts.same,
    later: counts.later,
    unknown: counts.unknown,
    dispatches: {
      recorded: totals.dispatches,
      saved: totals.savedDispatches,
      share: share(totals.savedDispatches, totals.dispatches),
    },
    tokens: {
      recorded: totals.tokens,
      saved: totals.savedTokens,
      share: share(totals.savedTokens, totals.tokens),
    },
    timeMs: {
      recorded: totals.timeMs,
      saved: totals.savedTimeMs,
      share: share(totals.savedTimeMs, totals.timeMs),
    },
    risk: risk.toJSON(),
    convergedEarlier: convergedEarlier.toJSON(),
    failed: failed.toJSON(),
    truncated: counts.truncated,
    dispatchesWithoutRecord: counts.withoutRecord,
    unmeasured: { count: counts.unmeasured, fields: [...unmeasuredFields] },
    skippedLines: stream.skipped + nestedSkipped(recordings),
    chart,
  };
}
