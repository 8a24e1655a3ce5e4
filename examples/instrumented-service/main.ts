/**
 * A complete instrumented service in one file: the OpenTelemetry SDK exporting spans over OTLP,
 * the conversation telemetry, Prometheus metrics on GET /metrics, and a graceful shutdown on
 * SIGTERM or SIGINT that aborts what is in flight and flushes the spans within a bound.
 *
 *   PORT=9465 OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 npx tsx examples/instrumented-service/main.ts
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { NodeSDK } from '@opentelemetry/sdk-node';
import {
  ConversationError,
  ConversationOrchestrator,
  type Responder,
  roundRobin,
} from 'conversation-orchestrator';
import { createConversationTelemetry } from 'conversation-orchestrator/observability';
import { type OpenMetricsContentType, Registry } from 'prom-client';
import { book, DESKS, type Quotes, settled, spread, towardPeers } from '../desks.ts';

// 1. The SDK first, before anything asks for a tracer. The exporter posts OTLP as JSON to
// OTEL_EXPORTER_OTLP_ENDPOINT (default http://localhost:4318); NodeSDK also registers the
// AsyncLocalStorage context manager, so spans a responder starts nest under its conversation.
const sdk = new NodeSDK({
  serviceName: process.env.OTEL_SERVICE_NAME ?? 'desks-service',
  traceExporter: new OTLPTraceExporter({ timeoutMillis: 2_000 }),
});
sdk.start();

// 2. Metrics on a registry of our own (never prom-client's global one), in OpenMetrics so the
// histograms carry exemplars: the trace id of a conversation, one click from Grafana to Jaeger.
const registry = new Registry<OpenMetricsContentType>();
registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
const telemetry = createConversationTelemetry<Quotes, number>({
  registry,
  stateAttributes: (state) => ({ 'desks.spread': spread(state.projection) }),
});

// 3. The conversations: the quick start's desks (examples/desks.ts), halving their gap to their
// peers' mean, but taking a few milliseconds to quote, as a remote venue would.
const desk = (name: string): Responder<Quotes, number> => ({
  name,
  respond: async (_message, state, context) => {
    await sleep(1 + Math.random() * 4, undefined, { signal: context.signal });
    return { sender: name, content: towardPeers(state.projection, name, 1 / 2) };
  },
});
const orchestrator = new ConversationOrchestrator<Quotes, number>({
  name: 'desks',
  responders: DESKS.map(desk),
  turnPolicy: roundRobin(),
  projection: book(() => ({ london: 100 + Math.random() * 10, new_york: 100, tokyo: 95 })),
  // Converged within 0.01 for 3 dispatches in a row, or 200 dispatches.
  termination: settled(200),
  observers: [telemetry],
});

// 4. Start a conversation every 50 ms; each one can be aborted at shutdown.
const inFlight = new Set<Promise<unknown>>();
const shutdown = new AbortController();
const ended = { finished: 0, aborted: 0 };
const starter = setInterval(() => {
  const run = orchestrator
    .run({ sender: 'market', content: 0 }, { signal: shutdown.signal })
    .then(
      () => ended.finished++,
      (error: unknown) => {
        if (error instanceof ConversationError && error.reason === 'aborted') ended.aborted++;
        else console.error('conversation failed:', error);
      },
    )
    .finally(() => inFlight.delete(run));
  inFlight.add(run);
}, 50);

// 5. /metrics in the registry's format, /healthz for probes (503 once shutting down).
const server = createServer((request, response) => {
  if (request.method !== 'GET') {
    response.writeHead(405).end();
  } else if (request.url === '/metrics') {
    registry.metrics().then(
      (text) => response.writeHead(200, { 'Content-Type': registry.contentType }).end(text),
      () => response.writeHead(500).end(),
    );
  } else if (request.url === '/healthz') {
    response.writeHead(shutdown.signal.aborted ? 503 : 200).end();
  } else {
    response.writeHead(404).end();
  }
});
server.headersTimeout = 10_000;
server.requestTimeout = 30_000;
server.listen(Number(process.env.PORT ?? 9465), process.env.HOST ?? '127.0.0.1', () => {
  const { address, port } = server.address() as AddressInfo;
  console.log(`listening on http://${address}:${port}/metrics`);
});

// 6. Graceful shutdown, bounded: stop starting conversations, abort those in flight (their spans
// end as `aborted`), stop accepting connections, then flush the spans for at most 3 s.
let stopping = false;
async function stop(signal: string): Promise<void> {
  if (stopping) return; // a second signal during shutdown changes nothing
  stopping = true;
  clearInterval(starter);
  shutdown.abort();
  await Promise.allSettled([...inFlight]);
  server.close();
  server.closeIdleConnections();
  const flushed = await Promise.race([
    sdk.shutdown().then(
      () => 'spans flushed',
      (error: unknown) => `spans not exported (${error})`,
    ),
    sleep(3_000, 'gave up flushing spans after 3000 ms'),
  ]);
  console.log(
    `${signal}: ${ended.finished} conversations finished, ${ended.aborted} aborted in flight, ${flushed}`,
  );
  process.exit(0);
}
process.on('SIGTERM', () => void stop('SIGTERM'));
process.on('SIGINT', () => void stop('SIGINT'));
