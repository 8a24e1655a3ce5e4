/**
 * A durable conversation runs in segments, each one conversation span of the same trace. What a
 * segment learns at its start (the core's `ConversationStart.resumed`, and the telemetry's own data
 * in it), what it saves in each checkpoint for the next, and the dispatch counts held until the
 * commit storing them lands.
 *
 * The telemetry saves only what the core's checkpoint does not carry: the trace context, how far
 * ended spans account for the dispatches, and a sampler's keep. The dispatch count, the active time,
 * the segment number and the usage ledger are the core's (`resumed`, and the ending's `usage`).
 */
import {
  type Attributes,
  type Context,
  isSpanContextValid,
  isValidSpanId,
  isValidTraceId,
  type Link,
  type SpanContext,
  trace,
} from '@opentelemetry/api';
import type { ConversationResume, ConversationStart } from '../core/spi/observer.ts';
import type { ConversationUsage } from '../core/spi/types.ts';
import type { OrchestratorRecord, ResponderSlots } from './metric-records.ts';
import type { OrchestratorMetrics } from './metrics.ts';
import {
  ATTR_CONVERSATION_RESUME_CAUSE,
  ATTR_CONVERSATION_RESUME_DISPATCHES_LOST,
  ATTR_CONVERSATION_RESUME_ENTRIES,
  ATTR_CONVERSATION_SAMPLER_RULE,
  ATTR_CONVERSATION_SEGMENT,
  SAMPLER_RULE_SEGMENT,
} from './semconv.ts';

/**
 * What the telemetry keeps in each checkpoint of a durable conversation (`save()`, under the key
 * `telemetry`), and reads back when it resumes. JSON-safe; every field is checked on the way in.
 */
export interface SavedTelemetry {
  readonly v: 1;
  /** The conversation's trace id (absent without a recording tracer). */
  readonly traceId?: string;
  /**
   * The span every segment starts under: the parent span active at the first `run()`, or, when
   * there was none, the first segment's own span (the trace's root).
   */
  readonly parentSpanId?: string;
  readonly parentFlags?: number;
  readonly parentRemote?: boolean;
  /** The span of the segment that made the checkpoint: the next segment links to it. */
  readonly spanId?: string;
  readonly spanFlags?: number;
  /**
   * Dispatches accounted for by segment spans that ended: on a span event, or counted in
   * `conversation.dispatch_events.dropped`. A segment resumed after a crash says the rest of the
   * committed ones were lost (`conversation.resume.dispatches_lost`).
   */
  readonly accounted: number;
  /** A sampler had kept the conversation's trace by then: every later segment is kept. */
  readonly kept?: true;
}

/** The trace context a segment saves. */
export type SavedTrace = Omit<SavedTelemetry, 'v' | 'accounted' | 'kept'>;

function flagsOf(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= 255
    ? value
    : undefined;
}

/** `saved` if it is telemetry data this version can read, its fields checked; else undefined. */
function readSaved(saved: unknown): SavedTelemetry | undefined {
  if (typeof saved !== 'object' || saved === null) return undefined;
  const data = saved as Record<string, unknown>;
  if (data.v !== 1) return undefined;
  const accounted =
    typeof data.accounted === 'number' && Number.isInteger(data.accounted) && data.accounted >= 0
      ? data.accounted
      : 0;
  const result: { -readonly [K in keyof SavedTelemetry]: SavedTelemetry[K] } = { v: 1, accounted };
  const parentFlags = flagsOf(data.parentFlags);
  if (
    typeof data.traceId === 'string' &&
    isValidTraceId(data.traceId) &&
    typeof data.parentSpanId === 'string' &&
    isValidSpanId(data.parentSpanId) &&
    parentFlags !== undefined
  ) {
    result.traceId = data.traceId;
    result.parentSpanId = data.parentSpanId;
    result.parentFlags = parentFlags;
    result.parentRemote = data.parentRemote === true;
    const spanFlags = flagsOf(data.spanFlags);
    if (typeof data.spanId === 'string' && isValidSpanId(data.spanId) && spanFlags !== undefined) {
      result.spanId = data.spanId;
      result.spanFlags = spanFlags;
    }
  }
  if (data.kept === true) result.kept = true;
  return result;
}

