/**
 * The OpenTelemetry Collector (contrib) configuration for fleets that need whole-trace sampling
 * decisions across processes: a first tier that receives OTLP and routes every span of a trace to
 * the same second-tier Collector (`loadbalancing` exporter, `routing_key: traceID`), and a second
 * tier whose `tail_sampling` policies are the in-process sampler's rules (failed, unconverged,
 * slow, long, a share of the rest) on the attributes the telemetry writes.
 *
 * `npm run ops` writes them to otel-collector/; test/ops/collector.test.ts checks every key
 * against the Collector's documented configuration and the thresholds against this config.
 */

import { endReasons } from '../src/core/spi/end-reasons.ts';
import { BUILT_IN_REASONS } from '../src/observability/metrics.ts';
import {
  ATTR_CONVERSATION_DISPATCH_COUNT,
  ATTR_CONVERSATION_END_REASON,
} from '../src/observability/semconv.ts';
import { expect } from './check.ts';
import type { OpsConfig } from './config-types.ts';
import { yaml } from './render.ts';

/** A Go duration as the Collector parses it (`time.ParseDuration`): `30s`, `1m30s`, `500ms`. */
export type GoDuration = string;

/** Where the first tier finds the second tier's Collectors. */
export type CollectorResolver =
  | {
      /**
       * A name that resolves to every second-tier Collector's IP (a Kubernetes headless Service),
       * re-resolved periodically, and the port of their OTLP/gRPC receiver.
       */
      readonly dns: { readonly hostname: string; readonly port: string };
    }
  | {
      /** A fixed list of second-tier Collectors, `host:port` each (their OTLP/gRPC receiver). */
      readonly static: { readonly hostnames: readonly string[] };
    };

export interface CollectorConfig {
  /**
   * The share of the other traces kept (`probabilistic`), as the in-process sampler's `ratio`.
   * @default 0.1
   */
  readonly ratio: number;
  /**
   * Traces longer than this (milliseconds, `latency`) are kept, as the sampler's `slowMs`.
   * `null`: the latency SLO's threshold (`slos.convergenceLatency.thresholdSeconds`), so that a
   * conversation slower than the SLO allows is always kept.
   * @default null
   */
  readonly slowMs: number | null;
  /**
   * Traces whose conversation made more dispatches than this are kept (`numeric_attribute` on
   * `conversation.dispatch_count`), as the sampler's `longDispatches`. `null`: no such policy.
   * @default null
   */
  readonly longDispatches: number | null;
  /**
   * How long the second tier waits after a trace's first span before deciding it: longer than
   * your longest conversation segment, or its trace is decided before it is complete.
   * @default '30s'
   */
  readonly decisionWait: GoDuration;
  /**
   * Traces the second tier holds in memory while they wait (each Collector).
   * @default 100000
   */
  readonly numTraces: number;
  /**
   * New traces per second each second-tier Collector expects (sizes its structures).
   * @default 100
   */
  readonly expectedNewTracesPerSec: number;
  /**
   * Where the first tier finds the second tier. The default is a placeholder: the headless
   * Service of the second tier's Deployment, in the namespace Jaeger runs in.
   * @default { dns: { hostname: 'otel-sampler-headless.observability.svc.cluster.local', port: '4317' } }
   */
  readonly resolver: CollectorResolver;
  /**
   * Jaeger's OTLP/gRPC endpoint (`host:port`), where the second tier exports the kept traces.
   * @default 'jaeger-collector.observability:4317'
   */
  readonly jaegerEndpoint: string;
}

export const DEFAULT_COLLECTOR_CONFIG: CollectorConfig = {
  ratio: 0.1,
  slowMs: null,
  longDispatches: null,
  decisionWait: '30s',
  numTraces: 100_000,
  expectedNewTracesPerSec: 100,
  resolver: {
    dns: { hostname: 'otel-sampler-headless.observability.svc.cluster.local', port: '4317' },
  },
  jaegerEndpoint: 'jaeger-collector.observability:4317',
};

/** The files, relative to the output directory. */
export const COLLECTOR_FILES = {
  loadBalancing: 'otel-collector/tier1-loadbalancing.yaml',
  tailSampling: 'otel-collector/tier2-tail-sampling.yaml',
} as const;

/** The metrics pipeline's file (docs/telemetry.md names it; the tiers are docs/sampling.md's). */
export const METRICS_COLLECTOR_FILE = 'otel-collector/metrics-prometheus.yaml';

// Go's time.ParseDuration, without signs and fractions: one or more number-unit pairs.
const GO_DURATION = /^(\d+(ns|us|µs|ms|s|m|h))+$/;
const HOST_PORT = /^[A-Za-z0-9.-]+:\d{1,5}$/;

function positiveInteger(what: string, value: unknown): void {
  expect(Number.isSafeInteger(value) && (value as number) > 0, what, 'a positive integer', value);
}

