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
 * (appended with one synchronous write each, so a SIGKILL loses none written).
 */
// First: SIGTERM, SIGINT and SIGHUP are handled from here on (one while starting exits 0 at once).
import './signals.ts';
import { appendFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { Redis } from 'ioredis';
import { createConversationWorker } from '../src/fleet/index.ts';
import type { ConversationObserver } from '../src/index.ts';
import { ConfigError, parseConfig } from './config.ts';
import { FLEET_TIMING, openFleetStore } from './fleet-store.ts';
import { UpdatePublisher, updatesChannel } from './fleet-updates.ts';
import { type Book, createDeskOrchestrator, type DeskMessage } from './market.ts';
import { onStopSignal } from './signals.ts';
import { DEMO_ORCHESTRATORS, DEMO_QUEUE, WORKER_DRAIN_MS } from './worker-names.ts';

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
        updates.publish({
          type: 'end',
          orchestrator: start.orchestrator,
          conversationId: start.conversationId,
          reason,
          dispatchCount: over.dispatchCount,
          spread: over.state.projection.spread,
          elapsedMs: over.elapsedMs,
          tokens: { input: over.usage.inputTokens, output: over.usage.outputTokens },
          worker: workerId,
        });
      },
    };
  },
};

const orchestrators = DEMO_ORCHESTRATORS.map((name, i) =>
  createDeskOrchestrator(
    name,
    Math.min(cfg.desks + i, 8),
    cfg,
    [endings],
    store,
    (state, decision, dispatchCount, elapsedMs) =>
      updates.publish({
        type: 'dispatch',
        orchestrator: name,
        conversationId: state.conversationId,
        dispatchCount,
        spread: state.projection.spread,
        decision,
        elapsedMs,
        worker: workerId,
      }),
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
  await Promise.allSettled([store.close(), publisherClient.quit()]);
  process.exit(0);
};
// SIGTERM, SIGINT and SIGHUP (a closed terminal) drain, also while the worker gets ready.
onStopSignal((signal) => void stop(signal));
await worker.ready(30_000);
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