/** The non-negative finite number `value`, or 0. */
export function count(value: unknown): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
}

/** What a segment knows at its start of the segments before it. */
export interface SegmentStart {
  /** The store's name, for a durable conversation (one that may have segments). */
  readonly store: string | undefined;
  /** The core's account of what was committed before (a later segment of a durable one). */
  readonly resumed: ConversationResume | undefined;
  /** The telemetry's data of the last commit, when it can be read. */
  readonly saved: SavedTelemetry | undefined;
  /** Dispatches committed before this segment (0 for a first segment). */
  readonly dispatchBase: number;
  /**
   * The start time less the active time committed before this segment: the elapsed times the
   * core reports count from the conversation's start, so an event at elapsed `e` is stamped
   * `clockBase + e` (the start time plus `e` for a first segment).
   */
  readonly clockBase: number;
  /** `SavedTelemetry.accounted` for this segment's checkpoints. */
  readonly accounted: number;
}

export function readSegment(start: ConversationStart<unknown>): SegmentStart {
  const store = typeof start.store === 'string' ? start.store.slice(0, 64) : undefined;
  const resumed = store === undefined ? undefined : start.resumed;
  const saved = resumed === undefined ? undefined : readSaved(resumed.saved);
  const dispatchBase = count(resumed?.dispatchCount);
  // Lost to a crash: what the crashed segments committed and no ended segment span accounts for.
  // After a suspension or a handoff the previous segment ended its span: all is accounted for.
  const accounted =
    resumed === undefined
      ? 0
      : resumed.cause === 'crash'
        ? Math.min(saved?.accounted ?? 0, dispatchBase)
        : dispatchBase;
  return {
    store,
    resumed,
    saved,
    dispatchBase,
    clockBase: start.startTimeMs - count(resumed?.elapsedMs),
    accounted,
  };
}

/**
 * The context a segment's span starts in, and its links: for a resumed trace, the same trace under
 * the original parent, linked to the previous segment; else `active` as it is.
 */
export function segmentParent(
  saved: SavedTelemetry | undefined,
  active: Context,
): { readonly parent: Context; readonly links: Link[] | undefined } {
  if (saved?.traceId === undefined) return { parent: active, links: undefined };
  const parent = trace.setSpanContext(active, {
    traceId: saved.traceId,
    spanId: saved.parentSpanId as string,
    traceFlags: saved.parentFlags as number,
    isRemote: saved.parentRemote === true,
  });
  if (saved.spanId === undefined) return { parent, links: undefined };
  const context = {
    traceId: saved.traceId,
    spanId: saved.spanId,
    traceFlags: saved.spanFlags as number,
  };
  return { parent, links: [{ context }] };
}

/** A durable conversation span's own attributes: its segment, why it resumed, what was lost. */
export function addSegmentAttributes(
  attributes: Attributes,
  segment: SegmentStart,
  kept: boolean,
): void {
  const { resumed } = segment;
  attributes[ATTR_CONVERSATION_SEGMENT] = resumed === undefined ? 1 : count(resumed.segment);
  if (resumed !== undefined) {
    attributes[ATTR_CONVERSATION_RESUME_CAUSE] = resumed.cause;
    attributes[ATTR_CONVERSATION_RESUME_ENTRIES] = count(resumed.entries);
    if (resumed.cause === 'crash') {
      attributes[ATTR_CONVERSATION_RESUME_DISPATCHES_LOST] =
        segment.dispatchBase - segment.accounted;
    }
  }
  // Read by the sampler when the span starts: an earlier segment was kept, so is this one.
  if (kept) attributes[ATTR_CONVERSATION_SAMPLER_RULE] = SAMPLER_RULE_SEGMENT;
}

/**
 * The trace context a segment saves: the saved one's parent when this segment continues that
 * trace; else the parent active at the start (when in the same trace), or the span itself (a root).
 */
