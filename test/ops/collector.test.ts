/**
 * The two-tier OpenTelemetry Collector configuration the ops bundle generates (otel-collector/):
 * committed as `npm run ops` writes it, every key of every component one the Collector documents,
 * pipelines that name only defined components, thresholds that are the config's, and the
 * attribute names and end reasons the in-process sampler and the telemetry use.
 *
 * The Collector binary (otelcol-contrib) cannot run here (no binary, no network to fetch one), so
 * nothing here starts it: the configuration is checked against the keys of the Collector's own
 * configuration structs, copied below from the files cited, which is what its config loader
 * refuses unknown keys by.
 */
import { readdirSync, readFileSync } from 'node:fs';
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import {
  COLLECTOR_FILES,
  DEFAULT_COLLECTOR_CONFIG,
  defineCollectorConfig,
  METRICS_COLLECTOR_FILE,
  renderCollector,
} from '../../ops/collector.ts';
import { DEFAULT_OPS_CONFIG, defineOpsConfig } from '../../ops/config.ts';
import { BUILT_IN_REASONS, createConversationSampler } from '../../src/observability/index.ts';
import {
  METRIC_DEFINITIONS,
  prometheusNameOf,
} from '../../src/observability/metric-definitions.ts';
import {
  ATTR_CONVERSATION_DISPATCH_COUNT,
  ATTR_CONVERSATION_END_REASON,
  ATTR_GEN_AI_OPERATION_NAME,
  GEN_AI_OPERATION_INVOKE_WORKFLOW,
  SPAN_CONVERSATION_PREFIX,
} from '../../src/observability/semconv.ts';

/** The allowed keys of a mapping: a leaf (`true`), a nested mapping, or a list of mappings. */
type Keys = { readonly [key: string]: true | Keys | readonly [Keys] };

// configtls.ClientConfig (opentelemetry-collector, config/configtls/configtls.go): the shared
// Config (squashed) and the client's own keys.
const TLS_CLIENT: Keys = {
  ca_file: true,
  ca_pem: true,
  cert_file: true,
  cert_pem: true,
  key_file: true,
  key_pem: true,
  min_version: true,
  max_version: true,
  cipher_suites: true,
  reload_interval: true,
  include_system_ca_certs_pool: true,
  insecure: true,
  insecure_skip_verify: true,
  server_name_override: true,
};

// otlpexporter.Config (opentelemetry-collector, exporter/otlpexporter/config.go): TimeoutConfig
// (squashed: `timeout`), `sending_queue`, `retry_on_failure`, `batcher`, and configgrpc.ClientConfig
// (squashed; config/configgrpc/configgrpc.go).
const OTLP_EXPORTER: Keys = {
  timeout: true,
  sending_queue: true,
  retry_on_failure: true,
  batcher: true,
  endpoint: true,
  compression: true,
  tls: TLS_CLIENT,
  keepalive: { time: true, timeout: true, permit_without_stream: true },
  read_buffer_size: true,
  write_buffer_size: true,
  wait_for_ready: true,
  headers: true,
  balancer_name: true,
  authority: true,
  auth: true,
};

// otlpreceiver.Config (opentelemetry-collector, receiver/otlpreceiver/config.go): `protocols`
// with `grpc` (configgrpc.ServerConfig, config/configgrpc/configgrpc.go, its confignet.AddrConfig
// squashed: `endpoint`, `transport`) and `http` (confighttp.ServerConfig and the receiver's URL paths).
const OTLP_RECEIVER: Keys = {
  protocols: {
    grpc: {
      endpoint: true,
      transport: true,
      tls: true,
      max_recv_msg_size_mib: true,
      max_concurrent_streams: true,
      read_buffer_size: true,
      write_buffer_size: true,
      keepalive: true,
      auth: true,
      include_metadata: true,
    },
    http: {
      endpoint: true,
      tls: true,
      cors: true,
      auth: true,
      max_request_body_size: true,
      include_metadata: true,
      response_headers: true,
      traces_url_path: true,
      metrics_url_path: true,
      logs_url_path: true,
    },
  },
};

// loadbalancingexporter.Config (opentelemetry-collector-contrib,
// exporter/loadbalancingexporter/config.go at 870de3632d376a989b61459319e6e8754ec1532c):
// `protocol.otlp` is an otlpexporter.Config; resolvers `static`, `dns`, `k8s`.
const LOADBALANCING_EXPORTER: Keys = {
  routing_key: true,
  protocol: { otlp: OTLP_EXPORTER },
  resolver: {
    static: { hostnames: true },
    dns: { hostname: true, port: true, interval: true, timeout: true },
    k8s: { service: true, ports: true },
  },
};

