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
  type SpanProcessor,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { type OpenMetricsContentType, Registry } from 'prom-client';
import {
  type ConversationSamplerOptions,
  createConversationSampler,
  createExportTracker,
  type PrometheusRegistry,
} from '../../src/observability/index.ts';

/** An OpenMetrics registry (set before any metric is created, as exemplars need). */
export function openMetricsRegistry(): Registry<OpenMetricsContentType> {
  const registry = new Registry<OpenMetricsContentType>();
  registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  return registry;
}

/** The tracing, its one processor made by `processor` from the tracker's simple processor. */
function tracedThrough<P extends SpanProcessor>(
  registry: PrometheusRegistry,
  processor: (next: SimpleSpanProcessor) => P,
  spanLimits?: SpanLimits,
) {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const exporter = new InMemorySpanExporter();
  const tracker = createExportTracker({ exporter, registry });
  const first = processor(new SimpleSpanProcessor({ exporter: tracker }));
  const provider = new TracerProvider({
    spanProcessors: [first],
    ...(spanLimits ? { spanLimits } : {}),
  });
  trace.setGlobalTracerProvider(provider);
  return { exporter, tracker, provider, tracer: provider.getTracer('test'), processor: first };
}

export function deliveredTracing(registry: PrometheusRegistry, spanLimits?: SpanLimits) {
  const { processor: _, ...tracing } = tracedThrough(registry, (next) => next, spanLimits);
  return tracing;
}

/** The same with a conversation sampler of `options` (its metrics on `registry`) in front. */
export function sampledDeliveredTracing(
  registry: PrometheusRegistry,
  options: Partial<ConversationSamplerOptions>,
) {
  const { processor: sampler, ...tracing } = tracedThrough(registry, (next) =>
    createConversationSampler({ next, registry, ...options }),
  );
  return { ...tracing, sampler };
}
