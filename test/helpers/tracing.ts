import {
  context,
  type DiagLogger,
  DiagLogLevel,
  diag,
  propagation,
  trace,
} from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import {
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
  type SpanLimits,
  TracerProvider,
} from '@opentelemetry/sdk-trace';
import { Registry } from 'prom-client';
import { createConversationTelemetry } from '../../src/observability/index.ts';

/**
 * A tracer provider exporting to memory, registered globally (so spans a responder starts with
 * `trace.getTracer(...)`, as an instrumentation would, go to it too), with the
 * AsyncLocalStorage context manager that `@opentelemetry/sdk-node` registers. Call
 * `restoreTracing()` in `afterEach`.
 */
export function memoryTracing(spanLimits?: SpanLimits) {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const exporter = new InMemorySpanExporter();
  const provider = new TracerProvider({
    spanProcessors: [new SimpleSpanProcessor({ exporter: exporter })],
    ...(spanLimits ? { spanLimits } : {}),
  });
  trace.setGlobalTracerProvider(provider);
  return { exporter, provider, tracer: provider.getTracer('test') };
}

/** Undoes every global that a test may have set: context manager, tracer provider, diag logger. */
export function restoreTracing(): void {
  context.disable();
  trace.disable();
  propagation.disable();
  diag.disable();
}

/** Collects the OpenTelemetry diagnostics at WARN and above (the SDK reports misuse there). */
export function captureDiag(): string[] {
  const messages: string[] = [];
  const keep =
    (level: string) =>
    (message: string, ...args: unknown[]) =>
      messages.push(`${level}: ${message} ${args.map(String).join(' ')}`.trim());
  diag.setLogger(
    {
      error: keep('error'),
      warn: keep('warn'),
      info: () => {},
      debug: () => {},
      verbose: () => {},
    },
    { logLevel: DiagLogLevel.WARN, suppressOverrideMessage: true },
  );
  return messages;
}

export function spansNamed(exporter: InMemorySpanExporter, name: string): ReadableSpan[] {
  return exporter.getFinishedSpans().filter((s) => s.name === name);
}

/** The dispatch counts of a span's `conversation.dispatch` events, in order. */
export function dispatchCounts(span: ReadableSpan | undefined): number[] {
  return (span?.events ?? [])
    .filter((e) => e.name === 'conversation.dispatch')
    .map((e) => e.attributes?.['conversation.dispatch.count'] as number);
}

/** 1..n */
export function range(from: number, to: number): number[] {
  return Array.from({ length: Math.max(0, to - from + 1) }, (_, i) => from + i);
}

/** A `DiagLogger` that keeps its warnings (for the plugin's `logger` option). */
export function warningsLogger(): { logger: DiagLogger; warnings: string[] } {
  const warnings: string[] = [];
  const ignore = () => {};
  return {
    warnings,
    logger: {
      warn: (message: string) => warnings.push(message),
      error: ignore,
      info: ignore,
      debug: ignore,
      verbose: ignore,
    },
  };
}

/**
 * A telemetry of number conversations on a fresh registry with the options `caps` (its label
 * caps), its logger's warnings collected.
 */
export function cappedTelemetry(
  caps: Omit<
    NonNullable<Parameters<typeof createConversationTelemetry<number, number>>[0]>,
    'registry' | 'logger'
  >,
) {
  const registry = new Registry();
  const { logger, warnings } = warningsLogger();
  const telemetry = createConversationTelemetry<number, number>({ registry, logger, ...caps });
  return { registry, warnings, telemetry };
}
