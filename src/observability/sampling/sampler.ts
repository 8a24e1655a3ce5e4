/**
 * Conversation-aware tail sampling, in process. A conversation and every span started in its
 * context live in this process and end when it ends, so the decision the OpenTelemetry
 * Collector's `tail_sampling` makes by waiting and guessing can be made here exactly: the sampler
 * buffers each conversation's trace and decides when the conversation span ends, from what the
 * telemetry wrote on it (`conversation.end.reason`, status, elapsed, dispatch count).
 *
 * It is a span processor wrapping the one that exports (`next`). Kept traces' spans go to `next`
 * in the order they ended; dropped ones' never do; spans of a decided trace that end later follow
 * the decision; spans of traces without a conversation pass straight through.
 */
import { type Context, diag, SpanStatusCode } from '@opentelemetry/api';
import {
  fail,
  nonNegativeNumber,
  positiveInteger,
  positiveNumber,
} from '../../core/shared/validate.ts';
import { endReasons } from '../../core/spi/end-reasons.ts';
import { rateLimited } from '../guard.ts';
import { asRegistry } from '../registry.ts';
import {
  ATTR_CONVERSATION_DISPATCH_COUNT,
  ATTR_CONVERSATION_ELAPSED_MS,
  ATTR_CONVERSATION_END_REASON,
  ATTR_CONVERSATION_ENDED,
  ATTR_CONVERSATION_SAMPLER_RULE,
  ATTR_CONVERSATION_SAMPLER_SPANS_LOST,
  ATTR_GEN_AI_OPERATION_NAME,
  GEN_AI_OPERATION_INVOKE_WORKFLOW,
  SAMPLER_DECISION_DROP,
  SAMPLER_DECISION_KEEP,
  SAMPLER_LIMIT_TOTAL,
  SAMPLER_LIMIT_TRACE,
  SAMPLER_RULE_FAILED,
  SAMPLER_RULE_FORCE_FLUSH,
  SAMPLER_RULE_LONG,
  SAMPLER_RULE_MAX_AGE,
  SAMPLER_RULE_RATIO,
  SAMPLER_RULE_REASON,
  SAMPLER_RULE_SEGMENT,
  SAMPLER_RULE_SHUTDOWN,
  SAMPLER_RULE_SLOW,
  SAMPLER_RULE_UNCLASSIFIED,
  SPAN_CONVERSATION_PREFIX,
} from '../semconv.ts';
import { optionsObject, withMethods } from '../shape.ts';
import { sampledBy } from './kept-spans.ts';
import { type SamplerDecisions, type SamplerMetrics, samplerMetricsFor } from './metrics.ts';
import { traceIdRatio } from './trace-ratio.ts';
import type {
  ConversationSamplerOptions,
  SampledSpan,
  SpanProcessorLike,
  StartedSpan,
} from './types.ts';

/** Reasons of a failed conversation: always kept, whatever `keepReasons` says. */
const FAILED_REASONS: ReadonlySet<string> = new Set(endReasons((r) => r.failed));
/** What `keepReasons` leaves out by default: the endings of a conversation that went well. */
const UNREMARKABLE_REASONS: ReadonlySet<string> = new Set(endReasons((r) => r.unremarkable));

/** Every (decision, rule) the sampler counts; each series starts at 0. */
const DECISIONS: SamplerDecisions = [
  [SAMPLER_DECISION_KEEP, SAMPLER_RULE_FAILED],
  [SAMPLER_DECISION_KEEP, SAMPLER_RULE_REASON],
  [SAMPLER_DECISION_KEEP, SAMPLER_RULE_SLOW],
  [SAMPLER_DECISION_KEEP, SAMPLER_RULE_LONG],
  [SAMPLER_DECISION_KEEP, SAMPLER_RULE_RATIO],
  [SAMPLER_DECISION_KEEP, SAMPLER_RULE_UNCLASSIFIED],
  [SAMPLER_DECISION_KEEP, SAMPLER_RULE_MAX_AGE],
  [SAMPLER_DECISION_KEEP, SAMPLER_RULE_FORCE_FLUSH],
  [SAMPLER_DECISION_KEEP, SAMPLER_RULE_SHUTDOWN],
  [SAMPLER_DECISION_KEEP, SAMPLER_RULE_SEGMENT],
  [SAMPLER_DECISION_DROP, SAMPLER_RULE_RATIO],
];

