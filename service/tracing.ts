/**
 * Traces leave through @opentelemetry/sdk-node and OTLP/HTTP when the standard variables ask for
 * it. The plugin only uses @opentelemetry/api; this is the application's side.
 */
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { NodeSDK } from '@opentelemetry/sdk-node';

export interface Tracing {
  /** A one-line description for the terminal. */
  readonly description: string;
  /** Flushes and stops the exporter. */
  shutdown(): Promise<void>;
}

export function startTracing(env: NodeJS.ProcessEnv, maxDispatchEvents: number): Tracing {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT;
  if (!endpoint || env.OTEL_SDK_DISABLED === 'true') {
    return {
      description:
        'tracing off: set OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 (and OTEL_SERVICE_NAME) to export traces over OTLP/HTTP',
      shutdown: () => Promise.resolve(),
    };
  }
  // Metrics are served to Prometheus on /metrics; the SDK exports traces only.
  env.OTEL_METRICS_EXPORTER ??= 'none';
  env.OTEL_LOGS_EXPORTER ??= 'none';
  const sdk = new NodeSDK({
    serviceName: env.OTEL_SERVICE_NAME || 'conversation-orchestrator-demo',
    traceExporter: new OTLPTraceExporter(),
    instrumentations: [],
    // The plugin keeps `maxDispatchEvents` per conversation span; let the SDK keep as many.
    spanLimits: { eventCountLimit: maxDispatchEvents },
  });
  sdk.start();
  return {
    description: `tracing on: OTLP/HTTP to ${endpoint}`,
    shutdown: () => sdk.shutdown(),
  };
}