// tailsamplingprocessor.Config and PolicyCfg (opentelemetry-collector-contrib,
// processor/tailsamplingprocessor/config.go at 497862f69939b03daed1915653227b6defa85c0f).
const POLICY: Keys = {
  name: true,
  type: true,
  latency: { threshold_ms: true, upper_threshold_ms: true },
  numeric_attribute: { key: true, min_value: true, max_value: true, invert_match: true },
  probabilistic: { hash_salt: true, sampling_percentage: true },
  status_code: { status_codes: true },
  string_attribute: {
    key: true,
    values: true,
    enabled_regex_matching: true,
    cache_max_size: true,
    invert_match: true,
  },
  rate_limiting: { spans_per_second: true },
  span_count: { min_spans: true, max_spans: true },
  trace_state: { key: true, values: true },
  boolean_attribute: { key: true, value: true },
  ottl_condition: { error_mode: true, span: true, spanevent: true },
  composite: true,
  and: true,
};
const TAIL_SAMPLING: Keys = {
  decision_wait: true,
  num_traces: true,
  expected_new_traces_per_sec: true,
  policies: [POLICY],
};

// batchprocessor.Config (opentelemetry-collector, processor/batchprocessor/config.go).
const BATCH: Keys = {
  timeout: true,
  send_batch_size: true,
  send_batch_max_size: true,
  metadata_keys: true,
  metadata_cardinality_limit: true,
};

// prometheusexporter.Config (opentelemetry-collector-contrib, exporter/prometheusexporter/config.go
// at 0827c30acae7b3e376a4deeb4cf82fbf2e12e198): confighttp.ServerConfig (squashed, as the OTLP
// receiver's `http` above), `sending_queue` and the exporter's own keys.
const PROMETHEUS_EXPORTER: Keys = {
  ...((OTLP_RECEIVER.protocols as Keys).http as Keys),
  sending_queue: true,
  namespace: true,
  const_labels: true,
  send_timestamps: true,
  metric_expiration: true,
  resource_to_telemetry_conversion: { enabled: true },
  enable_open_metrics: true,
  add_metric_suffixes: true,
  translation_strategy: true,
};
/** The values `translation_strategy` takes (the same file's Validate). */
const TRANSLATION_STRATEGIES = [
  'UnderscoreEscapingWithSuffixes',
  'UnderscoreEscapingWithoutSuffixes',
  'NoUTF8EscapingWithSuffixes',
  'NoTranslation',
];

/** Per component kind, the keys of each type (the part of an id before `/`). */
const COMPONENTS: Readonly<Record<string, Readonly<Record<string, Keys>>>> = {
  receivers: { otlp: OTLP_RECEIVER },
  processors: { tail_sampling: TAIL_SAMPLING, batch: BATCH },
  exporters: {
    otlp: OTLP_EXPORTER,
    loadbalancing: LOADBALANCING_EXPORTER,
    prometheus: PROMETHEUS_EXPORTER,
  },
};

// The Collector's top level and service.pipelines.<type>[/name] (otelcol/config.go,
// service/pipelines/config.go in opentelemetry-collector).
const TOP_LEVEL = ['receivers', 'processors', 'exporters', 'connectors', 'extensions', 'service'];
const SERVICE: Keys = { extensions: true, telemetry: true, pipelines: true };
const PIPELINE: Keys = { receivers: true, processors: true, exporters: true };

/** The paths of the keys of `value` that `keys` does not allow. */
function unknownKeys(value: unknown, keys: Keys, path: string): string[] {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [path];
  return Object.entries(value).flatMap(([key, child]) => {
    const allowed = keys[key];
    const at = `${path}.${key}`;
    if (allowed === undefined) return [at];
    if (allowed === true) return [];
    if (Array.isArray(allowed)) {
      if (!Array.isArray(child)) return [at];
      return child.flatMap((item, i) => unknownKeys(item, allowed[0] as Keys, `${at}[${i}]`));
    }
    return unknownKeys(child, allowed as Keys, at);
  });
}

interface Collector {
  receivers?: Record<string, unknown>;
  processors?: Record<string, unknown>;
  exporters?: Record<string, unknown>;
  service: { pipelines: Record<string, Record<string, string[]>> };
}

