/**
 * The observability plugin: one OpenTelemetry span per conversation with one event per dispatch,
 * optional child spans per responder invocation, and Prometheus metrics. It is a
 * `ConversationObserver` (the lifecycle SPI), so the core stays ignorant of OpenTelemetry.
 *
 * The hot path (`onDispatch`) writes numbers into per-conversation arrays and per-responder
 * counters; spans events are written when the conversation ends, with their original timestamps,
 * and counters reach prom-client at scrape time. That keeps a fast agent's dispatch cheap.
 */
import { diag, trace } from '@opentelemetry/api';
import { Registry } from 'prom-client';
import type {
  ConversationObservation,
  ConversationObserver,
  ConversationStart,
} from '../core/observer.ts';
import type { ConversationListener } from '../core/types.ts';
import { fail, positiveInteger } from '../core/validate.ts';
import {
  DEFAULT_CONVERSATION_DISPATCH_BUCKETS,
  DEFAULT_CONVERSATION_DURATION_BUCKETS,
  DEFAULT_DISPATCH_DURATION_BUCKETS,
  type DispatchRecord,
  metricsFor,
} from './metrics.ts';
import { ObservedConversation } from './observed-conversation.ts';
import {
  ATTR_DECISION_REASON,
  ATTR_DECISION_TERMINATE,
  ATTR_DISPATCH_COUNT,
  ATTR_DISPATCH_ELAPSED_MS,
  ATTR_GEN_AI_AGENT_NAME,
  ENV_CAPTURE_CONTENT,
  EVENT_DISPATCH,
  TRACER_NAME,
} from './semconv.ts';
import type { TelemetryOptions } from './types.ts';
import { bucketList, type Settings, safeAttributes } from './utils.ts';

/** The plugin. Hand it to the orchestrator: `observers: [telemetry]`. */
export class ConversationTelemetry<S = unknown, C = unknown> implements ConversationObserver<S, C> {
  readonly #settings: Settings<S, C>;

  constructor(options: TelemetryOptions<S, C> = {}) {
    if (typeof options !== 'object' || options === null) fail('options', 'an object', options);
    const registry = options.registry;
    if (registry !== undefined && !(registry instanceof Registry)) {
      fail('registry', 'a prom-client Registry', registry);
    }
    if (options.stateAttributes !== undefined && typeof options.stateAttributes !== 'function') {
      fail('stateAttributes', 'a function', options.stateAttributes);
    }
    const openMetrics =
      (registry?.contentType as string | undefined) === Registry.OPENMETRICS_CONTENT_TYPE;
    const exemplars = options.exemplars ?? openMetrics;
    if (exemplars && registry !== undefined && !openMetrics) {
      fail(
        'exemplars',
        'used with an OpenMetrics registry (registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE))',
        exemplars,
      );
    }
    const maxReasons = positiveInteger('maxReasons', options.maxReasons ?? 20);
    const buckets = {
      dispatchDuration: bucketList(
        'dispatchDurationBuckets',
        options.dispatchDurationBuckets,
        DEFAULT_DISPATCH_DURATION_BUCKETS,
      ),
      conversationDuration: bucketList(
        'conversationDurationBuckets',
        options.conversationDurationBuckets,
        DEFAULT_CONVERSATION_DURATION_BUCKETS,
      ),
      conversationDispatches: bucketList(
        'conversationDispatchBuckets',
        options.conversationDispatchBuckets,
        DEFAULT_CONVERSATION_DISPATCH_BUCKETS,
      ),
    };
    this.#settings = {
      tracer:
        options.tracer ??
        (options.tracerProvider ?? trace.getTracerProvider()).getTracer(TRACER_NAME),
      metrics:
        registry === undefined ? undefined : metricsFor(registry, buckets, exemplars, maxReasons),
      stateAttributes: options.stateAttributes,
      captureContent:
        options.captureContent ?? process.env[ENV_CAPTURE_CONTENT]?.toLowerCase() === 'true',
      maxContentLength: positiveInteger('maxContentLength', options.maxContentLength ?? 1024),
      maxDispatchEvents: positiveInteger('maxDispatchEvents', options.maxDispatchEvents ?? 128),
      responderSpans: options.responderSpans ?? false,
      exemplars,
      logger: options.logger ?? diag,
    };
  }

  startConversation(start: ConversationStart<C>): ConversationObservation<S, C> {
    return new ObservedConversation<S, C>(this.#settings, start);
  }

  /**
   * The plugin as a plain `ConversationListener` (the seed's SPI), for an orchestrator built
   * without `observers`. It counts dispatches (the responder label is the sender of the state's
   * last message), adds a dispatch event to the span active around `run()`, and records the
   * conversation metrics at the terminating decision. It cannot see failures, aborts or
   * responder timings: use `observers: [telemetry]` for those.
   */
  listener(orchestrator: string): ConversationListener<S, C> {
    const settings = this.#settings;
    const metrics = settings.metrics;
    const records = new Map<string, DispatchRecord>();
    const orchestratorRecord = metrics?.orchestrator(orchestrator);
    const record = (responder: string): DispatchRecord | undefined => {
      if (metrics === undefined || orchestratorRecord === undefined) return undefined;
      let r = records.get(responder);
      if (r === undefined) {
        // Senders are not validated names: past 64 of them, they share the label `other`.
        [r] = metrics.records(orchestratorRecord, [records.size < 64 ? responder : 'other']);
        records.set(responder, r as DispatchRecord);
      }
      return r;
    };
    return (state, decision, dispatchCount, elapsedMs) => {
      const r = record(state.lastMessage.sender);
      if (r !== undefined) r.count++;
      if (dispatchCount === 1 && orchestratorRecord !== undefined)
        orchestratorRecord.started.count++;
      const span = trace.getActiveSpan();
      if (span?.isRecording()) {
        span.addEvent(EVENT_DISPATCH, {
          [ATTR_DISPATCH_COUNT]: dispatchCount,
          [ATTR_GEN_AI_AGENT_NAME]: state.lastMessage.sender,
          [ATTR_DISPATCH_ELAPSED_MS]: elapsedMs,
          [ATTR_DECISION_TERMINATE]: decision.terminate,
          [ATTR_DECISION_REASON]: decision.reason,
          ...safeAttributes(settings, state),
        });
      }
      if (decision.terminate && metrics !== undefined && orchestratorRecord !== undefined) {
        // A listener sees no conversation start or failure: it keeps no in-progress count.
        metrics.countEnd(
          orchestratorRecord,
          decision.reason,
          elapsedMs / 1000,
          dispatchCount,
          undefined,
          Date.now() / 1000,
        );
      }
    };
  }
}

/** Creates the plugin. One line attaches it: `observers: [createConversationTelemetry({ registry })]`. */
export function createConversationTelemetry<S = unknown, C = unknown>(
  options: TelemetryOptions<S, C> = {},
): ConversationTelemetry<S, C> {
  return new ConversationTelemetry<S, C>(options);
}
