/**
 * The records the orchestrator metrics count into: plain numbers and the series they belong to,
 * one tree per orchestrator, read by the families' collectors at scrape time (metric-families.ts)
 * and written by the recording methods (metrics.ts).
 */
import type { Attributes } from '@opentelemetry/api';
import type { Kept, Series } from './collected-counter.ts';
import type { HistogramSeries } from './dispatch-histogram.ts';
import {
  LABEL_ORCHESTRATOR,
  LABEL_REASON,
  LABEL_TOKEN_TYPE,
  TOKEN_TYPE_INPUT,
  TOKEN_TYPE_OUTPUT,
} from './semconv.ts';

/** A series at 0 with `labels`. */
export function series(labels: Readonly<Record<string, string>>): Series {
  return { labels, count: 0 };
}

/**
 * One (orchestrator, responder). Its dispatches are counted beside the duration histogram, in
 * the same array (`duration.tallyAt`): the hot path touches one object per dispatch.
 */
export interface DispatchRecord extends Kept {
  readonly duration: HistogramSeries;
  /** Failed invocations; created at the first (a zero series per responder is not worth a scrape). */
  errors: Series | undefined;
  /** Conversations the dispatch deadline ended while this responder ran; created at the first. */
  deadlines: Series | undefined;
  /** Invocations run again after a crash (attempt > 1); created at the first. */
  reinvocations: Series | undefined;
  /**
   * The OpenTelemetry path: the attributes of the GenAI agent metrics of this responder, made at
   * its first invocation there, and those of its failed ones by `error.type`.
   */
  genAi: Attributes | undefined;
  genAiFailed: Map<string, Attributes> | undefined;
}

export function dispatchRecord(
  labels: Readonly<Record<string, string>>,
  duration: HistogramSeries,
): DispatchRecord {
  return {
    labels,
    duration,
    errors: undefined,
    deadlines: undefined,
    reinvocations: undefined,
    genAi: undefined,
    genAiFailed: undefined,
    read: () => duration.tally,
    zero: () => {
      duration.counts[duration.tallyAt] = 0;
    },
  };
}

/** Counts one dispatch of `record` (for callers without a duration). */
export function countDispatch(record: DispatchRecord): void {
  const counts = record.duration.counts;
  const at = record.duration.tallyAt;
  counts[at] = (counts[at] as number) + 1;
}

/** Conversations of one (orchestrator, reason label) that ended: `count` is the conversations. */
export interface EndRecord extends Series {
  /** Created at the first conversation that ends with this reason. */
  duration: HistogramSeries | undefined;
  dispatches: HistogramSeries | undefined;
  /** Created at the first conversation with this reason that reported tokens. */
  tokens: HistogramSeries | undefined;
}

/**
 * Tokens of one (orchestrator, responder, model): the two `type` series, and the cached input
 * and reasoning output tokens (the GenAI usage counters of the OpenTelemetry path count them).
 */
export interface TokenRecord {
  readonly input: Series;
  readonly output: Series;
  readonly cacheRead: Series;
  readonly reasoning: Series;
  /** `gen_ai.provider.name` of the responder that first reported under these labels. */
  readonly provider: string;
  /** The GenAI usage counters' attributes, made at their first collection. */
  genAi: Attributes | undefined;
}