/** One trace whose conversation has not ended yet. */
interface PendingTrace {
  readonly traceId: string;
  /** `performance.now()` when its first conversation started. */
  readonly since: number;
  /** Ended spans, in the order they ended. */
  readonly spans: SampledSpan[];
  /** Its conversation spans still running (a trace can hold several, nested or side by side). */
  readonly open: StartedSpan[];
  /** The first keep rule of its ended conversations. */
  keepRule: string | undefined;
  /** Spans lost to the bounds. */
  lost: number;
}

/** A trace kept while conversations of it were still running (early, or before one started). */
interface PinnedTrace {
  readonly traceId: string;
  /** Its kept conversation spans still running. */
  open: number;
}

function isConversation(span: SampledSpan): boolean {
  return (
    span.name.startsWith(SPAN_CONVERSATION_PREFIX) &&
    span.attributes[ATTR_GEN_AI_OPERATION_NAME] === GEN_AI_OPERATION_INVOKE_WORKFLOW
  );
}

function optionalNumber(
  option: string,
  value: number | undefined,
  check: (option: string, value: unknown) => number,
): number | undefined {
  return value === undefined ? undefined : check(option, value);
}

/** The sampler: register it as the tracer provider's span processor, in place of `next`. */
export class ConversationSampler implements SpanProcessorLike {
  readonly #next: SpanProcessorLike;
  readonly #inRatio: (traceId: string) => boolean;
  readonly #keepReason: (reason: string) => boolean;
  readonly #slowMs: number | undefined;
  readonly #longDispatches: number | undefined;
  readonly #maxSpansPerTrace: number;
  readonly #maxBufferedSpans: number;
  readonly #maxDecisionDelayMs: number;
  readonly #maxDecisions: number;
  readonly #metrics: SamplerMetrics | undefined;
  readonly #reportNextFailure: (error: unknown) => void;
  /** Undecided traces, oldest first (a Map keeps insertion order). */
  readonly #pending = new Map<string, PendingTrace>();
  /** Decided traces (true: kept), oldest first, at most `maxDecisions`. */
  readonly #decisions = new Map<string, boolean>();
  /**
   * Kept traces with a conversation still running, oldest first, at most `maxDecisions`: out of
   * `#decisions`, so that no other trace's decision can evict them before their conversation ends.
   */
  readonly #pinned = new Map<string, PinnedTrace>();
  /**
   * Each running conversation span of a kept trace, to its pin. Weak: it holds nothing the span
   * does not, so a conversation that never ends costs the sampler nothing here; and its span
   * follows the keep when it ends even if its trace was unpinned and forgotten meanwhile.
   */
  readonly #keptRunning = new WeakMap<SampledSpan, PinnedTrace>();
  #buffered = 0;
  #closed = false;
  readonly #timer: ReturnType<typeof setInterval>;