export function savedTrace(
  own: SpanContext,
  saved: SavedTelemetry | undefined,
  parent: Context,
): SavedTrace {
  let parentSpanId = own.spanId;
  let parentFlags = own.traceFlags;
  let parentRemote = false;
  if (saved?.traceId === own.traceId) {
    parentSpanId = saved.parentSpanId as string;
    parentFlags = saved.parentFlags as number;
    parentRemote = saved.parentRemote === true;
  } else {
    const active = trace.getSpanContext(parent);
    if (active !== undefined && isSpanContextValid(active) && active.traceId === own.traceId) {
      parentSpanId = active.spanId;
      parentFlags = active.traceFlags;
      parentRemote = active.isRemote === true;
    }
  }
  return {
    traceId: own.traceId,
    parentSpanId,
    parentFlags,
    parentRemote,
    spanId: own.spanId,
    spanFlags: own.traceFlags,
  };
}

/** The data a segment saves in a checkpoint. */
export function savedTelemetry(
  trace: SavedTrace | undefined,
  accounted: number,
  kept: boolean,
): SavedTelemetry {
  const data: { -readonly [K in keyof SavedTelemetry]: SavedTelemetry[K] } = {
    v: 1,
    ...trace,
    accounted,
  };
  if (kept) data.kept = true;
  return data;
}

/**
 * Whether anything reported usage before this segment, read from the core's ledger as it ends
 * (restored from the checkpoint): a reporting party has an entry. Tolerates an ending built by
 * hand without the per-party detail.
 */
export function usageReported(usage: ConversationUsage | undefined): boolean {
  if (usage === undefined) return false;
  if (usage.turnPolicy !== undefined) return true;
  for (const _ in usage.byResponder) return true;
  return false;
}

/**
 * Durable conversations with metrics: dispatches heard but not yet in a landed commit, per
 * responder. `orchestrator_dispatches_total` counts a dispatch when the commit storing it lands,
 * so a dispatch re-run after a crash is counted once, by the process that stored it.
 */
export class CommitCounts {
  /** Dispatches heard since the last commit began, per responder (the hot path adds to it). */
  readonly pending: number[];
  /** Dispatches in the commit under way (moved from `pending` by `startCommit()`). */
  readonly #committing: number[];
  /** The counts the last landed commit added, while a refusal may still follow in the same turn. */
  #justFlushed: number[] | undefined;

  constructor(responders: number) {
    this.pending = Array.from({ length: responders }, () => 0);
    this.#committing = Array.from({ length: responders }, () => 0);
  }

  /** A checkpoint is being made: what is pending goes into it. */
  startCommit(): void {
    const pending = this.pending;
    const committing = this.#committing;
    for (let i = 0; i < pending.length; i++) {
      committing[i] = (committing[i] as number) + (pending[i] as number);
      pending[i] = 0;
    }
  }

  /**
   * The commit attempt finished. Landed: the dispatches it stored are counted now. Failed: they
   * are not stored, and are counted when a later segment stores them.
   */
  finished(
    metrics: OrchestratorMetrics,
    record: OrchestratorRecord,
    slots: ResponderSlots,
    failed: boolean,
  ): void {
    const committing = this.#committing;
    if (!failed) {
      add(metrics, record, slots, committing, 1);
      // A refusal is told right after, in the same turn (`refused`): it undoes this.
      this.#justFlushed = committing.slice();
      queueMicrotask(() => {
        this.#justFlushed = undefined;
      });
    }
    committing.fill(0);
  }

  /** The store refused: a commit that just landed stored nothing, and its counts are taken back. */
  refused(metrics: OrchestratorMetrics, record: OrchestratorRecord, slots: ResponderSlots): void {
    const undo = this.#justFlushed;
    if (undo === undefined) return;
    this.#justFlushed = undefined;
    add(metrics, record, slots, undo, -1);
  }
}

/** Adds `counts` (per responder) times `sign` to the committed dispatches. */
function add(
  metrics: OrchestratorMetrics,
  record: OrchestratorRecord,
  slots: ResponderSlots,
  counts: readonly number[],
  sign: 1 | -1,
): void {
  for (let i = 0; i < counts.length; i++) {
    const n = counts[i] as number;
    if (n > 0) metrics.dispatchesCommitted(metrics.slot(record, slots, i), sign * n);
  }
}
