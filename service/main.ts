/**
 * `npm start`: a live, instrumented conversation service. Trading desks converge on prices in a
 * continuous mix of calm, thin, choppy, slow, broken and abandoned markets, so every dashboard
 * panel and alert has something real to show. Serves /metrics, /healthz and a WebSocket at /ws.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type OpenMetricsContentType, Registry } from 'prom-client';
import { ConversationError, type ConversationOrchestrator } from '../src/index.ts';
import { createConversationTelemetry } from '../src/observability/index.ts';
import { ConfigError, parseConfig, usage } from './config.ts';
import { exposition } from './exposition.ts';
import { LiveUpdates } from './live.ts';
import {
  type Book,
  createDeskOrchestrator,
  type DeskMessage,
  market,
  pickScenario,
} from './market.ts';
import { Progress } from './progress.ts';
import { startTracing } from './tracing.ts';

const MAX_DISPATCH_EVENTS = 128;

async function main(): Promise<number> {
  let config: ReturnType<typeof parseConfig>;
  try {
    config = parseConfig(process.argv.slice(2), process.env);
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\n`);
      return 2;
    }
    throw error;
  }
  if (config === 'help') {
    process.stdout.write(`${usage()}\n`);
    return 0;
  }
  const cfg = config;

  const tracing = startTracing(process.env, MAX_DISPATCH_EVENTS);
  // OpenMetrics (for exemplars) must be set before the metrics are created.
  const registry = new Registry() as unknown as Registry<OpenMetricsContentType>;
  registry.setContentType(Registry.OPENMETRICS_CONTENT_TYPE);
  const telemetry = createConversationTelemetry<Book, DeskMessage>({
    registry,
    maxDispatchEvents: MAX_DISPATCH_EVENTS,
    stateAttributes: (state) => ({ 'desks.spread': state.projection.spread }),
  });
  const live = new LiveUpdates();

  const orchestrators: ConversationOrchestrator<Book, DeskMessage>[] = [
    ['fx_desks', cfg.desks],
    ['rates_desks', Math.min(cfg.desks + 1, 8)],
  ].map(([name, desks]) =>
    createDeskOrchestrator(
      name as string,
      desks as number,
      cfg,
      [telemetry],
      (state, decision, dispatchCount, elapsedMs) =>
        live.publish({
          type: 'dispatch',
          orchestrator: name as string,
          conversationId: state.conversationId,
          dispatchCount,
          spread: state.projection.spread,
          decision,
          elapsedMs,
        }),
    ),
  );

  const server = createServer((req, res) => {
    const path = new URL(req.url ?? '/', 'http://localhost').pathname;
    if (req.method === 'GET' && path === '/metrics') {
      exposition(registry, req.headers).then(
        ({ contentType, body }) => res.writeHead(200, { 'content-type': contentType }).end(body),
        (error: unknown) => res.writeHead(500).end(String(error)),
      );
    } else if (req.method === 'GET' && path === '/healthz') {
      res.writeHead(stopping ? 503 : 200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: stopping ? 'stopping' : 'ok', inFlight: inFlight.size }));
    } else {
      res
        .writeHead(404, { 'content-type': 'text/plain' })
        .end('not found: try /metrics, /healthz or /ws\n');
    }
  });
  live.attach(server);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(cfg.port, cfg.host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  process.stdout.write(
    `conversation-orchestrator demo listening on http://${cfg.host}:${port} (/metrics, /healthz, ws://${cfg.host}:${port}/ws)\n${tracing.description}\n`,
  );

  // The workload: start conversations at `rate` per second, at most `concurrency` at once.
  const progress = new Progress();
  const inFlight = new Map<Promise<unknown>, AbortController>();
  let stopping = false;
  let started = 0;
  const startOne = () => {
    const scenario = pickScenario(cfg.mix);
    const orchestrator = orchestrators[
      started++ % orchestrators.length
    ] as ConversationOrchestrator<Book, DeskMessage>;
    const desks = orchestrator.responderNames.length;
    const controller = new AbortController();
    let abandon: NodeJS.Timeout | undefined;
    if (scenario === 'abort')
      abandon = setTimeout(
        () => controller.abort(new Error('trader left')),
        50 + Math.random() * 250,
      );
    const run = orchestrator
      .run(
        { sender: 'market', content: { market: market(scenario, desks, cfg) } },
        { signal: controller.signal },
      )
      .then(
        (result) => progress.record(result.decision.reason, result.dispatchCount, result.elapsedMs),
        (error: unknown) => {
          if (!(error instanceof ConversationError)) throw error;
          progress.record(error.reason, error.dispatchCount, error.elapsedMs);
        },
      )
      .finally(() => {
        clearTimeout(abandon);
        inFlight.delete(run);
      });
    inFlight.set(run, controller);
  };
  const intervalMs = 1000 / cfg.rate;
  let due = performance.now();
  const ticker = setInterval(
    () => {
      const now = performance.now();
      while (due <= now && !stopping) {
        due += intervalMs;
        if (inFlight.size < cfg.concurrency) startOne();
      }
      if (due < now - 1000) due = now; // do not burst after a stall
    },
    Math.max(1, Math.min(intervalMs, 50)),
  );
  const tty = process.stdout.isTTY === true;
  const progressTimer = setInterval(() => {
    const line = progress.line(inFlight.size);
    process.stdout.write(tty ? `\r${line}\u001b[K` : `${line}\n`);
  }, cfg.progressSeconds * 1000);

  // Graceful shutdown: abort in-flight conversations (recorded as aborted), flush spans, close.
  return new Promise<number>((resolve) => {
    const shutdown = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      clearInterval(ticker);
      clearInterval(progressTimer);
      const aborting = inFlight.size;
      for (const controller of inFlight.values())
        controller.abort(new Error(`service stopping (${signal})`));
      await Promise.allSettled([...inFlight.keys()]);
      await tracing
        .shutdown()
        .catch((error: unknown) => process.stderr.write(`span flush failed: ${String(error)}\n`));
      await live.close();
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      process.stdout.write(
        `${tty ? '\n' : ''}${signal}: aborted ${aborting} in-flight conversations, flushed spans, closed. ${progress.summary()}\n`,
      );
      resolve(0);
    };
    process.once('SIGINT', () => void shutdown('SIGINT'));
    process.once('SIGTERM', () => void shutdown('SIGTERM'));
  });
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(
      `${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
    );
    process.exit(1);
  },
);
