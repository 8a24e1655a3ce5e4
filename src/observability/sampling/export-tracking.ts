/**
 * What the exporter really delivered. Exemplars and trace links are promises that a trace can be
 * opened; with the collector unreachable, a service kept writing trace-id exemplars for traces of
 * which not one span arrived. The tracker wraps the exporter, hears each export's result, and
 * remembers (a bounded set) the traces of which a batch was delivered. On a registry, it becomes
 * the exemplars' gate: a conversation's exemplars wait (bounded) until a batch of its trace is
 * delivered, and are let go when the batch fails.
 */
import type { SpanContext } from '@opentelemetry/api';
import { positiveInteger } from '../../core/shared/validate.ts';
import { addExemplarFilter } from '../exemplar-filter.ts';
import { asRegistry, type PrometheusRegistry } from '../registry.ts';
import { optionsObject, withMethods } from '../shape.ts';

/** An export's result, as the SDK's `ExportResult` has it (`code` 0 is success). */
export interface ExportResultLike {
  /** The SDK's `ExportResultCode`: 0 success, 1 failure. */
  readonly code: number;
  /** Why the export failed, when it did. */
  readonly error?: Error;
}

/** An OpenTelemetry SDK span exporter (`OTLPTraceExporter`, `InMemorySpanExporter`, ...). */
export interface SpanExporterLike {
  /** Exports a batch and calls back once with its result. */
  export(
    spans: readonly { spanContext(): SpanContext }[],
    resultCallback: (result: ExportResultLike) => void,
  ): void;
  /** Flushes and stops. */
  shutdown(): Promise<void>;
  /** Exports what is waiting. */
  forceFlush?(): Promise<void>;
}

/** What `createExportTracker(options)` takes: only `exporter` is required. */
export interface ExportTrackerOptions {
  /**
   * The exporter whose results are tracked; give the tracker to the span processor in its place.
   * @example new OTLPTraceExporter()
   */
  readonly exporter: SpanExporterLike;
  /**
   * The telemetry's registry: its exemplars then point only at traces of which a batch was
   * delivered (written once it is; never when it fails). Without a tracker on it, the registry
   * shows no exemplars: nothing else knows what was delivered.
   * @default undefined (the tracker gates no registry's exemplars)
   */
  readonly registry?: PrometheusRegistry;
  /**
   * Traces remembered as delivered (the oldest forgotten first), and traces whose exemplars or
   * callbacks may wait for their delivery at once.
   * @default 10000
   */
  readonly maxTraces?: number;
}

const SUCCESS = 0;

/** The exporter, wrapped: register it where the exporter was. */
export class ExportTracker implements SpanExporterLike {
  readonly #inner: SpanExporterLike;
  readonly #max: number;
  /** Delivered traces, oldest first. */
  readonly #delivered = new Map<string, true>();
  /** Waiting for a delivery: called with true when a batch of the trace is delivered, false when it fails. */
  readonly #waiting = new Map<string, ((delivered: boolean) => void)[]>();

  constructor(options: ExportTrackerOptions) {
    optionsObject(options);
    withMethods(
      'exporter',
      options.exporter,
      ['export', 'shutdown'],
      'a span exporter (export, shutdown)',
    );
    this.#inner = options.exporter;
    this.#max = positiveInteger('maxTraces', options.maxTraces ?? 10_000);
    if (options.registry !== undefined) {
      addExemplarFilter(asRegistry(options.registry), {
        kept: (traceId) => this.exported(traceId),
        defer: (traceId, write) => {
          this.whenExported(traceId, (delivered) => {
            if (delivered) write();
          });
          return true;
        },
      });
    }
  }

  /** Whether a batch holding a span of the trace was delivered (among the last `maxTraces`). */
  exported(traceId: string): boolean {
    return this.#delivered.has(traceId);
  }

  /**
   * Calls `callback(true)` once a batch of the trace is delivered (at once if one was), or
   * `callback(false)` when a batch of it fails or the wait is forgotten (past `maxTraces` traces
   * waiting, the oldest first). A trace the sampler dropped never reaches the exporter: its wait
   * ends when forgotten.
   */
  whenExported(traceId: string, callback: (delivered: boolean) => void): void {
    if (this.#delivered.has(traceId)) {
      callback(true);
      return;
    }
    const waiting = this.#waiting.get(traceId);
    if (waiting !== undefined) {
      waiting.push(callback);
      return;
    }
    this.#waiting.set(traceId, [callback]);
    if (this.#waiting.size > this.#max) {
      const oldest = this.#waiting.keys().next().value as string;
      this.#settle(oldest, false);
    }
  }

  export(
    spans: readonly { spanContext(): SpanContext }[],
    resultCallback: (result: ExportResultLike) => void,
  ): void {
    this.#inner.export(spans, (result) => {
      const delivered = result.code === SUCCESS;
      const traces = new Set<string>();
      for (const span of spans) traces.add(span.spanContext().traceId);
      for (const traceId of traces) {
        if (delivered) this.#remember(traceId);
        this.#settle(traceId, delivered);
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

  #remember(traceId: string): void {
    this.#delivered.delete(traceId);
    this.#delivered.set(traceId, true);
    if (this.#delivered.size > this.#max) {
      this.#delivered.delete(this.#delivered.keys().next().value as string);
    }
  }

  #settle(traceId: string, delivered: boolean): void {
    const waiting = this.#waiting.get(traceId);
    if (waiting === undefined) return;
    this.#waiting.delete(traceId);
    for (const callback of waiting) {
      try {
        callback(delivered);
      } catch {
        // A waiter's failure is its own: the export's result still reaches the processor.
      }
    }
  }
}

/**
 * Wraps the exporter so that exemplars (and the app's trace links, through `exported()` and
 * `whenExported()`) point only at traces it delivered:
 * `new BatchSpanProcessor(createExportTracker({ exporter: new OTLPTraceExporter(), registry }))`.
 */
export function createExportTracker(options: ExportTrackerOptions): ExportTracker {
  return new ExportTracker(options);
}
