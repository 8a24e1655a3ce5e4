/**
 * Trace context across the queue: the producer's active context goes into the job's data through
 * the globally registered propagator (W3C `traceparent`/`tracestate` with the SDK's defaults) and
 * the worker runs the segment inside the extracted context. With no propagator registered (no
 * SDK) both are no-ops: the API only, never an SDK import.
 */
import { type Context, context, propagation, ROOT_CONTEXT } from '@opentelemetry/api';

/** The active context as carrier fields, or `undefined` when the propagator writes none. */
export function injectTrace(): Record<string, string> | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return Object.keys(carrier).length === 0 ? undefined : carrier;
}

/** Runs `fn` in the context carried by `trace` (the root context when there is none). */
export function withTrace<T>(trace: Readonly<Record<string, string>> | undefined, fn: () => T): T {
  const ctx: Context =
    trace === undefined ? ROOT_CONTEXT : propagation.extract(ROOT_CONTEXT, { ...trace });
  return context.with(ctx, fn);
}
