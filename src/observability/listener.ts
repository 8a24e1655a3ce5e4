/**
 * The plugin as a plain `ConversationListener` (the seed's SPI). It sees dispatches only: no
 * start, no failure, no abort, no queue running dry. Dispatch events go on the span active around
 * `run()`, with the observer path's keeping: the first half of `maxDispatchEvents` is written as
 * it happens, the last half is kept in a ring and written at the terminating decision, and
 * `conversation.dispatch_events.dropped` always says how many are not on the span, so kept +
 * dropped = the dispatches even when the listener never learns how the conversation ended.
 */

import { type Attributes, type Span, trace } from '@opentelemetry/api';
import { NAME_PATTERN } from '../core/shared/names.ts';
import { boundedName } from '../core/shared/validate.ts';
import type { ConversationListener } from '../core/spi/types.ts';
import { addExplanation, stateAttributeRoom } from './guard.ts';
import { countDispatch, type DispatchRecord } from './metric-records.ts';
import {
  ATTR_CONVERSATION_EVENTS_DROPPED,
  ATTR_DECISION_LIMIT,
  ATTR_DECISION_OBSERVED,
  ATTR_DECISION_REASON,
  ATTR_DECISION_TERMINATE,
  ATTR_DISPATCH_COUNT,
  ATTR_DISPATCH_ELAPSED_MS,
  ATTR_GEN_AI_AGENT_NAME,
  EVENT_DISPATCH,
  OVERFLOW_LABEL_VALUE,
} from './semconv.ts';
import { type Settings, safeAttributes } from './utils.ts';

/** Distinct senders counted under their own responder label; past it they share the overflow value. */
const MAX_SENDERS = 64;

/**
 * Senders reach the listener unvalidated: only one that follows the responder name rule (the
 * core's, 1-64 characters) may become a label value; any other shares the overflow value, so a
 * 9 MB sender costs one series, not a 9 MB label on every bucket line.
 */
const LABELLABLE_SENDER = NAME_PATTERN;

/** At most this many characters of a sender go on a dispatch event's `gen_ai.agent.name`. */
const MAX_SENDER_ATTRIBUTE = 128;

/** The dispatch events of one span, as the listener keeps them. */
class SpanEvents {
  readonly #head: number;
  readonly #tail: number;
  /** Dispatches seen on the span. */
  #total = 0;
  /** The latest dispatches past the head: attributes and times, a ring of `tail` slots. */
  readonly #ring: { attributes: Attributes; timeMs: number }[] = [];
  #next = 0;

  constructor(capacity: number) {
    this.#head = Math.ceil(capacity / 2);
    this.#tail = capacity - this.#head;
  }

  add(span: Span, attributes: Attributes, timeMs: number): void {
    const n = this.#total++;
    if (n < this.#head) {
      span.addEvent(EVENT_DISPATCH, attributes, timeMs);
      if (n === 0) span.setAttribute(ATTR_CONVERSATION_EVENTS_DROPPED, 0);
      return;
    }
    if (this.#tail > 0) {
      this.#ring[this.#next] = { attributes, timeMs };
      this.#next = (this.#next + 1) % this.#tail;
    }
    // Until the end is seen, none of the tail is on the span.
    span.setAttribute(ATTR_CONVERSATION_EVENTS_DROPPED, this.#total - this.#head);
  }

  /** The conversation ended: the kept tail goes on the span, oldest first. */
  flush(span: Span): void {
    const ring = this.#ring;
    const start = ring.length < this.#tail ? 0 : this.#next;
    for (let i = 0; i < ring.length; i++) {
      const e = ring[(start + i) % ring.length] as { attributes: Attributes; timeMs: number };
      span.addEvent(EVENT_DISPATCH, e.attributes, e.timeMs);
    }
    const written = Math.min(this.#total, this.#head) + ring.length;
    span.setAttribute(ATTR_CONVERSATION_EVENTS_DROPPED, this.#total - written);
    this.#total = 0;
    this.#ring.length = 0;
    this.#next = 0;
  }
}

export function telemetryListener<S, C>(
  settings: Settings<S, C>,
  orchestrator: string,
): ConversationListener<S, C> {
  boundedName('name', orchestrator);
  const metrics = settings.metrics;
  let orchestratorRecord = metrics?.orchestrator(orchestrator);
  let records = new Map<string, DispatchRecord>();
  const record = (responder: string): DispatchRecord | undefined => {
    if (metrics === undefined || orchestratorRecord === undefined) return undefined;
    if (orchestratorRecord.released) {
      // Released by telemetry.releaseOrchestrator(): a later dispatch starts the series again.
      orchestratorRecord = metrics.orchestrator(orchestrator);
      records = new Map();
    }
    // Senders are not validated names: an invalid one, or any past MAX_SENDERS distinct ones,
    // share the overflow label (and one map entry, so hostile senders cannot grow the map).
    const key =
      typeof responder === 'string' &&
      LABELLABLE_SENDER.test(responder) &&
      (records.has(responder) ||
        records.size - (records.has(OVERFLOW_LABEL_VALUE) ? 1 : 0) < MAX_SENDERS)
        ? responder
        : OVERFLOW_LABEL_VALUE;
    let r = records.get(key);
    if (r === undefined) {
      r = metrics.responder(orchestratorRecord, key);
      records.set(key, r);
    }
    return r;
  };
  // One entry per span the listener wrote to; a span's entry goes with the span.
  const spans = new WeakMap<Span, SpanEvents>();
  return (state, decision, dispatchCount, elapsedMs) => {
    const r = record(state.lastMessage.sender);
    if (r !== undefined) countDispatch(r);
    if (dispatchCount === 1 && orchestratorRecord !== undefined) orchestratorRecord.started.count++;
    const span = trace.getActiveSpan();
    if (span?.isRecording()) {
      let events = spans.get(span);
      if (events === undefined) {
        events = new SpanEvents(settings.maxDispatchEvents);
        spans.set(span, events);
      }
      const attributes: Attributes = {
        [ATTR_DISPATCH_COUNT]: dispatchCount,
        [ATTR_GEN_AI_AGENT_NAME]: senderAttribute(state.lastMessage.sender),
        [ATTR_DISPATCH_ELAPSED_MS]: elapsedMs,
        [ATTR_DECISION_TERMINATE]: decision.terminate,
        [ATTR_DECISION_REASON]: decision.reason,
      };
      addExplanation(attributes, decision, ATTR_DECISION_OBSERVED, ATTR_DECISION_LIMIT);
      events.add(
        span,
        { ...attributes, ...safeAttributes(settings, state, stateAttributeRoom(span)) },
        performance.timeOrigin + performance.now(),
      );
      if (decision.terminate) events.flush(span);
    }
    if (decision.terminate && metrics !== undefined && orchestratorRecord !== undefined) {
      // A listener sees no conversation start or failure: it keeps no in-progress count.
      metrics.countEnd(orchestratorRecord, decision.reason, elapsedMs / 1000, dispatchCount);
    }
  };
}

/** A sender as an attribute value: a string of bounded length, whatever the app put there. */
function senderAttribute(sender: unknown): string {
  const text = typeof sender === 'string' ? sender : String(typeof sender);
  return text.length > MAX_SENDER_ATTRIBUTE ? text.slice(0, MAX_SENDER_ATTRIBUTE) : text;
}
