/**
 * The observability plugin: one OpenTelemetry span per conversation with one event per dispatch,
 * optional child spans per responder invocation, and Prometheus metrics. It is a
 * `ConversationObserver` (the lifecycle SPI), so the core stays ignorant of OpenTelemetry.
 *
 * The hot path (`onDispatch`) writes numbers into per-conversation arrays and per-responder
 * counters; spans events are written when the conversation ends, with their original timestamps,
 * and counters reach prom-client at scrape time. That keeps a fast agent's dispatch cheap.
 */
import { diag, type MeterProvider, metrics, trace } from '@opentelemetry/api';
import { boundedName, fail, positiveInteger } from '../core/shared/validate.ts';
import type {
  ConversationObservation,
  ConversationObserver,
  ConversationStart,
} from '../core/spi/observer.ts';
import type { ConversationListener } from '../core/spi/types.ts';
import { StoragePool } from './dispatch-events.ts';
import { failureReports } from './guard.ts';
import { telemetryListener } from './listener.ts';
import {
  DEFAULT_CONVERSATION_DISPATCH_BUCKETS,
  DEFAULT_CONVERSATION_DURATION_BUCKETS,
  DEFAULT_CONVERSATION_TOKEN_BUCKETS,
  DEFAULT_DISPATCH_DURATION_BUCKETS,
} from './metric-buckets.ts';
import { metricsOf } from './metric-sets.ts';
import { ObservedConversation } from './observed-conversation.ts';
import { asRegistry, speaksOpenMetrics } from './registry.ts';
import {
  DEFAULT_PROVIDER_NAME,
  ENV_CAPTURE_CONTENT,
  TELEMETRY_OBSERVER_KEY,
  TRACER_NAME,
  TRACER_VERSION,
} from './semconv.ts';
import { optionsObject, withMethods } from './shape.ts';
import type { TelemetryOptions } from './types.ts';
import { bucketList, type Settings } from './utils.ts';

/** The plugin. Hand it to the orchestrator: `observers: [telemetry]`. */
export class ConversationTelemetry<S = unknown, C = unknown> implements ConversationObserver<S, C> {
  readonly #settings: Settings<S, C>;
  /**
   * Where a durable conversation's checkpoints keep the telemetry's data (`'telemetry'`): the
   * trace context, so every segment of the conversation is a span of its one trace (see
   * docs/telemetry.md, "One trace per conversation").
   */
  readonly key: string = TELEMETRY_OBSERVER_KEY;

