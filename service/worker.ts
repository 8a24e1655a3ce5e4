/**
 * A worker process of the demo's fleet mode (`npm start -- --redis … --workers N` spawns them; a
 * Kubernetes Deployment or docker-compose runs them alone): the same desks' orchestrators as the
 * single-process service, on the store the fleet shares, run by `createConversationWorker`. Each
 * dispatch and ending goes to the producer's page over Redis pub/sub (fleet-updates.ts), marked
 * with this worker's id. SIGTERM, SIGINT or SIGHUP drains: running segments stop at a commit point and
 * go back to the queue for another worker, within WORKER_DRAIN_MS.
 *
 * Configuration: the service's own flags and variables (`--redis`, `--store`, `--desks`,
 * `--tolerance`, …), plus WORKER_ID (default `{hostname}-{pid}`) and, for `npm run chaos`,
 * HEARTBEAT_FILE: a file touched every 5 s (a container's healthcheck reads its age); and
 * INVOCATION_LOG: a file getting one JSON line per responder invocation and per crash resume
 * (appended with one synchronous write each, so a SIGKILL loses none written); and
 * WORKER_METRICS_PORT: serve `/metrics` (the conversations' metrics, the store's gauges, the queue
 * metrics, the process's health) and `/healthz` on this port of `--host` (0: any free port, said
 * on stdout), for Prometheus to scrape each worker.
 */
// First: SIGTERM, SIGINT and SIGHUP are handled from here on (one while starting exits 0 at once).
import './signals.ts';
import { appendFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { Redis } from 'ioredis';
import { createConversationWorker } from '../src/fleet/index.ts';
import type { ConversationObserver } from '../src/index.ts';
import { createConversationTelemetry, createStoreMetrics } from '../src/observability/index.ts';
import { ConfigError, parseConfig } from './config.ts';
import { type Book, createDeskOrchestrator, type DeskMessage } from './desks/market.ts';
import { FLEET_TIMING, openFleetStore } from './fleet/fleet-store.ts';
import { UpdatePublisher, updatesChannel } from './fleet/fleet-updates.ts';
import { DEMO_ORCHESTRATORS, DEMO_QUEUE, WORKER_DRAIN_MS } from './fleet/worker-names.ts';
import { SharedExposition } from './http/exposition.ts';
import { createServiceRegistry } from './http/health-metrics.ts';
import { dispatchUpdate, endUpdate } from './live/updates.ts';
import { onStopSignal } from './signals.ts';

let config: ReturnType<typeof parseConfig>;
try {
  const args =
    process.env.FLEET_ARGS === undefined
      ? process.argv.slice(2)
      : JSON.parse(process.env.FLEET_ARGS);
  config = parseConfig(args as string[], process.env);
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`${error.message}\n`);
  process.exit(2);
}
if (config === 'help' || config.redis === undefined) {
  process.stderr.write('a worker needs --redis redis://… (and takes the service flags)\n');
  process.exit(2);
}
const cfg = config;
const redisUrl = config.redis as string;
const workerId = process.env.WORKER_ID ?? `${hostname()}-${process.pid}`;
// WORKER_METRICS_PORT: this worker's /metrics (read before anything starts: a bad value exits 2).
const metricsPortText = process.env.WORKER_METRICS_PORT;
const metricsPort =
  metricsPortText === undefined || metricsPortText === '' ? undefined : Number(metricsPortText);
if (
  metricsPort !== undefined &&
  (!/^\d{1,5}$/.test(metricsPortText as string) || (metricsPort as number) > 65_535)
) {
  process.stderr.write(
    `Expected WORKER_METRICS_PORT to be a port number from 0 to 65535, got \`${metricsPortText}\`\n`,
  );
  process.exit(2);
}
const store = openFleetStore(redisUrl, cfg.store);
const publisherClient = new Redis(redisUrl, { maxRetriesPerRequest: 1, lazyConnect: false });
publisherClient.on('error', () => {});
const updates = new UpdatePublisher(publisherClient, updatesChannel(DEMO_QUEUE));
const logFile = process.env.INVOCATION_LOG;
const log = (entry: object) =>
  logFile !== undefined &&
  appendFileSync(logFile, `${JSON.stringify({ ...entry, worker: workerId })}\n`);

/** Tells the page how each conversation ended (a drained or fenced segment has not ended). */
const endings: ConversationObserver<Book, DeskMessage> = {
  startConversation(start) {
    if (start.resumed?.cause === 'crash') log({ resumed: start.conversationId });
    return {
      onResponderStart(_index, _message, attempt) {
        log({ invoked: start.conversationId, attempt });
      },
      onConversationEnd(end) {
        const over = end.ok ? end.result : end.error;
        // Suspended: waiting in the store for a person, held by no worker, so no longer in flight.
        if (end.ok && end.result.suspended !== undefined) {
          updates.publish({
            type: 'suspended',
            orchestrator: start.orchestrator,
            conversationId: start.conversationId,
            worker: workerId,
          });
          return;
        }
        // Drained, fenced or failed to store: it stays resumable and ends in a later segment.
        if (end.ended === false) return;
        const reason = end.ok ? end.result.decision.reason : end.error.reason;
        updates.publish(
          endUpdate(start.orchestrator, start.conversationId, reason, over, { worker: workerId }),
        );
      },
    };
  },
};

