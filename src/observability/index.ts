export {
  DEFAULT_CHECKPOINT_DURATION_BUCKETS,
  DEFAULT_CHECKPOINT_SIZE_BUCKETS,
  DEFAULT_CONVERSATION_DISPATCH_BUCKETS,
  DEFAULT_CONVERSATION_DURATION_BUCKETS,
  DEFAULT_CONVERSATION_TOKEN_BUCKETS,
  DEFAULT_DISPATCH_DURATION_BUCKETS,
} from './metric-buckets.ts';
export { BUILT_IN_REASONS } from './metrics.ts';
export type { PrometheusRegistry } from './registry.ts';
export {
  createExportTracker,
  type ExportResultLike,
  ExportTracker,
  type ExportTrackerOptions,
  type SpanExporterLike,
} from './sampling/export-tracking.ts';
export { ConversationSampler, createConversationSampler } from './sampling/sampler.ts';
export type {
  ConversationSamplerOptions,
  SampledSpan,
  SpanProcessorLike,
  StartedSpan,
} from './sampling/types.ts';
export * as semconv from './semconv.ts';
export {
  createStoreMetrics,
  StoreMetrics,
  type StoreMetricsOptions,
  type StoreReadFailure,
} from './store-metrics.ts';
export { ConversationTelemetry, createConversationTelemetry } from './telemetry.ts';
export type { TelemetryOptions } from './types.ts';
