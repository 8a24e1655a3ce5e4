/**
 * What a page that opens mid-run needs to draw the run as it is: the recent spreads of every
 * conversation in flight (a bounded tail each) and the endings counted since the service
 * started. Sent once per connection, right after the hello, as one bounded `history` message.
 */
import { isSpanContextValid, type SpanContext } from '@opentelemetry/api';
import { type ConversationTail, compactSpread, type HistoryMessage } from './updates.ts';

export type { ConversationTail, HistoryMessage };

export interface HistoryOptions {
  /** Spreads kept per conversation in flight (the newest); older ones are forgotten. */
  readonly tailPoints: number;
  /** Largest `history` message, in bytes of JSON; conversations past it are left out (counted). */
  readonly maxBytes: number;
}

interface Tail {
  readonly orchestrator: string;
  from: number;
  readonly spreads: number[];
  traceId: string | undefined;
  resumed: boolean;
}

/** Most distinct reasons counted per orchestrator (the rest are counted as `other`). */
const MAX_REASONS = 32;

export class ConversationHistory {
  readonly #options: HistoryOptions;
  readonly #inFlight = new Map<string, Tail>();
  readonly #totals = new Map<string, Map<string, number>>();
  #since = new Date().toISOString();
  #resumedEnded = 0;

  constructor(options: HistoryOptions) {
    this.#options = options;
  }

  /**
   * Starts the totals from the endings an earlier run left in the store (before any ending of
   * this process), `since` the oldest of them.
   */
  seed(totals: ReadonlyMap<string, ReadonlyMap<string, number>>, since: number | undefined): void {
    for (const [orchestrator, byReason] of totals) {
      for (const [reason, n] of byReason) this.#count(orchestrator, reason, n);
    }
    if (since !== undefined) this.#since = new Date(since).toISOString();
  }

  /** A conversation stopped without ending (it stays in the store): no longer in flight. */
  left(conversationId: string): void {
    this.#inFlight.delete(conversationId);
  }

  /** After every dispatch (from the listener, inside the conversation's trace context). */
  dispatched(
    orchestrator: string,
    conversationId: string,
    dispatchCount: number,
    spread: number,
    spanContext: SpanContext | undefined,
    resumed = false,
  ): void {
    let tail = this.#inFlight.get(conversationId);
    if (tail === undefined) {
      tail = {
        orchestrator,
        from: dispatchCount,
        spreads: [],
        traceId: traceIdOf(spanContext),
        resumed,
      };
      this.#inFlight.set(conversationId, tail);
    }
    const { spreads } = tail;
    if (spreads.length === this.#options.tailPoints) {
      spreads.copyWithin(0, 1);
      spreads[spreads.length - 1] = spread;
      tail.from++;
    } else spreads.push(spread);
  }

  /** Once per conversation; returns the trace id seen for it (when tracing kept it). */
  ended(
    orchestrator: string,
    conversationId: string,
    reason: string,
    resumed = false,
  ): string | undefined {
    const traceId = this.#inFlight.get(conversationId)?.traceId;
    this.#inFlight.delete(conversationId);
    if (resumed) this.#resumedEnded++;
    this.#count(orchestrator, reason, 1);
    return traceId;
  }

  #count(orchestrator: string, reason: string, n: number): void {
    let byReason = this.#totals.get(orchestrator);
    if (byReason === undefined) {
      byReason = new Map();
      this.#totals.set(orchestrator, byReason);
    }
    const key = byReason.has(reason) || byReason.size < MAX_REASONS ? reason : 'other';
    byReason.set(key, (byReason.get(key) ?? 0) + n);
  }

  /** The history message for a client subscribed to `filter` (undefined: every orchestrator). */
  snapshot(filter: string | undefined): HistoryMessage {
    const conversations: ConversationTail[] = [];
    let bytes = 0;
    let omitted = 0;
    for (const [conversationId, tail] of this.#inFlight) {
      if (filter !== undefined && tail.orchestrator !== filter) continue;
      const entry: ConversationTail = {
        orchestrator: tail.orchestrator,
        conversationId,
        fromDispatch: tail.from,
        // Four significant digits draw the same on a log scale and take half the bytes.
        spreads: tail.spreads.map(compactSpread),
        ...(tail.resumed ? { resumed: true as const } : {}),
      };
      const size = JSON.stringify(entry).length + 1;
      if (bytes + size > this.#options.maxBytes) {
        omitted++;
        continue;
      }
      bytes += size;
      conversations.push(entry);
    }
    const totals: Record<string, Record<string, number>> = {};
    for (const [orchestrator, byReason] of this.#totals) {
      if (filter !== undefined && orchestrator !== filter) continue;
      totals[orchestrator] = Object.fromEntries(byReason);
    }
    return {
      type: 'history',
      conversations,
      omitted,
      totals,
      since: this.#since,
      resumedEnded: this.#resumedEnded,
    };
  }
}

/** The trace id of a sampled span context (an unsampled trace is never exported: no link). */
function traceIdOf(spanContext: SpanContext | undefined): string | undefined {
  if (spanContext === undefined || !isSpanContextValid(spanContext)) return undefined;
  return (spanContext.traceFlags & 1) === 1 ? spanContext.traceId : undefined;
}
