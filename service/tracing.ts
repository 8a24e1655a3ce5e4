/**
 * Traces leave through @opentelemetry/sdk-node and OTLP/HTTP when the standard variables ask for
 * it. The plugin only uses @opentelemetry/api; this is the application's side.
 *
 * The exporter is wrapped to count what it delivered and what it failed to, so an endpoint that
 * is down is reported while the service runs, and the shutdown line says what really happened.
 * The flush at shutdown is bounded: an endpoint that accepts connections and never answers would
 * otherwise hold the process for the exporter's own timeout (10 s), past `docker stop`'s grace.
 */
import { createNoopMeter, type Meter, type MeterProvider } from '@opentelemetry/api';
import { type ExportResult, ExportResultCode } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { NodeSDK } from '@opentelemetry/sdk-node';
import {
  BatchSpanProcessor,
  type BatchSpanProcessorOptions,
  type ReadableSpan,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import {
  createConversationSampler,
  createExportTracker,
  type PrometheusRegistry,
} from '../src/observability/index.ts';

export interface TracingOptions {
  /** The plugin keeps this many dispatch events per conversation span; the SDK keeps as many. */
  readonly maxDispatchEvents: number;
  /** Longest wait at shutdown for spans to reach the endpoint, ms. */
  readonly flushTimeoutMs: number;
  /** Called after every failed export with its span count and error. */
  readonly onExportFailure: (spans: number, error: Error | undefined) => void;
  /** Called for each span the batch processor drops because its queue is full. */
  readonly onDrop: () => void;
  /**
   * Which conversations' traces are kept (the conversation sampler, in front of the batch
   * processor): every failed or unconverged one, every one slower than `slowMs` or longer than
   * `longDispatches` (0: no such rule), and the share `ratio` of the rest. Its decisions are
   * counted on `registry`, whose exemplars then point only at kept traces.
   */
  readonly sampling: {
    readonly ratio: number;
    readonly slowMs: number;
    readonly longDispatches: number;
    readonly registry: PrometheusRegistry;
  };
}

/** What became of the spans that ended, as far as the exporter knows. */
export interface FlushReport {
  readonly exported: number;
  readonly failed: number;
  /** Dropped by the batch processor, its queue full (an endpoint too slow for the load). */
  readonly dropped: number;
  /** Ended but neither delivered nor failed: still queued or in flight when the flush gave up. */
  readonly unflushed: number;
  /** The flush was cut off at `flushTimeoutMs`. */
  readonly timedOut: boolean;
}

export interface Tracing {
  /** A one-line description for the terminal. */
  readonly description: string;
  /**
   * Whether the trace can be linked: a batch of it was delivered, or the sampler kept it (it
   * decides as the conversation ends, before the batch goes out) while the endpoint accepts
   * exports (the last export succeeded). False with tracing off, and while the endpoint refuses
   * or has not answered yet: no link to a trace that never arrived.
   */
  kept(traceId: string): boolean;
  /**
   * Calls back once a batch of the trace is delivered (`true`), or it fails or is forgotten
   * (`false`); `false` at once with tracing off. For links written only once delivered.
   */
  whenExported(traceId: string, callback: (delivered: boolean) => void): void;
  /** Flushes (within `flushTimeoutMs`) and stops the exporter; never rejects. */
  shutdown(): Promise<FlushReport | undefined>;
}

export function startTracing(env: NodeJS.ProcessEnv, options: TracingOptions): Tracing {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint || env.OTEL_SDK_DISABLED === 'true') {
    return {
      description:
        'tracing off: set OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 (and OTEL_SERVICE_NAME) to export traces over OTLP/HTTP',
      kept: () => false,
      whenExported: (_traceId, callback) => callback(false),
      shutdown: () => Promise.resolve(undefined),
    };
  }
  // Metrics are served to Prometheus on /metrics; the SDK exports traces only.
  env.OTEL_METRICS_EXPORTER ??= 'none';
  env.OTEL_LOGS_EXPORTER ??= 'none';
  const counts = { ended: 0, exported: 0, failed: 0, dropped: 0 };
  // Whether the last export was delivered (undefined before the first answer).
  const health: { lastDelivered: boolean | undefined } = { lastDelivered: undefined };
  const counting = new CountingExporter(new OTLPTraceExporter(), counts, (spans, error) => {
    options.onExportFailure(spans, error);
  });
  // What the exporter delivered gates the exemplars of the registry and the page's trace links.
  const exporter = createExportTracker({
    exporter: {
      export: (spans, callback) =>
        counting.export(spans as ReadableSpan[], (result) => {
          health.lastDelivered = result.code === ExportResultCode.SUCCESS;
          callback(result);
        }),
      shutdown: () => counting.shutdown(),
      forceFlush: () => counting.forceFlush(),
    },
    registry: options.sampling.registry,
  });
  // The processor's own metrics (`selfObsMeterProvider`, experimental in SDK 3) are how it tells
  // of the spans it drops; a test sees the drops.
  const config: BatchSpanProcessorOptions = {
    exporter,
    ...batchOptionsFromEnv(env),
    selfObsMeterProvider: droppedSpans((n) => {
      counts.dropped += n;
      for (let i = 0; i < n; i++) options.onDrop();
    }),
  };
  const processor = new BatchSpanProcessor(config);
  const { ratio, slowMs, longDispatches, registry } = options.sampling;
  const sampler = createConversationSampler({
    next: new EndedSpans(counts, processor),
    registry,
    ratio,
    ...(slowMs > 0 ? { slowMs } : {}),
    ...(longDispatches > 0 ? { longDispatches } : {}),
  });
  const rules = [
    'every failed or unconverged conversation',
    ...(slowMs > 0 ? [`slower than ${slowMs} ms`] : []),
    ...(longDispatches > 0 ? [`longer than ${longDispatches} dispatches`] : []),
  ];
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME || 'conversation-orchestrator-demo',
    spanProcessors: [sampler],
    instrumentations: [],
    spanLimits: { eventCountLimit: options.maxDispatchEvents },
  });
  sdk.start();
  return {
    kept: (traceId) =>
      exporter.exported(traceId) || (health.lastDelivered === true && sampler.kept(traceId)),
    whenExported: (traceId, callback) => exporter.whenExported(traceId, callback),
    description: `tracing on: OTLP/HTTP to ${endpoint}; traces kept: ${rules.join(', ')}, and ${Number((ratio * 100).toFixed(4))}% of the rest (--sample-ratio)`,
    shutdown: async () => {
      let timer: NodeJS.Timeout | undefined;
      const gaveUp = new Promise<'timeout'>((resolve) => {
        timer = setTimeout(() => resolve('timeout'), options.flushTimeoutMs);
      });
      const outcome = await Promise.race([
        sdk.shutdown().then(
          () => 'done' as const,
          () => 'done' as const, // the failures are counted by the exporter
        ),
        gaveUp,
      ]);
      clearTimeout(timer);
      return {
        exported: counts.exported,
        failed: counts.failed,
        dropped: counts.dropped,
        unflushed: Math.max(0, counts.ended - counts.exported - counts.failed - counts.dropped),
        timedOut: outcome === 'timeout',
      };
    },
  };
}