/** Everything counted for one orchestrator; looked up once per conversation. */
export interface OrchestratorRecord {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly started: Series;
  /** The gauge: `count` is the conversations running now. */
  readonly inProgress: Series;
  readonly listenerErrors: Series;
  /** By reason label: at most the built-in reasons, `maxReasons` user reasons and `other`. */
  readonly ends: Map<string, EndRecord>;
  /** By responder label: at most `maxResponders` of them and the overflow value. */
  readonly responders: Map<string, DispatchRecord>;
  /** The slots of a responder-name array (an orchestrator's), by array identity. */
  readonly byNames: WeakMap<readonly string[], ResponderSlots>;
  /** By `responder\u0000model` label values: created at the first report. */
  readonly tokens: Map<string, TokenRecord>;
  /** Set by `release`: the record no longer reaches the registry. */
  released: boolean;
  /** Durable conversations: resumes by cause (created at the first). */
  readonly resumed: Map<string, Series>;
  /** Durable conversations: commits by store label (created at the first). */
  readonly checkpoints: Map<string, CheckpointRecord>;
  /** Durable conversations: refused commits and renewals (created at the first). */
  leaseConflicts: Series | undefined;
  /** The OpenTelemetry path: `gen_ai.invoke_workflow.duration`'s attributes, and by `error.type`. */
  genAi: Attributes | undefined;
  genAiFailed: Map<string, Attributes> | undefined;
}

/** The commits of one (orchestrator, store). */
export interface CheckpointRecord {
  readonly duration: HistogramSeries;
  readonly failures: Series;
  /** Bytes written, by kind of write (created at the first of each kind). */
  readonly sizes: Map<string, HistogramSeries>;
  /** Snapshot writes (created at the first). */
  snapshotDuration: HistogramSeries | undefined;
  snapshotFailures: Series | undefined;
}

/**
 * The records of an orchestrator's responders, by index, filled when a responder first
 * dispatches (or fails): a responder that never dispatches has no series. Shared by every
 * conversation of the orchestrator, so the first dispatch fills the slot for all of them.
 */
export interface ResponderSlots {
  readonly names: readonly string[];
  readonly records: (DispatchRecord | undefined)[];
  /** `records[i].duration`: what the hot path indexes. */
  readonly durations: (HistogramSeries | undefined)[];
}

/** The record of a new orchestrator `name`: its own series at 0, the others made at first use. */
export function orchestratorRecord(name: string): OrchestratorRecord {
  const labels = { [LABEL_ORCHESTRATOR]: name };
  return {
    name,
    labels,
    started: series(labels),
    inProgress: series(labels),
    listenerErrors: series(labels),
    ends: new Map(),
    responders: new Map(),
    byNames: new WeakMap(),
    tokens: new Map(),
    released: false,
    resumed: new Map(),
    checkpoints: new Map(),
    leaseConflicts: undefined,
    genAi: undefined,
    genAiFailed: undefined,
  };
}

/** The end record of (orchestrator, reason label `label`), its histograms made at first use. */
export function endRecord(orchestrator: string, label: string): EndRecord {
  return {
    ...series({ [LABEL_ORCHESTRATOR]: orchestrator, [LABEL_REASON]: label }),
    duration: undefined,
    dispatches: undefined,
    tokens: undefined,
  };
}

/** The token record of (orchestrator, responder, model) `labels`, first reported by `provider`. */
export function tokenRecord(
  labels: Readonly<Record<string, string>>,
  provider: string,
): TokenRecord {
  return {
    input: series({ ...labels, [LABEL_TOKEN_TYPE]: TOKEN_TYPE_INPUT }),
    output: series({ ...labels, [LABEL_TOKEN_TYPE]: TOKEN_TYPE_OUTPUT }),
    cacheRead: series(labels),
    reasoning: series(labels),
    provider,
    genAi: undefined,
  };
}

/** The commit records of (orchestrator, store) `labels`, `duration` their histogram's series. */
export function checkpointRecord(
  labels: Readonly<Record<string, string>>,
  duration: HistogramSeries,
): CheckpointRecord {
  return {
    duration,
    failures: series(labels),
    sizes: new Map(),
    snapshotDuration: undefined,
    snapshotFailures: undefined,
  };
}

/** Empty slots for an orchestrator's `responders`, in the order given. */
export function responderSlots(responders: readonly string[]): ResponderSlots {
  // Packed arrays of `undefined` (not holes): V8 keeps the hot path's loads fast.
  return {
    names: responders,
    records: Array.from({ length: responders.length }, () => undefined),
    durations: Array.from({ length: responders.length }, () => undefined),
  };
}
