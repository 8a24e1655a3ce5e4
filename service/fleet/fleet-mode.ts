/**
 * Fleet mode (`npm start -- --redis redis://… --workers N`): this process is the producer and the
 * page; N worker processes (service/worker.ts), spawned and restarted here when they die, run the
 * conversations as BullMQ jobs on the store they share (docs/fleet.md). With `--redis` and no
 * `--workers`, the workers run elsewhere (docker-compose, a Kubernetes Deployment).
 *
 * The producer starts conversations with `queue.start()` at `--rate`, at most `--concurrency` in
 * flight. The page hears the workers' dispatches and endings over Redis pub/sub
 * (fleet-updates.ts), each marked with the worker that ran it. An ending missed on that channel
 * (the subscriber reconnecting) is read back from the store by a sweep, so the counts never leak.
 * Shutting down stops starting, drains the workers (their segments go back to the queue) and
 * leaves the conversations in flight in Redis, where the next workers resume them.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { createConversationQueue } from '../../src/fleet/index.ts';
import type { ServiceConfig } from '../config.ts';
import { MAX_DISPATCHES, market, pickScenario } from '../desks/market.ts';
import { paceStarts } from '../desks/pace.ts';
import { SharedExposition } from '../http/exposition.ts';
import { createServiceMetrics, createServiceRegistry } from '../http/health-metrics.ts';
import { HostAllowlist } from '../http/hosts.ts';
import { listeningLine, serviceRoutes } from '../http/routes.ts';
import { createHttpServer, listenOrReport } from '../http/server.ts';
import { ConversationHistory } from '../live/history.ts';
import { createServiceLive } from '../live/live.ts';
import { Page } from '../live/page.ts';
import { Progress } from '../live/progress.ts';
import type { LiveMessage } from '../live/updates.ts';
import { onStopSignal } from '../signals.ts';
import { openFleetStore } from './fleet-store.ts';
import { parseUpdates, updatesChannel } from './fleet-updates.ts';
import { DEMO_ORCHESTRATORS, DEMO_QUEUE, WORKER_DRAIN_MS } from './worker-names.ts';

const WORKER_ENTRY = fileURLToPath(new URL('../worker.ts', import.meta.url));
/** A worker that died is started again after this long (a crash loop stays slow). */
const RESTART_DELAY_MS = 1_000;
/** Conversations in flight longer than this are looked up in the store by the sweep. */
const SWEEP_AFTER_MS = 5_000;
const SWEEP_EVERY_MS = 2_000;
const SWEEP_BATCH = 200;

interface InFlight {
  readonly orchestrator: string;
  readonly startedAt: number;
}

