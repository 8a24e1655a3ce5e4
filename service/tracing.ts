/**
 * Traces leave through @opentelemetry/sdk-node and OTLP/HTTP when the standard variables ask for
 * it. The plugin only uses @opentelemetry/api; this is the application's side.
 *
 * The exporter is wrapped to count what it delivered and what it failed to, so an endpoint that
 * is down is reported while the service runs, and the shutdown line says what really happened.
 * The flush at shutdown is bounded: an endpoint that accepts connections and never answers would
 * otherwise hold the process for the exporter's own timeout (10 s), past `docker stop`'s grace.
 */
import { type ExportResult, ExportResultCode } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { NodeSDK } from '@opentelemetry/sdk-node';
import {
  BatchSpanProcessor,
  type ReadableSpan,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace-base';

export interface TracingOptions {
  /** The plugin keeps this many dispatch events per conversation span; the SDK keeps as many. */
  readonly maxDispatchEvents: number;
  /** Longest wait at shutdown for spans to reach the endpoint, ms. */
  readonly flushTimeoutMs: number;
  /** Called after every failed export with its span count and error. */
  readonly onExportFailure: (spans: number, error: Error | undefined) => void;
}

/** What became of the spans that ended, as far as the exporter knows. */
export interface FlushReport {
  readonly exported: number;
  readonly failed: number;
  /** Ended but neither delivered nor failed: still queued or in flight when the flush gave up. */
  readonly unflushed: number;
  /** The flush was cut off at `flushTimeoutMs`. */
  readonly timedOut: boolean;
}

export interface Tracing {
  /** A one-line description for the terminal. */
  readonly description: string;
  /** Flushes (within `flushTimeoutMs`) and stops the exporter; never rejects. */
  shutdown(): Promise<FlushReport | undefined>;
}

export function startTracing(env: NodeJS.ProcessEnv, options: TracingOptions): Tracing {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint || env.OTEL_SDK_DISABLED === 'true') {
    return {
      description:
        'tracing off: set OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 (and OTEL_SERVICE_NAME) to export traces over OTLP/HTTP',
      shutdown: () => Promise.resolve(undefined),
    };
  }
  // Metrics are served to Prometheus on /metrics; the SDK exports traces only.
  env.OTEL_METRICS_EXPORTER ??= 'none';
  env.OTEL_LOGS_EXPORTER ??= 'none';
  const counts = { ended: 0, exported: 0, failed: 0 };
  const exporter = new CountingExporter(new OTLPTraceExporter(), counts, options.onExportFailure);
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME || 'conversation-orchestrator-demo',
    spanProcessors: [new EndedSpans(counts), new BatchSpanProcessor(exporter)],
    instrumentations: [],
    spanLimits: { eventCountLimit: options.maxDispatchEvents },
  });
  sdk.start();
  return {
    description: `tracing on: OTLP/HTTP to ${endpoint}`,
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
        unflushed: Math.max(0, counts.ended - counts.exported - counts.failed),
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
  if (report.unflushed > 0) {
    parts.push(
      report.timedOut
        ? `${report.unflushed} not flushed (gave up after ${flushTimeoutMs} ms)`
        : `${report.unflushed} not flushed`,
    );
  }
  return parts.join(', ');
}

/** Counts the sampled spans that end: those the batch processor is given to export. */
class EndedSpans implements SpanProcessor {
  readonly #counts: { ended: number };
  constructor(counts: { ended: number }) {
    this.#counts = counts;
  }
  onStart(): void {}
  onEnd(span: ReadableSpan): void {
    if ((span.spanContext().traceFlags & 1) === 1) this.#counts.ended++;
  }
  forceFlush(): Promise<void> {
    return Promise.resolve();
  }
  shutdown(): Promise<void> {
    return Promise.resolve();
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
