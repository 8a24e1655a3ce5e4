/**
 * What a page that opens mid-run needs to draw the run as it is: the recent spreads of every
 * conversation in flight (a bounded tail each) and the endings counted since the service
 * started. Sent once per connection, right after the hello, as one bounded `history` message.
 */
import { isSpanContextValid, type SpanContext } from '@opentelemetry/api';

export interface HistoryOptions {
  /** Spreads kept per conversation in flight (the newest); older ones are forgotten. */
  readonly tailPoints: number;
  /** Largest `history` message, in bytes of JSON; conversations past it are left out (counted). */
  readonly maxBytes: number;
}

/** One conversation in flight, as the history message carries it. */
export interface ConversationTail {
  readonly orchestrator: string;
  readonly conversationId: string;
  /** The dispatch count of `spreads[0]`; the rest follow one dispatch each. */
  readonly fromDispatch: number;
  readonly spreads: readonly number[];
}

/** The `history` message. */
export interface HistoryMessage {
  readonly type: 'history';
  /** In flight when the client connected, oldest first, as many as fit in the byte bound. */
  readonly conversations: readonly ConversationTail[];
  /** Conversations in flight that did not fit. */
  readonly omitted: number;
  /** Endings since the service started, by orchestrator, then reason. */
  readonly totals: Readonly<Record<string, Readonly<Record<string, number>>>>;
  /** When the service started (ISO 8601), for "since the service started". */
  readonly since: string;
}

interface Tail {
  readonly orchestrator: string;
  from: number;
  readonly spreads: number[];
  traceId: string | undefined;
}

/** Most distinct reasons counted per orchestrator (the rest are counted as `other`). */
const MAX_REASONS = 32;

export class ConversationHistory {
  readonly #options: HistoryOptions;
  readonly #inFlight = new Map<string, Tail>();
  readonly #totals = new Map<string, Map<string, number>>();
  readonly #since = new Date().toISOString();

  constructor(options: HistoryOptions) {
    this.#options = options;
  }

  /** After every dispatch (from the listener, inside the conversation's trace context). */
  dispatched(
    orchestrator: string,
    conversationId: string,
    dispatchCount: number,
    spread: number,
    spanContext: SpanContext | undefined,
  ): void {
    let tail = this.#inFlight.get(conversationId);
    if (tail === undefined) {
      tail = {
        orchestrator,
        from: dispatchCount,
        spreads: [],
        traceId: traceIdOf(spanContext),
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
  ended(orchestrator: string, conversationId: string, reason: string): string | undefined {
    const traceId = this.#inFlight.get(conversationId)?.traceId;
    this.#inFlight.delete(conversationId);
    let byReason = this.#totals.get(orchestrator);
    if (byReason === undefined) {
      byReason = new Map();
      this.#totals.set(orchestrator, byReason);
    }
    const key = byReason.has(reason) || byReason.size < MAX_REASONS ? reason : 'other';
    byReason.set(key, (byReason.get(key) ?? 0) + 1);
    return traceId;
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
        spreads: tail.spreads.map((s) => Number(s.toPrecision(4))),
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
    return { type: 'history', conversations, omitted, totals, since: this.#since };
  }
}

/** The trace id of a sampled span context (an unsampled trace is never exported: no link). */
function traceIdOf(spanContext: SpanContext | undefined): string | undefined {
  if (spanContext === undefined || !isSpanContextValid(spanContext)) return undefined;
  return (spanContext.traceFlags & 1) === 1 ? spanContext.traceId : undefined;
}
