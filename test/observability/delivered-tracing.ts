/**
 * In-memory tracing whose exporter is wrapped in an export tracker on `registry`: exemplars point
 * only at delivered traces, so a test that expects exemplars gives the registry its tracker, as an
 * application does (`createExportTracker({ exporter, registry })`).
 */
import { context, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  InMemorySpanExporter,
  SimpleSpanProcessor,
  type SpanLimits,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { createExportTracker, type PrometheusRegistry } from '../../src/observability/index.ts';

export function deliveredTracing(registry: PrometheusRegistry, spanLimits?: SpanLimits) {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const exporter = new InMemorySpanExporter();
  const tracker = createExportTracker({ exporter, registry });
  const provider = new TracerProvider({
    spanProcessors: [new SimpleSpanProcessor({ exporter: tracker })],
    ...(spanLimits ? { spanLimits } : {}),
  });
  trace.setGlobalTracerProvider(provider);
  return { exporter, tracker, provider, tracer: provider.getTracer('test') };
}