/** Runs fleet mode until SIGTERM/SIGINT; resolves with the exit code. */
export async function runFleetMode(cfg: ServiceConfig, argv: readonly string[]): Promise<number> {
  const redisUrl = cfg.redis as string;
  const registry = createServiceRegistry();
  const health = createServiceMetrics(registry, () => live.subscribers);
  const hosts = new HostAllowlist(cfg.allowedHosts);
  const history = new ConversationHistory({ tailPoints: MAX_DISPATCHES, maxBytes: 64 * 1024 });
  const live = createServiceLive(cfg, {
    hosts,
    orchestrators: DEMO_ORCHESTRATORS,
    metrics: health,
    hello: {
      slowMs: cfg.sampleSlowMs,
      fleet: { workers: cfg.workers },
    },
    greeting: (filter) => [history.snapshot(filter)],
  });

  const store = openFleetStore(redisUrl, cfg.store);
  // Given the store: an approval finds its suspension even when its worker died before recording it.
  const queue = createConversationQueue({ connection: redisUrl, queueName: DEMO_QUEUE, store });
  const subscriber = new Redis(redisUrl, { maxRetriesPerRequest: null });
  subscriber.on('error', () => {});
  const inFlight = new Map<string, InFlight>();
  const progress = new Progress();
  let started = 0;
  let ended = 0;
  let suspended = 0;
  let stopping = false;

  const end = (update: Extract<LiveMessage, { type: 'end' }>) => {
    if (!inFlight.delete(update.conversationId)) return;
    ended++;
    progress.record(update.reason, update.dispatchCount, update.elapsedMs);
    history.ended(update.orchestrator, update.conversationId, update.reason);
    live.publish(update);
  };
  // A suspended conversation waits in the store for a person: it holds no slot of --concurrency.
  const suspend = (conversationId: string) => {
    if (!inFlight.delete(conversationId)) return;
    suspended++;
    history.left(conversationId);
  };
  subscriber.on('message', (_channel: string, message: string) => {
    for (const update of parseUpdates(message)) {
      if (update.type === 'end') {
        end(update);
        continue;
      }
      if (update.type === 'suspended') {
        suspend(update.conversationId);
        continue;
      }
      if (update.type !== 'dispatch') continue;
      history.dispatched(
        update.orchestrator,
        update.conversationId,
        update.dispatchCount,
        update.spread,
        undefined,
      );
      live.publish(update);
    }
  });
  try {
    await subscriber.subscribe(updatesChannel(DEMO_QUEUE));
  } catch (error) {
    process.stderr.write(`cannot reach Redis at ${redisUrl}: ${(error as Error).message}\n`);
    subscriber.disconnect();
    await Promise.allSettled([queue.close(), store.close(), live.close()]);
    return 2;
  }

  // The workers: spawned with this process's own flags, restarted when they die.
  const workers = new Map<string, ChildProcess>();
  const spawnWorker = (id: string) => {
    const child = spawn(process.execPath, ['--import', 'tsx', WORKER_ENTRY], {
      env: {
        ...process.env,
        WORKER_ID: id,
        FLEET_ARGS: JSON.stringify(argv),
        FLEET_PARENT_PID: String(process.pid),
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    });
    workers.set(id, child);
    process.stdout.write(`worker ${id} started (pid ${child.pid})\n`);
    child.once('exit', (code, signal) => {
      if (stopping) return;
      process.stdout.write(
        `worker ${id} exited (${signal ?? `code ${code}`}); starting it again in ${RESTART_DELAY_MS} ms\n`,
      );
      setTimeout(() => {
        if (!stopping) spawnWorker(id);
      }, RESTART_DELAY_MS);
    });
  };
  for (let i = 1; i <= cfg.workers; i++) spawnWorker(`worker-${i}`);

  const page = new Page();
  const server = createHttpServer(
    { ...cfg, hosts, onRefused: (reason) => health.httpRefused.inc({ reason }) },
    serviceRoutes({
      handlers: [(target, req, res) => page.serve(target.pathname, req, res)],
      metrics: new SharedExposition(registry),
      health: () => ({
        stopping,
        inFlight: inFlight.size,
        more: {
          fleet: {
            started,
            ended,
            suspended,
            workers: [...workers.values()].filter((w) => w.exitCode === null && !w.killed).length,
            // The oldest conversation still in flight, so that a check can tell that every one
            // started before a moment (a crash) has ended.
            oldestInFlightStartedAt: inFlight.values().next().value?.startedAt ?? null,
          },
        },
      }),
    }),
  );
  live.attach(server);
  const port = await listenOrReport(server, cfg.host, cfg.port);
  if (port === undefined) {
    stopping = true;
    for (const w of workers.values()) w.kill('SIGTERM');
    subscriber.disconnect();
    await Promise.allSettled([queue.close(), store.close(), live.close()]);
    return 2;
  }
  process.stdout.write(
    `${listeningLine(cfg.host, port)}\nfleet mode: queue ${DEMO_QUEUE} on ${redisUrl}, store ${store.name}, ${cfg.workers > 0 ? `${cfg.workers} worker processes` : 'workers running elsewhere'}\n`,
  );

  // The workload, as in single-process mode but through the queue.
  let sequence = 0;
  const prefix = Date.now().toString(36);
  const startOne = () => {
    const index = started % DEMO_ORCHESTRATORS.length;
    const name = DEMO_ORCHESTRATORS[index] as string;
    const desks = Math.min(cfg.desks + index, 8);
    const conversationId = `${name}-${prefix}-${++sequence}`;
    const input = {
      sender: 'market',
      content: { market: market(pickScenario(cfg.mix), desks, cfg) },
    };
    started++;
    inFlight.set(conversationId, { orchestrator: name, startedAt: Date.now() });
    queue.start(name, input, { conversationId }).catch((error: unknown) => {
      inFlight.delete(conversationId);
      started--;
      process.stderr.write(`could not start ${conversationId}: ${(error as Error).message}\n`);
    });
  };
  const ticker = paceStarts({
    rate: cfg.rate,
    start: startOne,
    room: () => inFlight.size < cfg.concurrency,
    stopping: () => stopping,
  });
  // Endings and suspensions missed on the channel, read back from the store.
  let sweeping = false;
  const sweep = setInterval(async () => {
    if (sweeping) return;
    sweeping = true;
    try {
      const old = [...inFlight]
        .filter(([, f]) => Date.now() - f.startedAt > SWEEP_AFTER_MS)
        .slice(0, SWEEP_BATCH);
      for (const [id, f] of old) {
        const stored = await store.get(id);
        if (stored?.status === 'suspended') {
          suspend(id);
          continue;
        }
        if (stored?.status !== 'ended') continue;
        const result = stored.result as {
          decision?: { reason?: string };
          error?: { reason?: string };
          elapsedMs?: number;
          state?: { projection?: { spread?: number } };
        };
        end({
          type: 'end',
          orchestrator: f.orchestrator,
          conversationId: id,
          reason: result.error?.reason ?? result.decision?.reason ?? 'error',
          dispatchCount: stored.dispatchCount,
          spread: result.state?.projection?.spread ?? 0,
          elapsedMs: result.elapsedMs ?? 0,
          tokens: { input: 0, output: 0 },
        });
      }
    } catch {
      // The store is away: the next sweep tries again.
    } finally {
      sweeping = false;
    }
  }, SWEEP_EVERY_MS);
  const tty = process.stdout.isTTY === true;
  const progressTimer = setInterval(() => {
    const line = `${progress.line(inFlight.size)} | started ${started}`;
    process.stdout.write(tty ? `\r${line}\u001b[K` : `${line}\n`);
  }, cfg.progressSeconds * 1000);

  return new Promise<number>((resolve) => {
    onStopSignal(async (signal) => {
      stopping = true;
      clearInterval(ticker);
      clearInterval(sweep);
      clearInterval(progressTimer);
      // The workers drain: their segments stop at a commit point and go back to the queue.
      const exits = [...workers.values()]
        .filter((w) => w.exitCode === null && w.signalCode === null)
        .map(
          (w) =>
            new Promise<void>((r) => {
              const kill = setTimeout(() => w.kill('SIGKILL'), WORKER_DRAIN_MS + 3_000);
              w.once('exit', () => {
                clearTimeout(kill);
                r();
              });
              w.kill('SIGTERM');
            }),
        );
      await Promise.all(exits);
      subscriber.disconnect();
      await Promise.allSettled([queue.close(), store.close(), live.close()]);
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      process.stdout.write(
        `${tty ? '\n' : ''}${signal}: stopped ${workers.size} workers, left ${inFlight.size} conversations in flight in Redis (workers started later resume them), closed. ${progress.summary()}\n`,
      );
      resolve(0);
    });
  });
}