/** The shutdown line's words for a flush report. */
export function describeFlush(report: FlushReport | undefined, flushTimeoutMs: number): string {
  if (report === undefined) return 'tracing off';
  const parts = [`${report.exported} spans exported`];
  if (report.failed > 0) parts.push(`${report.failed} failed to export`);
  if (report.dropped > 0) parts.push(`${report.dropped} dropped (export queue full)`);
  if (report.unflushed > 0) {
    parts.push(
      report.timedOut
        ? `${report.unflushed} not flushed (gave up after ${flushTimeoutMs} ms)`
        : `${report.unflushed} not flushed`,
    );
  }
  return parts.join(', ');
}

/**
 * The batch processor drops a span when its queue is full and says so only through its own
 * self-observability metrics (`otel.sdk.processor.span.processed` with `error.type`
 * `queue_full`) and a diag line. This meter provider hears that one counter and nothing else.
 */
/**
 * The batch processor's `OTEL_BSP_*` settings (the OpenTelemetry environment variables): SDK 2
 * read them itself, SDK 3's processor takes them as options only, so the service reads them. A
 * value that is not a positive integer is ignored with a warning, as the SDK did.
 */
function batchOptionsFromEnv(
  env: NodeJS.ProcessEnv,
): Pick<
  BatchSpanProcessorOptions,
  'scheduledDelayMillis' | 'maxQueueSize' | 'maxExportBatchSize' | 'exportTimeoutMillis'