const registry = metricsPort === undefined ? undefined : createServiceRegistry();
const observers: ConversationObserver<Book, DeskMessage>[] =
  registry === undefined ? [endings] : [createConversationTelemetry({ registry }), endings];
if (registry !== undefined) createStoreMetrics({ store, registry, timeoutMs: 1_000 });

const orchestrators = DEMO_ORCHESTRATORS.map((name, i) =>
  createDeskOrchestrator(
    name,
    Math.min(cfg.desks + i, 8),
    cfg,
    observers,
    store,
    (state, decision, dispatchCount, elapsedMs) =>
      updates.publish(
        dispatchUpdate(name, state, decision, dispatchCount, elapsedMs, { worker: workerId }),
      ),
    FLEET_TIMING.leaseMs,
  ),
);

const worker = createConversationWorker({
  connection: redisUrl,
  queueName: DEMO_QUEUE,
  store,
  orchestrators,
  concurrency: cfg.concurrency,
  lockDurationMs: FLEET_TIMING.lockDurationMs,
  stalledIntervalMs: FLEET_TIMING.stalledIntervalMs,
  onEvent: (event) => process.stderr.write(`${workerId}: ${event.type}: ${event.message}\n`),
  ...(registry === undefined ? {} : { registry }),
});

const exposition = registry === undefined ? undefined : new SharedExposition(registry);
const metricsServer =
  exposition === undefined
    ? undefined
    : createServer((req, res) => {
        const path = (req.url ?? '/').split('?')[0];
        if (req.method !== 'GET' && req.method !== 'HEAD') {
          res
            .writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' })
            .end('read only\n');
        } else if (path === '/metrics') {
          exposition.get(req.headers).then(
            ({ contentType, body }) =>
              res.writeHead(200, { 'content-type': contentType }).end(body),
            (error: unknown) => res.writeHead(500).end(String(error)),
          );
        } else if (path === '/healthz') {
          res.writeHead(stopping ? 503 : 200, { 'content-type': 'application/json' });
          res.end(JSON.stringify({ status: stopping ? 'stopping' : 'ok', worker: workerId }));
        } else {
          res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
        }
      });
let stopping = false;
const stop = async (signal: string) => {
  if (stopping) return;
  stopping = true;
  await worker.close({ timeoutMs: WORKER_DRAIN_MS });
  await updates.flush();
  const s = worker.stats();
  process.stdout.write(
    `${workerId} ${signal}: drained (${s.ended} segments ended, ${s.suspended} suspended, ${s.handedBack} handed back)\n`,
  );
  metricsServer?.close();
  metricsServer?.closeAllConnections();
  await Promise.allSettled([store.close(), publisherClient.quit()]);
  process.exit(0);
};
// SIGTERM, SIGINT and SIGHUP (a closed terminal) drain, also while the worker gets ready.
onStopSignal((signal) => void stop(signal));
await worker.ready(30_000);
if (metricsServer !== undefined) {
  await new Promise<void>((resolve, reject) => {
    metricsServer.once('error', reject);
    metricsServer.listen(metricsPort, cfg.host, () => resolve());
  }).catch((error: Error) => {
    process.stderr.write(
      `Cannot listen on --host ${cfg.host} WORKER_METRICS_PORT ${metricsPort}: ${error.message}\n`,
    );
    process.exit(2);
  });
  const bound = metricsServer.address() as AddressInfo;
  const shownHost = bound.family === 'IPv6' ? `[${bound.address}]` : bound.address;
  process.stdout.write(`${workerId} metrics on http://${shownHost}:${bound.port}/metrics\n`);
}
process.stdout.write(
  `${workerId} ready (pid ${process.pid}), running ${DEMO_ORCHESTRATORS.join(', ')}\n`,
);

// HEARTBEAT_FILE (docker-compose's healthcheck): touched from the event loop while it turns.
const heartbeat = process.env.HEARTBEAT_FILE;
if (heartbeat !== undefined) {
  const touch = () => writeFileSync(heartbeat, String(Date.now()));
  touch();
  setInterval(touch, 5_000).unref();
}

// Spawned by fleet mode: a producer that died (SIGKILL) leaves no worker behind.
const parent = Number(process.env.FLEET_PARENT_PID ?? Number.NaN);
if (Number.isInteger(parent)) {
  setInterval(() => {
    if (process.ppid !== parent) void stop('producer gone');
  }, 1_000).unref();
}