  constructor(options: ConversationSamplerOptions) {
    optionsObject(options);
    withMethods(
      'next',
      options.next,
      ['onStart', 'onEnd', 'forceFlush', 'shutdown'],
      'a span processor (onStart, onEnd, forceFlush, shutdown)',
    );
    this.#next = options.next;
    const ratio = options.ratio ?? 0.1;
    if (typeof ratio !== 'number' || !(ratio >= 0 && ratio <= 1)) {
      fail('ratio', 'a number from 0 to 1', ratio);
    }
    this.#inRatio = traceIdRatio(ratio);
    const keepReasons = options.keepReasons;
    if (keepReasons === undefined) {
      this.#keepReason = (reason) => !UNREMARKABLE_REASONS.has(reason);
    } else {
      if (!Array.isArray(keepReasons) || keepReasons.some((r) => typeof r !== 'string')) {
        fail('keepReasons', 'an array of reason names', keepReasons);
      }
      const set = new Set(keepReasons);
      this.#keepReason = (reason) => set.has(reason);
    }
    this.#slowMs = optionalNumber('slowMs', options.slowMs, nonNegativeNumber);
    this.#longDispatches = optionalNumber(
      'longDispatches',
      options.longDispatches,
      nonNegativeNumber,
    );
    this.#maxSpansPerTrace = positiveInteger('maxSpansPerTrace', options.maxSpansPerTrace ?? 1000);
    this.#maxBufferedSpans = positiveInteger(
      'maxBufferedSpans',
      options.maxBufferedSpans ?? 20_000,
    );
    this.#maxDecisionDelayMs = positiveNumber(
      'maxDecisionDelayMs',
      options.maxDecisionDelayMs ?? 300_000,
    );
    this.#maxDecisions = positiveInteger('maxDecisions', options.maxDecisions ?? 10_000);
    const registry = options.registry === undefined ? undefined : asRegistry(options.registry);
    this.#reportNextFailure = rateLimited(
      options.logger ?? diag,
      'conversation-orchestrator: the sampler’s next span processor threw; the span is lost',
    );
    if (registry !== undefined) {
      this.#metrics = samplerMetricsFor(registry, DECISIONS);
      const self = this;
      this.#metrics.watch({
        get bufferedSpans() {
          return self.#buffered;
        },
        get pendingTraces() {
          return self.#pending.size;
        },
      });
    } else {
      this.#metrics = undefined;
    }
    // A conversation that never ends is decided even when nothing else happens; the timer never
    // holds the process open.
    this.#timer = setInterval(
      () => this.#decideOld(performance.now()),
      Math.min(1000, this.#maxDecisionDelayMs),
    );
    this.#timer.unref?.();
  }

  /** Spans buffered now (waiting for their conversation's decision). */
  get bufferedSpans(): number {
    return this.#buffered;
  }

  /** Traces waiting for their conversation's decision now. */
  get pendingTraces(): number {
    return this.#pending.size;
  }

  /**
   * Whether the trace was decided and kept (remembered while a conversation of it runs, and for
   * the last `maxDecisions` traces decided).
   */
  kept(traceId: string): boolean {
    return this.#decisions.get(traceId) === true || this.#pinned.has(traceId);
  }

  /** The SDK's span-start hook: passed on to `next`; a conversation span opens its trace's buffer. */
  onStart(span: StartedSpan, parentContext: Context): void {
    try {
      this.#next.onStart(span, parentContext);
    } catch (error) {
      this.#reportNextFailure(error);
    }
    if (this.#closed || !isConversation(span)) return;
    const traceId = span.spanContext().traceId;
    // The telemetry asks at each checkpoint whether this trace was kept (durable conversations).
    sampledBy(span, this);
    let pending = this.#pending.get(traceId);
    if (span.attributes[ATTR_CONVERSATION_SAMPLER_RULE] === SAMPLER_RULE_SEGMENT) {
      // A later segment of a conversation whose earlier segment was kept (in any process): kept.
      if (pending !== undefined) {
        pending.open.push(span);
        this.#decideEarly(pending, SAMPLER_RULE_SEGMENT);
        return;
      }
      if (!this.kept(traceId)) {
        this.#decisions.delete(traceId);
        this.#remember(traceId, true, SAMPLER_RULE_SEGMENT);
      }
      this.#pin(traceId, span);
      return;
    }
    if (pending === undefined) {
      // A trace kept already (decided early, or by an earlier conversation) stays kept, and
      // stays decided while this conversation runs.
      if (this.kept(traceId)) {
        this.#pin(traceId, span);
        return;
      }
      // A new conversation in a dropped trace is decided afresh (its earlier spans are gone).
      this.#decisions.delete(traceId);
      const now = performance.now();
      this.#decideOld(now);
      pending = {
        traceId,
        since: now,
        spans: [],
        open: [],
        keepRule: undefined,
        lost: 0,
      };
      this.#pending.set(traceId, pending);
    }
    pending.open.push(span);
  }

  /** The rule that keeps a kept conversation goes on its span while it can still be written. */
  onEnding(span: StartedSpan): void {
    if (this.#next.onEnding !== undefined) {
      try {
        this.#next.onEnding(span);
      } catch (error) {
        this.#reportNextFailure(error);
      }
    }
    if (this.#closed || !isConversation(span)) return;
    if (this.#keptRunning.has(span)) return;
    const traceId = span.spanContext().traceId;
    if (!this.#pending.has(traceId) && this.#decisions.get(traceId) === true) return;
    const rule = this.#keepRule(span) ?? (this.#inRatio(traceId) ? SAMPLER_RULE_RATIO : undefined);
    if (rule !== undefined) span.setAttribute(ATTR_CONVERSATION_SAMPLER_RULE, rule);
  }

  /**
   * The SDK's span-end hook: a span of an undecided trace is buffered, the conversation span's
   * end decides its trace, and a decided trace's spans go to `next` (kept) or nowhere (dropped).
   */
  onEnd(span: SampledSpan): void {
    if (this.#closed) {
      this.#forward(span);
      return;
    }
    const traceId = span.spanContext().traceId;
    const pending = this.#pending.get(traceId);
    if (pending !== undefined) {
      if (!isConversation(span)) this.#buffer(pending, span);
      else {
        // A conversation kept while it ran follows its keep, whatever its trace became since.
        const pin = this.#keptRunning.get(span);
        if (pin === undefined) this.#conversationEnded(pending, span);
        else this.#keptEnded(span, pin);
      }
      return;
    }
    // A conversation kept while it ran follows its keep, even past the bounds (never decided again).
    const pin = this.#keptRunning.get(span);
    if (pin !== undefined) {
      this.#keptEnded(span, pin);
      return;
    }
    const decision = this.#decisions.get(traceId);
    if (decision === true) this.#forward(span);
    else if (decision === undefined) {
      if (this.#pinned.has(traceId)) this.#forward(span);
      else if (isConversation(span)) {
        // A conversation that started before the sampler saw it: decided on its own.
        const rule = this.#keepRule(span);
        const keep = rule !== undefined || this.#inRatio(traceId);
        this.#remember(traceId, keep, rule ?? SAMPLER_RULE_RATIO);
        if (keep) this.#forward(span);
      } else this.#forward(span);
    }
  }

  /** Decides every buffered trace (kept: it was still running) and flushes `next`. */
  async forceFlush(): Promise<void> {
    this.#decideAll(SAMPLER_RULE_FORCE_FLUSH);
    await this.#next.forceFlush();
  }

  /** Decides every buffered trace (kept), then shuts `next` down. */
  async shutdown(): Promise<void> {
    if (this.#closed) return;
    this.#decideAll(SAMPLER_RULE_SHUTDOWN);
    this.#closed = true;
    // Closed, every span passes through: the pins have nothing left to hold.
    this.#pinned.clear();
    clearInterval(this.#timer);
    await this.#next.shutdown();
  }

  /** The rule keeping this ended conversation, or undefined when the ratio decides. */
  #keepRule(span: SampledSpan): string | undefined {
    const attributes = span.attributes;
    const reason = attributes[ATTR_CONVERSATION_END_REASON];
    if (
      span.status.code === SpanStatusCode.ERROR ||
      (typeof reason === 'string' && FAILED_REASONS.has(reason))
    ) {
      return SAMPLER_RULE_FAILED;
    }
    if (typeof reason !== 'string') return SAMPLER_RULE_UNCLASSIFIED;
    // A segment that ended without ending its conversation (suspended, or handed off), as the
    // telemetry wrote what the core decided: no ending yet to judge, the other rules decide.
    // A `cancel()`'s aborted segment ends the conversation: the reason rule applies.
    const ended = attributes[ATTR_CONVERSATION_ENDED] !== false;
    if (ended && this.#keepReason(reason)) return SAMPLER_RULE_REASON;
    const elapsed = attributes[ATTR_CONVERSATION_ELAPSED_MS];
    if (this.#slowMs !== undefined && typeof elapsed === 'number' && elapsed > this.#slowMs) {
      return SAMPLER_RULE_SLOW;
    }
    const dispatches = attributes[ATTR_CONVERSATION_DISPATCH_COUNT];
    if (
      this.#longDispatches !== undefined &&
      typeof dispatches === 'number' &&
      dispatches > this.#longDispatches
    ) {
      return SAMPLER_RULE_LONG;
    }
    return undefined;
  }

  #conversationEnded(pending: PendingTrace, span: SampledSpan): void {
    const open = pending.open;
    const at = open.indexOf(span as StartedSpan);
    if (at >= 0) open.splice(at, 1);
    pending.keepRule ??= this.#keepRule(span);
    if (open.length > 0) {
      // A conversation that ends while others of its trace run (one nested in an outer
      // conversation's responder, or beside it) waits like any span, within the bounds: an outer
      // conversation running 50,000 inner ones must not buffer 50,000 spans past them.
      this.#buffer(pending, span);
      return;
    }
    // The last conversation of the trace decides it now: never lost to the bounds.
    pending.spans.push(span);
    this.#buffered++;
    const rule = pending.keepRule;
    if (rule !== undefined) this.#decide(pending, true, rule);
    else this.#decide(pending, this.#inRatio(pending.traceId), SAMPLER_RULE_RATIO);
  }

  #buffer(pending: PendingTrace, span: SampledSpan): void {
    let limit: string | undefined;
    if (pending.spans.length >= this.#maxSpansPerTrace) limit = SAMPLER_LIMIT_TRACE;
    else if (this.#buffered >= this.#maxBufferedSpans) limit = SAMPLER_LIMIT_TOTAL;
    if (limit === undefined) {
      pending.spans.push(span);
      this.#buffered++;
      return;
    }
    pending.lost++;
    this.#metrics?.lost(limit);
    // Said on the conversation span, still running: a kept trace shows what it is missing.
    for (const conversation of pending.open) {
      conversation.setAttribute(ATTR_CONVERSATION_SAMPLER_SPANS_LOST, pending.lost);
    }
  }

  #decide(pending: PendingTrace, keep: boolean, rule: string): void {
    this.#pending.delete(pending.traceId);
    this.#remember(pending.traceId, keep, rule);
    this.#buffered -= pending.spans.length;
    if (keep) for (const span of pending.spans) this.#forward(span);
  }

  /**
   * Keeps a trace before its conversation ends: said on its running conversation spans, and the
   * trace pinned until they end (counted once, here).
   */
  #decideEarly(pending: PendingTrace, rule: string): void {
    for (const conversation of pending.open) {
      conversation.setAttribute(ATTR_CONVERSATION_SAMPLER_RULE, rule);
    }
    this.#decide(pending, true, rule);
    for (const conversation of pending.open) this.#pin(pending.traceId, conversation);
  }

  /** Holds a kept trace's decision while this conversation span of it runs. */
  #pin(traceId: string, span: StartedSpan): void {
    let pin = this.#pinned.get(traceId);
    if (pin === undefined) {
      // Out of the evictable cache while pinned; back in it (as the newest) once unpinned.
      this.#decisions.delete(traceId);
      pin = { traceId, open: 0 };
      this.#pinned.set(traceId, pin);
      if (this.#pinned.size > this.#maxDecisions) {
        // More kept conversations running than decisions remembered: the oldest pin goes back to
        // the cache. Its conversation spans still follow the keep (#keptRunning).
        const oldest = this.#pinned.values().next().value;
        if (oldest !== undefined) this.#unpin(oldest);
      }
    }
    pin.open++;
    this.#keptRunning.set(span, pin);
  }

  /** A kept conversation span ended: exported, never decided again; its trace unpinned when last. */
  #keptEnded(span: SampledSpan, pin: PinnedTrace): void {
    this.#keptRunning.delete(span);
    this.#forward(span);
    if (--pin.open === 0 && this.#pinned.get(pin.traceId) === pin) this.#unpin(pin);
  }

  #unpin(pin: PinnedTrace): void {
    this.#pinned.delete(pin.traceId);
    this.#store(pin.traceId, true);
  }

  #decideOld(now: number): void {
    for (const pending of this.#pending.values()) {
      // Oldest first: the first one young enough ends the walk.
      if (now - pending.since < this.#maxDecisionDelayMs) return;
      this.#decideEarly(pending, SAMPLER_RULE_MAX_AGE);
    }
  }

  #decideAll(rule: string): void {
    for (const pending of [...this.#pending.values()]) this.#decideEarly(pending, rule);
  }

  #remember(traceId: string, keep: boolean, rule: string): void {
    this.#metrics?.decided(keep ? SAMPLER_DECISION_KEEP : SAMPLER_DECISION_DROP, rule);
    this.#store(traceId, keep);
  }

  /** Puts a decision in the cache as its newest, forgetting the oldest past `maxDecisions`. */
  #store(traceId: string, keep: boolean): void {
    const decisions = this.#decisions;
    decisions.delete(traceId);
    decisions.set(traceId, keep);
    if (decisions.size > this.#maxDecisions) {
      const oldest = decisions.keys().next().value;
      if (oldest !== undefined) decisions.delete(oldest);
    }
  }

  #forward(span: SampledSpan): void {
    try {
      this.#next.onEnd(span);
    } catch (error) {
      this.#reportNextFailure(error);
    }
  }
}

/**
 * Creates the sampler around the processor that exports:
 * `spanProcessors: [createConversationSampler({ next: new BatchSpanProcessor(exporter), registry })]`.
 */
export function createConversationSampler(
  options: ConversationSamplerOptions,
): ConversationSampler {
  return new ConversationSampler(options);
}