> {
  const read = (name: string): number | undefined => {
    const raw = env[name];
    if (raw === undefined || raw === '') return undefined;
    const value = Number(raw);
    if (Number.isSafeInteger(value) && value > 0) return value;
    console.warn(`${name}: expected a positive integer, got \`${raw}\`; the SDK's default applies`);
    return undefined;
  };
  const options = {
    scheduledDelayMillis: read('OTEL_BSP_SCHEDULE_DELAY'),
    maxQueueSize: read('OTEL_BSP_MAX_QUEUE_SIZE'),
    maxExportBatchSize: read('OTEL_BSP_MAX_EXPORT_BATCH_SIZE'),
    exportTimeoutMillis: read('OTEL_BSP_EXPORT_TIMEOUT'),
  };
  return Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
}

function droppedSpans(onDrop: (spans: number) => void): MeterProvider {
  const noop = createNoopMeter();
  const meter: Meter = Object.create(noop, {
    createCounter: {
      value: (...args: Parameters<Meter['createCounter']>) => {
        if (args[0] !== 'otel.sdk.processor.span.processed') return noop.createCounter(...args);
        return {
          add: (value: number, attributes?: Record<string, unknown>) => {
            if (attributes?.['error.type'] === 'queue_full') onDrop(value);
          },
        };
      },
    },
  });
  return { getMeter: () => meter };
}

/**
 * The batch processor, counting the sampled spans that end and are kept: those it is given to
 * export (the conversation sampler in front of it drops the rest).
 */
class EndedSpans implements SpanProcessor {
  readonly #counts: { ended: number };
  readonly #next: SpanProcessor;
  constructor(counts: { ended: number }, next: SpanProcessor) {
    this.#counts = counts;
    this.#next = next;
  }
  onStart(...args: Parameters<SpanProcessor['onStart']>): void {
    this.#next.onStart(...args);
  }
  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & 1) === 1) this.#counts.ended++;
    this.#next.onEnd(span);
  }
  forceFlush(): Promise<void> {
    return this.#next.forceFlush();
  }
  shutdown(): Promise<void> {
    return this.#next.shutdown();
  }
}

class CountingExporter implements SpanExporter {
  readonly #inner: SpanExporter;
  readonly #counts: { exported: number; failed: number };
  readonly #onFailure: TracingOptions['onExportFailure'];

  constructor(
    inner: SpanExporter,
    counts: { exported: number; failed: number },
    onFailure: TracingOptions['onExportFailure'],
  ) {
    this.#inner = inner;
    this.#counts = counts;
    this.#onFailure = onFailure;
  }

  export(spans: ReadableSpan[], resultCallback: (result: ExportResult) => void): void {
    this.#inner.export(spans, (result) => {
      if (result.code === ExportResultCode.SUCCESS) {
        this.#counts.exported += spans.length;
      } else {
        this.#counts.failed += spans.length;
        this.#onFailure(spans.length, result.error);
      }
      resultCallback(result);
    });
  }

  shutdown(): Promise<void> {
    return this.#inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.#inner.forceFlush?.() ?? Promise.resolve();
  }
}