  constructor(options: TelemetryOptions<S, C> = {}) {
    optionsObject(options);
    const registry = options.registry === undefined ? undefined : asRegistry(options.registry);
    if (options.stateAttributes !== undefined && typeof options.stateAttributes !== 'function') {
      fail('stateAttributes', 'a function', options.stateAttributes);
    }
    const openMetrics = registry !== undefined && speaksOpenMetrics(registry);
    const exemplars = options.exemplars ?? openMetrics;
    if (exemplars && registry !== undefined && !openMetrics) {
      fail(
        'exemplars',
        'used with an OpenMetrics registry (registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE))',
        exemplars,
      );
    }
    const maxReasons = positiveInteger('maxReasons', options.maxReasons ?? 20);
    const maxOrchestrators = positiveInteger('maxOrchestrators', options.maxOrchestrators ?? 200);
    const maxResponders = positiveInteger('maxResponders', options.maxResponders ?? 100);
    const maxModels = positiveInteger('maxModels', options.maxModels ?? 50);
    const defaultProviderName =
      options.defaultProviderName === undefined
        ? DEFAULT_PROVIDER_NAME
        : boundedName('defaultProviderName', options.defaultProviderName);
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
      conversationTokens: bucketList(
        'conversationTokenBuckets',
        options.conversationTokenBuckets,
        DEFAULT_CONVERSATION_TOKEN_BUCKETS,
      ),
    };
    const logger = options.logger ?? diag;
    const meterProvider = meterProviderOf(options.meterProvider);
    if (options.genAiMetrics !== undefined && typeof options.genAiMetrics !== 'boolean') {
      fail('genAiMetrics', 'a boolean', options.genAiMetrics);
    }
    const genAi = options.genAiMetrics ?? true;
    this.#settings = {
      tracer:
        options.tracer ??
        (options.tracerProvider ?? trace.getTracerProvider()).getTracer(
          TRACER_NAME,
          TRACER_VERSION,
        ),
      metrics:
        registry === undefined && meterProvider === undefined
          ? undefined
          : metricsOf(
              { registry, meterProvider, genAi },
              { buckets, exemplars, maxReasons, maxOrchestrators, maxResponders, maxModels },
              logger,
            ),
      stateAttributes: options.stateAttributes,
      captureContent:
        options.captureContent ?? process.env[ENV_CAPTURE_CONTENT]?.toLowerCase() === 'true',
      maxContentLength: positiveInteger('maxContentLength', options.maxContentLength ?? 1024),
      maxDispatchEvents: positiveInteger('maxDispatchEvents', options.maxDispatchEvents ?? 128),
      responderSpans: options.responderSpans ?? false,
      defaultProviderName,
      exemplars,
      logger,
      eventStorage: new StoragePool(),
      reports: failureReports(logger),
    };
  }

  /** The observer SPI's entry: one observation (a span and its records) per conversation. */
  startConversation(start: ConversationStart<C>): ConversationObservation<S, C> {
    return new ObservedConversation<S, C>(this.#settings, start);
  }

  /**
   * A listener of orchestrator `orchestrator` failed after its conversation ended: counted in
   * `orchestrator_listener_errors_total` like one that failed while it ran.
   */
  onLateListenerError(_error: unknown, orchestrator: string): void {
    const metrics = this.#settings.metrics;
    if (metrics !== undefined) metrics.listenerFailed(metrics.orchestrator(orchestrator));
  }

  /**
   * The plugin as a plain `ConversationListener` (the seed's SPI), for an orchestrator built
   * without `observers`. `name` is the orchestrator label (validated like an orchestrator's
   * name). It counts dispatches (the responder label is the sender of the state's last message),
   * adds dispatch events to the span active around `run()` (first and last kept, as the observer
   * does) and records the conversation metrics at the terminating decision. It cannot see
   * failures, aborts, the queue running dry or responder timings: use `observers: [telemetry]`.
   */
  listener(name: string): ConversationListener<S, C> {
    return telemetryListener(this.#settings, name);
  }

  /**
   * Lets go of every metric series of orchestrator `name` on this telemetry's registry (shared by
   * every telemetry on it), for a multi-tenant application whose tenant left: the series leave
   * the next scrape, and the name's place under `maxOrchestrators` is free again. A later
   * conversation of that name starts its series from zero. Release a tenant once its
   * conversations are over: one still running is counted into the released series, which no
   * scrape reads.
   * @returns whether the registry held series of that name
   * @example telemetry.releaseOrchestrator(`tenant-${tenant.id}`)
   */
  releaseOrchestrator(name: string): boolean {
    return this.#settings.metrics?.release(name) ?? false;
  }
}

/** The `meterProvider` option: a provider (by its shape), the global one, or none. */
function meterProviderOf(option: TelemetryOptions['meterProvider']): MeterProvider | undefined {
  if (option === undefined) return undefined;
  if (option === 'global') return metrics.getMeterProvider();
  withMethods(
    'meterProvider',
    option,
    ['getMeter'],
    "a MeterProvider (an object with getMeter()) or 'global'",
  );
  return option;
}

/**
 * Creates the plugin. One line attaches it: `observers: [createConversationTelemetry({ registry })]`.
 * Give the state (and content) type as type arguments, `createConversationTelemetry<Quotes>()`,
 * so `stateAttributes` receives a typed state.
 */
export function createConversationTelemetry<S = unknown, C = unknown>(
  options: TelemetryOptions<S, C> = {},
): ConversationTelemetry<S, C> {
  return new ConversationTelemetry<S, C>(options);
}