/** Every key of the file the Collector would not know, as paths. */
function undocumentedKeys(config: Collector): string[] {
  const unknown = Object.keys(config)
    .filter((k) => !TOP_LEVEL.includes(k))
    .map((k) => `.${k}`);
  for (const [kind, types] of Object.entries(COMPONENTS)) {
    const components = (config as unknown as Record<string, Record<string, unknown>>)[kind] ?? {};
    for (const [id, component] of Object.entries(components)) {
      const keys = types[id.split('/')[0] as string];
      if (keys === undefined) unknown.push(`.${kind}.${id} (no such component type here)`);
      else unknown.push(...unknownKeys(component, keys, `.${kind}.${id}`));
    }
  }
  unknown.push(...unknownKeys(config.service, SERVICE, '.service'));
  for (const [id, pipeline] of Object.entries(config.service.pipelines)) {
    if (!['traces', 'metrics', 'logs'].includes(id.split('/')[0] as string)) {
      unknown.push(`.service.pipelines.${id}`);
    }
    unknown.push(...unknownKeys(pipeline, PIPELINE, `.service.pipelines.${id}`));
  }
  return unknown;
}

/** Each kind of component the pipelines of `config` name is exactly the set it defines. */
function expectPipelinesUseWhatIsDefined(config: Collector): void {
  for (const kind of ['receivers', 'processors', 'exporters'] as const) {
    const defined = Object.keys(config[kind] ?? {}).sort();
    const used = [
      ...new Set(Object.values(config.service.pipelines).flatMap((p) => p[kind] ?? [])),
    ].sort();
    expect(used, kind).toEqual(defined);
  }
}

const read = (path: string) => parse(readFileSync(path, 'utf8')) as Collector;
const tier1 = () => read(COLLECTOR_FILES.loadBalancing);
const tier2 = () => read(COLLECTOR_FILES.tailSampling);

interface Policy {
  name: string;
  type: string;
  [config: string]: unknown;
}
/** One component of the file, by kind and id; throws when the file has none. */
function component(
  config: Collector,
  kind: 'receivers' | 'processors' | 'exporters',
  id: string,
): Record<string, unknown> {
  const found = config[kind]?.[id];
  if (found === undefined) throw new Error(`no ${kind}.${id}`);
  return found as Record<string, unknown>;
}
const policiesOf = (config: Collector) =>
  component(config, 'processors', 'tail_sampling').policies as Policy[];
const policy = (config: Collector, name: string) => {
  const found = policiesOf(config).find((p) => p.name === name);
  if (found === undefined) throw new Error(`no policy ${name}`);
  return found;
};