/** The defaults with your changes, checked: a bad value throws with what was expected and what came. */
export function defineCollectorConfig(input: Partial<CollectorConfig> = {}): CollectorConfig {
  const config: CollectorConfig = { ...DEFAULT_COLLECTOR_CONFIG, ...input };
  for (const key of Object.keys(input)) {
    expect(
      Object.hasOwn(DEFAULT_COLLECTOR_CONFIG, key),
      'collector',
      `an object of ${Object.keys(DEFAULT_COLLECTOR_CONFIG)
        .map((k) => `\`${k}\``)
        .join(', ')}`,
      key,
    );
  }
  expect(
    typeof config.ratio === 'number' && config.ratio >= 0 && config.ratio <= 1,
    'collector.ratio',
    'a number from 0 to 1',
    config.ratio,
  );
  if (config.slowMs !== null) positiveInteger('collector.slowMs', config.slowMs);
  if (config.longDispatches !== null) {
    expect(
      Number.isSafeInteger(config.longDispatches) && config.longDispatches >= 0,
      'collector.longDispatches',
      'a non-negative integer or null',
      config.longDispatches,
    );
  }
  expect(
    typeof config.decisionWait === 'string' &&
      GO_DURATION.test(config.decisionWait) &&
      /[1-9]/.test(config.decisionWait),
    'collector.decisionWait',
    'a Go duration such as `30s` or `1m30s`, more than zero',
    config.decisionWait,
  );
  positiveInteger('collector.numTraces', config.numTraces);
  positiveInteger('collector.expectedNewTracesPerSec', config.expectedNewTracesPerSec);
  const r = config.resolver as Partial<{
    dns: { hostname?: unknown; port?: unknown };
    static: { hostnames?: unknown };
  }>;
  const kinds = typeof r === 'object' && r !== null ? Object.keys(r) : [];
  expect(
    kinds.length === 1 &&
      ((r.dns !== undefined &&
        typeof r.dns.hostname === 'string' &&
        /^[A-Za-z0-9.-]+$/.test(r.dns.hostname) &&
        typeof r.dns.port === 'string' &&
        /^\d{1,5}$/.test(r.dns.port)) ||
        (r.static !== undefined &&
          Array.isArray(r.static.hostnames) &&
          r.static.hostnames.length > 0 &&
          r.static.hostnames.every((h) => typeof h === 'string' && HOST_PORT.test(h)))),
    'collector.resolver',
    '`{ dns: { hostname, port } }` (port a string of digits) or `{ static: { hostnames: ["host:port", …] } }`',
    config.resolver,
  );
  expect(
    typeof config.jaegerEndpoint === 'string' && HOST_PORT.test(config.jaegerEndpoint),
    'collector.jaegerEndpoint',
    'a `host:port` OTLP/gRPC endpoint',
    config.jaegerEndpoint,
  );
  return config;
}

/** The slow threshold in milliseconds: `slowMs`, or the latency SLO's threshold. */
export function slowThresholdMs(ops: OpsConfig, collector: CollectorConfig): number {
  return collector.slowMs ?? Math.round(ops.slos.convergenceLatency.thresholdSeconds * 1000);
}

/**
 * The end reasons the unconverged policy keeps: what the in-process sampler keeps by default
 * (every reason but `converged` and `queue_exhausted`), the library's and `customReasons`.
 */
export function keptReasons(ops: OpsConfig): string[] {
  const unremarkable = new Set(endReasons((r) => r.unremarkable));
  return [...BUILT_IN_REASONS, ...ops.customReasons].filter((r) => !unremarkable.has(r));
}

/** The OTLP receiver both tiers run: gRPC on 4317, HTTP on 4318, on every interface. */
function otlpReceiver(): Record<string, unknown> {
  return {
    protocols: {
      grpc: { endpoint: '0.0.0.0:4317' },
      http: { endpoint: '0.0.0.0:4318' },
    },
  };
}

/** Tier 1: receive OTLP, route each trace whole to one tier-2 Collector. */
export function loadBalancingCollector(collector: CollectorConfig): Record<string, unknown> {
  return {
    receivers: { otlp: otlpReceiver() },
    exporters: {
      loadbalancing: {
        routing_key: 'traceID',
        protocol: {
          // Plaintext inside the cluster; give `tls` certificates where the network is not trusted.
          otlp: { timeout: '10s', tls: { insecure: true } },
        },
        resolver: collector.resolver,
      },
    },
    service: {
      pipelines: {
        traces: { receivers: ['otlp'], exporters: ['loadbalancing'] },
      },
    },
  };
}

/** Tier 2: hold each trace `decisionWait`, keep it by the sampler's rules, export to Jaeger. */
export function tailSamplingCollector(
  ops: OpsConfig,
  collector: CollectorConfig,
): Record<string, unknown> {
  const policies: Record<string, unknown>[] = [
    { name: 'failed', type: 'status_code', status_code: { status_codes: ['ERROR'] } },
    {
      name: 'unconverged',
      type: 'string_attribute',
      string_attribute: { key: ATTR_CONVERSATION_END_REASON, values: keptReasons(ops) },
    },
    { name: 'slow', type: 'latency', latency: { threshold_ms: slowThresholdMs(ops, collector) } },
  ];
  if (collector.longDispatches !== null) {
    policies.push({
      name: 'long',
      type: 'numeric_attribute',
      numeric_attribute: {
        key: ATTR_CONVERSATION_DISPATCH_COUNT,
        // "more than longDispatches"; an open top: the largest integer JSON and int64 both hold.
        min_value: collector.longDispatches + 1,
        max_value: Number.MAX_SAFE_INTEGER,
      },
    });
  }
  policies.push({
    name: 'ratio',
    type: 'probabilistic',
    probabilistic: { sampling_percentage: Number((collector.ratio * 100).toPrecision(12)) },
  });
  return {
    receivers: { otlp: otlpReceiver() },
    processors: {
      tail_sampling: {
        decision_wait: collector.decisionWait,
        num_traces: collector.numTraces,
        expected_new_traces_per_sec: collector.expectedNewTracesPerSec,
        policies,
      },
      batch: { timeout: '5s', send_batch_size: 8192 },
    },
    exporters: {
      'otlp/jaeger': { endpoint: collector.jaegerEndpoint, tls: { insecure: true } },
    },
    service: {
      pipelines: {
        traces: {
          receivers: ['otlp'],
          processors: ['tail_sampling', 'batch'],
          exporters: ['otlp/jaeger'],
        },
      },
    },
  };
}

/**
 * The metrics pipeline of the OpenTelemetry path (the telemetry's `meterProvider` with an OTLP
 * exporter): OTLP in, batched, out as a Prometheus scrape endpoint whose names are the
 * registry's (the unit's suffix added), so the shipped rules and dashboards read them as they are.
 */
export function metricsCollector(): Record<string, unknown> {
  return {
    receivers: { otlp: otlpReceiver() },
    processors: { batch: { timeout: '5s', send_batch_size: 8192 } },
    exporters: {
      prometheus: {
        endpoint: '0.0.0.0:8889',
        // Dots to `_`, `_total` on counters, the unit's suffix (`_seconds`, `_bytes`): the names
        // of prometheus/rules/ and grafana/dashboards/ (docs/telemetry.md, "OpenTelemetry metrics").
        translation_strategy: 'UnderscoreEscapingWithSuffixes',
        // The service's resource (service.name, service.instance.id) stays on target_info.
        resource_to_telemetry_conversion: { enabled: false },
      },
    },
    service: {
      pipelines: {
        metrics: { receivers: ['otlp'], processors: ['batch'], exporters: ['prometheus'] },
      },
    },
  };
}

const METRICS_HEADER = `# Generated by \`npm run ops\` from ops/collector.ts: change it there, not this file.
# OpenTelemetry Collector (contrib distribution, otelcol-contrib); see docs/telemetry.md,
# "OpenTelemetry metrics". Nothing in this repository runs it.
# The services export their metrics over OTLP here (createConversationTelemetry({ meterProvider })
# with the SDK's OTLPMetricExporter); Prometheus scrapes the exporter on 8889 as the job the rules
# select (job="conversation-orchestrator"), with prometheus/rules/ and grafana/dashboards/ as they are.
`;

const HEADER = `# Generated by \`npm run ops\` from ops/collector.ts and its config: change the config, not this file.
# OpenTelemetry Collector (contrib distribution, otelcol-contrib); see docs/sampling.md,
# "Whole-trace decisions across processes". Nothing in this repository runs it.
`;

/** Everything this module generates: file path (relative to the output directory) → content. */
export function renderCollector(
  ops: OpsConfig,
  collector: CollectorConfig = DEFAULT_COLLECTOR_CONFIG,
): Map<string, string> {
  const resolver =
    'dns' in collector.resolver
      ? `# The resolver's hostname is a placeholder: the headless Service of the tier-2 Collectors.`
      : `# The resolver lists the tier-2 Collectors (host:port of their OTLP/gRPC receiver).`;
  return new Map([
    [
      COLLECTOR_FILES.loadBalancing,
      `${HEADER}# Tier 1: the services export OTLP here; every span of a trace goes to the same tier-2 Collector.
${resolver}
${yaml(loadBalancingCollector(collector))}`,
    ],
    [METRICS_COLLECTOR_FILE, `${METRICS_HEADER}${yaml(metricsCollector())}`],
    [
      COLLECTOR_FILES.tailSampling,
      `${HEADER}# Tier 2: decides each whole trace by the in-process sampler's rules (a trace is kept if any
# policy keeps it) and exports the kept ones to Jaeger over OTLP/gRPC.
${yaml(tailSamplingCollector(ops, collector))}`,
    ],
  ]);
}
