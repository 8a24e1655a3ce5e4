/**
 * The demo service's own health on /metrics, beside the plugin's conversation metrics: what an
 * operator needs to see when the live feed or the trace export is in trouble. The names are
 * public (README "Demo service metrics"); the plugin's `orchestrator_*` names stay the plugin's.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  Counter,
  collectDefaultMetrics,
  Gauge,
  type OpenMetricsContentType,
  Registry,
} from 'prom-client';

export const METRIC_WEBSOCKET_CLIENTS = 'demo_websocket_clients';
export const METRIC_WEBSOCKET_REFUSED = 'demo_websocket_refused_total';
export const METRIC_LIVE_UPDATES_DROPPED = 'demo_live_updates_dropped_total';
export const METRIC_SPAN_EXPORT_FAILURES = 'demo_span_export_failures_total';
export const METRIC_SPANS_DROPPED = 'demo_spans_dropped_total';
export const METRIC_EVENT_LOOP_DELAY = 'demo_event_loop_delay_max_seconds';
export const METRIC_HTTP_REFUSED = 'demo_http_refused_total';
/** The event loop delay is the longest in this window and the one before. */
const EVENT_LOOP_WINDOW_MS = 10_000;

/** prom-client's default metrics that are not exposed (see `createServiceRegistry`). */
const DEFAULT_METRICS_LEFT_OUT = [
  'nodejs_active_handles_total',
  'nodejs_active_requests_total',
  'nodejs_active_resources_total',
] as const;

/**
 * The registry /metrics exposes, in single-process and fleet mode alike: OpenMetrics (for
 * exemplars; set before any metric is created), with the process's own health beside the
 * conversations' (prom-client's default metrics: CPU, memory, heap, event loop lag, GC; its
 * global registry is never exposed), except three gauges named `_total`, which promtool's lint
 * refuses (a suffix for counters only): the same counts are there by type
 * (`nodejs_active_handles{type}`).
 */
export function createServiceRegistry(): Registry<OpenMetricsContentType> {
  const registry = new Registry() as unknown as Registry<OpenMetricsContentType>;
  registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  collectDefaultMetrics({ register: registry });
  for (const name of DEFAULT_METRICS_LEFT_OUT) registry.removeSingleMetric(name);
  return registry;
}

/** Why a WebSocket client was refused or cut off (a bounded label). */
export type RefusalReason =
  | 'over_capacity'
  | 'address_over_capacity'
  | 'cross_origin'
  | 'host_not_allowed'
  | 'bad_host'
  | 'bad_handshake'
  | 'bad_target'
  | 'bad_subscription'
  | 'client_sent_data'
  | 'no_pong'
  | 'ping_flood'
  | 'frame_flood'
  | 'slow_reader';

/** Why a plain HTTP request was refused before any route saw it (a bounded label). */
export type HttpRefusalReason = 'host_not_allowed' | 'bad_host';

export interface ServiceMetrics {
  readonly refused: Counter<'reason'>;
  readonly httpRefused: Counter<'reason'>;
  readonly dropped: Counter;
  readonly exportFailures: Counter;
  readonly spansDropped: Counter;
}

const REFUSAL_REASONS: readonly RefusalReason[] = [
  'over_capacity',
  'address_over_capacity',
  'cross_origin',
  'host_not_allowed',
  'bad_host',
  'bad_handshake',
  'bad_target',
  'bad_subscription',
  'client_sent_data',
  'no_pong',
  'ping_flood',
  'frame_flood',
  'slow_reader',
];
const HTTP_REFUSAL_REASONS: readonly HttpRefusalReason[] = ['host_not_allowed', 'bad_host'];

export function createServiceMetrics(
  registry: Registry<OpenMetricsContentType>,
  clients: () => number,
): ServiceMetrics {
  new Gauge({
    name: METRIC_WEBSOCKET_CLIENTS,
    help: 'WebSocket clients connected to /ws',
    registers: [registry],
    collect() {
      this.set(clients());
    },
  });
  const refused = new Counter({
    name: METRIC_WEBSOCKET_REFUSED,
    help: 'WebSocket clients refused or cut off, by reason',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  // A stalled event loop is what every other symptom (slow scrapes, late pings) comes from.
  // Windows of their own, not reset by scrapes: every scraper sees the same value.
  const delay = monitorEventLoopDelay({ resolution: 10 });
  delay.enable();
  let previousWindowMax = 0;
  setInterval(() => {
    previousWindowMax = delay.max;
    delay.reset();
  }, EVENT_LOOP_WINDOW_MS).unref();
  new Gauge({
    name: METRIC_EVENT_LOOP_DELAY,
    help: 'longest event loop delay in the last 10 to 20 seconds',
    registers: [registry],
    collect() {
      this.set(Math.max(previousWindowMax, delay.max) / 1e9);
    },
  });
  const httpRefused = new Counter({
    name: METRIC_HTTP_REFUSED,
    help: 'HTTP requests refused for their Host header (421 another name, 400 malformed or repeated)',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  // Every reason shows from the first scrape, so a rate() over it never starts from nothing.
  for (const reason of REFUSAL_REASONS) refused.inc({ reason }, 0);
  for (const reason of HTTP_REFUSAL_REASONS) httpRefused.inc({ reason }, 0);
  return {
    refused,
    httpRefused,
    dropped: new Counter({
      name: METRIC_LIVE_UPDATES_DROPPED,
      help: 'live updates not sent to a client because it was too slow to read them',
      registers: [registry],
    }),
    exportFailures: new Counter({
      name: METRIC_SPAN_EXPORT_FAILURES,
      help: 'spans the OTLP exporter failed to deliver',
      registers: [registry],
    }),
    spansDropped: new Counter({
      name: METRIC_SPANS_DROPPED,
      help: 'spans dropped before export because the batch queue was full',
      registers: [registry],
    }),
  };
}