describe('the Collector configuration (otel-collector/)', () => {
  it('is what npm run ops writes for the default config, and nothing else is in the folder', () => {
    const generated = renderCollector(DEFAULT_OPS_CONFIG);
    for (const [path, content] of generated) {
      expect(readFileSync(path, 'utf8'), `${path} is stale: run npm run ops`).toBe(content);
    }
    expect(readdirSync('otel-collector').map((f) => `otel-collector/${f}`)).toEqual(
      [...generated.keys()].sort(),
    );
  });

  it('uses in every component only keys the Collector documents', () => {
    expect(undocumentedKeys(tier1())).toEqual([]);
    expect(undocumentedKeys(tier2())).toEqual([]);
  });

  it('would report a misspelt key, in a component and in a policy', () => {
    const config = tier2();
    const tail = config.processors?.tail_sampling as Record<string, unknown>;
    tail.decison_wait = '10s';
    (policiesOf(config)[0] as Policy).latency = { treshold_ms: 5 };
    expect(undocumentedKeys(config)).toEqual([
      '.processors.tail_sampling.policies[0].latency.treshold_ms',
      '.processors.tail_sampling.decison_wait',
    ]);
  });

  it('names in its pipelines only components it defines, and defines none it does not use', () => {
    for (const config of [tier1(), tier2()]) {
      expectPipelinesUseWhatIsDefined(config);
    }
  });

  it('routes by trace id in tier 1, to the resolver of the config', () => {
    const exporter = tier1().exporters?.loadbalancing as Record<string, unknown>;
    expect(exporter.routing_key).toBe('traceID');
    expect(exporter.resolver).toEqual({
      dns: { hostname: 'otel-sampler-headless.observability.svc.cluster.local', port: '4317' },
    });
    expect(tier1().service.pipelines).toEqual({
      traces: { receivers: ['otlp'], exporters: ['loadbalancing'] },
    });
  });

  it('decides in tier 2 by the sampler’s rules, with the default thresholds, then batches and exports to Jaeger', () => {
    const config = tier2();
    const tail = config.processors?.tail_sampling as Record<string, unknown>;
    expect([tail.decision_wait, tail.num_traces, tail.expected_new_traces_per_sec]).toEqual([
      DEFAULT_COLLECTOR_CONFIG.decisionWait,
      DEFAULT_COLLECTOR_CONFIG.numTraces,
      DEFAULT_COLLECTOR_CONFIG.expectedNewTracesPerSec,
    ]);
    expect(policiesOf(config).map((p) => `${p.name}:${p.type}`)).toEqual([
      'failed:status_code',
      'unconverged:string_attribute',
      'slow:latency',
      'ratio:probabilistic',
    ]);
    expect(policy(config, 'failed').status_code).toEqual({ status_codes: ['ERROR'] });
    // slowMs null: the latency SLO's threshold, 5 s.
    expect(DEFAULT_OPS_CONFIG.slos.convergenceLatency.thresholdSeconds).toBe(5);
    expect(policy(config, 'slow').latency).toEqual({ threshold_ms: 5000 });
    expect(policy(config, 'ratio').probabilistic).toEqual({ sampling_percentage: 10 });
    expect(config.exporters?.['otlp/jaeger']).toEqual({
      endpoint: 'jaeger-collector.observability:4317',
      tls: { insecure: true },
    });
    expect(config.service.pipelines.traces?.processors).toEqual(['tail_sampling', 'batch']);
  });

  it('takes every threshold from the config it is given', () => {
    const ops = defineOpsConfig({
      slos: { convergenceLatency: { thresholdSeconds: 10 } },
      customReasons: ['handed_off'],
    });
    const collector = defineCollectorConfig({
      ratio: 0.05,
      longDispatches: 200,
      decisionWait: '1m30s',
      numTraces: 5000,
      expectedNewTracesPerSec: 12,
      resolver: { static: { hostnames: ['sampler-0:4317', 'sampler-1:4317'] } },
      jaegerEndpoint: 'jaeger:4317',
    });
    const files = renderCollector(ops, collector);
    const t1 = parse(files.get(COLLECTOR_FILES.loadBalancing) as string) as Collector;
    const t2 = parse(files.get(COLLECTOR_FILES.tailSampling) as string) as Collector;
    expect(undocumentedKeys(t1)).toEqual([]);
    expect(undocumentedKeys(t2)).toEqual([]);
    expect(component(t1, 'exporters', 'loadbalancing').resolver).toEqual({
      static: { hostnames: ['sampler-0:4317', 'sampler-1:4317'] },
    });
    expect(t2.processors?.tail_sampling).toMatchObject({
      decision_wait: '1m30s',
      num_traces: 5000,
      expected_new_traces_per_sec: 12,
    });
    expect(policy(t2, 'slow').latency).toEqual({ threshold_ms: 10_000 });
    expect(policy(t2, 'long').numeric_attribute).toEqual({
      key: ATTR_CONVERSATION_DISPATCH_COUNT,
      min_value: 201,
      max_value: Number.MAX_SAFE_INTEGER,
    });
    expect(policy(t2, 'ratio').probabilistic).toEqual({ sampling_percentage: 5 });
    expect((policy(t2, 'unconverged').string_attribute as { values: string[] }).values).toContain(
      'handed_off',
    );
    expect(t2.exporters?.['otlp/jaeger']).toMatchObject({ endpoint: 'jaeger:4317' });
    // An explicit slowMs wins over the SLO's threshold.
    const slow = renderCollector(ops, defineCollectorConfig({ slowMs: 2000 }));
    expect(
      policy(parse(slow.get(COLLECTOR_FILES.tailSampling) as string) as Collector, 'slow').latency,
    ).toEqual({ threshold_ms: 2000 });
  });

  it('refuses a config the Collector could not mean, saying what was expected', () => {
    expect(() => defineCollectorConfig({ ratio: 2 })).toThrow(
      'Expected `collector.ratio` to be a number from 0 to 1, got `2` (number)',
    );
    expect(() => defineCollectorConfig({ decisionWait: '30' })).toThrow(
      'Expected `collector.decisionWait` to be a Go duration such as `30s` or `1m30s`, more than zero, got `30` (string)',
    );
    expect(() =>
      defineCollectorConfig({
        resolver: { dns: { hostname: 'a', port: '4317' }, static: { hostnames: ['b:4317'] } },
      } as never),
    ).toThrow(/^Expected `collector.resolver` to be `\{ dns/);
    expect(() => defineCollectorConfig({ numTraces: 0 })).toThrow(
      'Expected `collector.numTraces` to be a positive integer, got `0` (number)',
    );
    expect(() => defineCollectorConfig({ decisonWait: '1m' } as never)).toThrow(
      /^Expected `collector` to be an object of `ratio`, .*, got `decisonWait` \(string\)$/,
    );
  });
});

describe('the Collector configuration and the in-process sampler do not drift apart', () => {
  it('reads the attributes the telemetry writes, by their semconv names', () => {
    expect((policy(tier2(), 'unconverged').string_attribute as { key: string }).key).toBe(
      ATTR_CONVERSATION_END_REASON,
    );
    expect(ATTR_CONVERSATION_END_REASON).toBe('conversation.end.reason');
    expect(ATTR_CONVERSATION_DISPATCH_COUNT).toBe('conversation.dispatch_count');
  });

  it('keeps by end reason exactly the reasons the sampler keeps with its default options', async () => {
    const custom = 'handed_off';
    const values = (
      policy(
        parse(
          renderCollector(defineOpsConfig({ customReasons: [custom] })).get(
            COLLECTOR_FILES.tailSampling,
          ) as string,
        ) as Collector,
        'unconverged',
      ).string_attribute as { values: string[] }
    ).values;
    // The real sampler, ratio 0: only its rules keep a trace. One conversation span per reason.
    const exporter = new InMemorySpanExporter();
    const provider = new TracerProvider({
      spanProcessors: [
        createConversationSampler({
          next: new SimpleSpanProcessor({ exporter: exporter }),
          ratio: 0,
        }),
      ],
    });
    const tracer = provider.getTracer('test');
    const reasons = [...BUILT_IN_REASONS, custom];
    for (const reason of reasons) {
      tracer
        .startSpan(`${SPAN_CONVERSATION_PREFIX}desks`, {
          attributes: {
            [ATTR_GEN_AI_OPERATION_NAME]: GEN_AI_OPERATION_INVOKE_WORKFLOW,
            [ATTR_CONVERSATION_END_REASON]: reason,
          },
        })
        .end();
    }
    await provider.forceFlush();
    const kept = exporter
      .getFinishedSpans()
      .map((s) => s.attributes[ATTR_CONVERSATION_END_REASON] as string);
    expect(kept).toHaveLength(reasons.length - 2);
    expect(values).toEqual(kept);
    expect(reasons.filter((r) => !kept.includes(r))).toEqual(['converged', 'queue_exhausted']);
    await provider.shutdown();
  });
});

describe('docs/sampling.md, "Whole-trace decisions across processes"', () => {
  const page = readFileSync('docs/sampling.md', 'utf8');
  const section = page.slice(page.indexOf('## Whole-trace decisions across processes'));

  it('names each generated file and the defaults it states', () => {
    for (const file of Object.values(COLLECTOR_FILES)) expect(section).toContain(`\`${file}\``);
    expect(section).toContain(`\`decision_wait\` (${DEFAULT_COLLECTOR_CONFIG.decisionWait})`);
    expect(section).toContain(
      `threshold, ${DEFAULT_OPS_CONFIG.slos.convergenceLatency.thresholdSeconds} s)`,
    );
    expect(section).toContain(`(\`probabilistic\`, ${DEFAULT_COLLECTOR_CONFIG.ratio * 100} %)`);
    expect(section).toMatch(/the docker-compose demo\s+does not run these tiers/);
  });
});

describe('the metrics pipeline of the OpenTelemetry path (otel-collector/metrics-prometheus.yaml)', () => {
  const metrics = () => read(METRICS_COLLECTOR_FILE);

  it('uses only keys the Collector documents, and names only components it defines', () => {
    expect(undocumentedKeys(metrics())).toEqual([]);
    const config = metrics();
    expectPipelinesUseWhatIsDefined(config);
  });

  it('receives OTLP and exposes the names the shipped rules and dashboards read', () => {
    const config = metrics();
    expect(config.service.pipelines).toEqual({
      metrics: { receivers: ['otlp'], processors: ['batch'], exporters: ['prometheus'] },
    });
    const exporter = component(config, 'exporters', 'prometheus');
    expect(TRANSLATION_STRATEGIES).toContain(exporter.translation_strategy);
    // With suffixes: every OpenTelemetry name becomes the registry's (prometheusNameOf(d, true)).
    expect(exporter.translation_strategy).toBe('UnderscoreEscapingWithSuffixes');
    for (const d of METRIC_DEFINITIONS) expect(prometheusNameOf(d, true)).toBe(d.prometheus);
  });
});
