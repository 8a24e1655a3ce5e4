/**
 * Replay: the recorded conversations, one at a time, each replayed against a candidate policy
 * (`replayConversation()`, replay-conversation.ts), streamed into a summary of bounded size.
 */

import { fail, isFunction, positiveInteger } from '../core/shared/validate.ts';
import {
  type Candidate,
  candidateName,
  isCandidatesByOrchestrator,
  isTerminationPolicy,
} from './candidate.ts';
import { type ReadOptions, type RecordingSource, readRecordings } from './read.ts';
import {
  type CandidateEnding,
  type Comparison,
  isConverged,
  MAX_MISSING_FIELDS,
  type ReplayedConversation,
  replayConversation,
} from './replay-conversation.ts';

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
