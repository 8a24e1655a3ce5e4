/**
 * `npm start`: a live, instrumented conversation service. Trading desks converge on prices in a
 * continuous mix of calm, thin, choppy, slow, broken and abandoned markets, so every dashboard
 * panel and alert has something real to show. Serves the live page at /, /metrics, /healthz and
 * a WebSocket at /ws.
 */
// First: SIGTERM is handled from here on, while the modules below still load.
import './signals.ts';
import { setMaxListeners } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { context, trace } from '@opentelemetry/api';
import type { ConversationOrchestrator } from '../src/index.ts';
import { createConversationTelemetry, createStoreMetrics } from '../src/observability/index.ts';
import { createConversationRecorder, createRotatingFileSink } from '../src/replay/index.ts';
import { ConfigError, parseConfig, usage } from './config.ts';
import { Approvals, RESUME_PATH, serveResume } from './desks/approvals.ts';
import { openStore, readEndings, Segments, TraderLeft } from './desks/durable.ts';
import {
  type Book,
  createDeskOrchestrator,
  type DeskMessage,
  MAX_DISPATCHES,
  market,
  pickScenario,
} from './desks/market.ts';
import { paceStarts } from './desks/pace.ts';
import { SharedExposition } from './http/exposition.ts';
import { createServiceMetrics, createServiceRegistry } from './http/health-metrics.ts';
import { HostAllowlist } from './http/hosts.ts';
import { RateLimitedReport } from './http/rate-limited-report.ts';
import { listeningLine, serviceRoutes } from './http/routes.ts';
import { createHttpServer, listenOrReport } from './http/server.ts';
import { ConversationHistory } from './live/history.ts';
import { createServiceLive } from './live/live.ts';
import { Page } from './live/page.ts';
import { Progress } from './live/progress.ts';
import { dispatchUpdate, type EndedConversation, endUpdate } from './live/updates.ts';
import { onStopSignal } from './signals.ts';
import { describeFlush, startTracing } from './tracing.ts';

const MAX_DISPATCH_EVENTS = 128;
/** How often the store is swept for conversations whose holder's lease has ended (ms). */
const RECOVER_SWEEP_MS = 30_000;
/**
 * The conversations' tails sent to a page on connect take at most this many bytes: at 400
 * dispatches of ~7 bytes each, some 20 whole conversations, more of the usual short ones.
 */
const MAX_HISTORY_BYTES = 64 * 1024;
/** At most one "span export failing" line per this many ms (with the count since the last). */
const EXPORT_FAILURE_REPORT_MS = 10_000;
const SERVER_CLOSE_GRACE_MS = 500;
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
  // Fleet mode (--redis, --workers): the producer and page of BullMQ workers (fleet-mode.ts).
  if (cfg.redis !== undefined)
    return (await import('./fleet/fleet-mode.ts')).runFleetMode(cfg, process.argv.slice(2));

  const exportFailures = new RateLimitedReport(EXPORT_FAILURE_REPORT_MS, (spans, exports, error) =>
    process.stderr.write(
      `span export failing: ${spans} spans lost in ${exports} failed export${exports === 1 ? '' : 's'} since the last report (last error: ${error})\n`,
    ),
  );
  const drops = new RateLimitedReport(EXPORT_FAILURE_REPORT_MS, (spans) =>
    process.stderr.write(
      `span export queue full: ${spans} spans dropped since the last report (the OTLP endpoint is slower than the spans come)\n`,
    ),
  );
  // OpenMetrics (for exemplars) and the process's own health; the sampler counts its decisions
  // on it too.
  const registry = createServiceRegistry();
  const tracing = startTracing(process.env, {
    maxDispatchEvents: MAX_DISPATCH_EVENTS,
    flushTimeoutMs: cfg.flushTimeoutMs,
    onExportFailure: (spans, error) => {
      health.exportFailures.inc(spans);
      exportFailures.record(spans, error?.message ?? 'unknown error');
    },
    onDrop: () => {
      health.spansDropped.inc();
      drops.record(1, 'export queue full');
    },
    sampling: {
      ratio: cfg.sampleRatio,
      slowMs: cfg.sampleSlowMs,
      longDispatches: cfg.sampleLongDispatches,
      registry,
    },
  });
  const telemetry = createConversationTelemetry<Book, DeskMessage>({
    registry,
    maxDispatchEvents: MAX_DISPATCH_EVENTS,
    stateAttributes: (state) => ({ 'desks.spread': state.projection.spread }),
  });
  // --record DIR: every conversation, one line each, into rotating files of bounded size; what
  // replay needs of the book is its spread (the measure the desks' converged() policy reads).
  let recordingFiles: ReturnType<typeof createRotatingFileSink> | undefined;
  try {
    recordingFiles =
      cfg.record === undefined
        ? undefined
        : createRotatingFileSink({
            dir: cfg.record,
            maxFileBytes: cfg.recordFileMb * 1024 * 1024,
            maxFiles: cfg.recordFiles,
          });
  } catch (error) {
    process.stderr.write(`cannot record into ${cfg.record}: ${(error as Error).message}\n`);
    return 2;
  }
  const recorder =
    recordingFiles === undefined
      ? undefined
      : createConversationRecorder<Book, DeskMessage>({
          sink: recordingFiles.write,
          record: (state) => ({ spread: state.projection.spread }),
          logger: { warn: (message) => process.stderr.write(`${message}\n`) },
          reportIntervalMs: EXPORT_FAILURE_REPORT_MS,
        });
  // Conversations live in a store (SQLite under --data by default): a crash loses none.
  let opened: ReturnType<typeof openStore>;
  try {
    opened = openStore(cfg);
  } catch (error) {
    process.stderr.write(`cannot open the conversations store: ${(error as Error).message}\n`);
    return 2;
  }
  const { store } = opened;
  // What no conversation's events say, read from the store at scrape time: conversations waiting
  // for approval, how long the oldest has waited, the running ones no process holds.
  const storeMetrics = createStoreMetrics({ store, registry, timeoutMs: 1000 });
  const health = createServiceMetrics(registry, () => live.subscribers);
  const names = ['fx_desks', 'rates_desks'] as const;
  const hosts = new HostAllowlist(cfg.allowedHosts);
  const live = createServiceLive(cfg, {
    hosts,
    orchestrators: names,
    metrics: health,
    hello: {
      ...(cfg.traceUrl === undefined ? {} : { traceUrl: cfg.traceUrl }),
      // The sampler's slow rule: the page lists those conversations as slow (their traces kept).
      slowMs: cfg.sampleSlowMs,
    },
    greeting: (filter) => [history.snapshot(filter), approvals.message(filter)],
  });
  const history = new ConversationHistory({
    tailPoints: MAX_DISPATCHES,
    maxBytes: MAX_HISTORY_BYTES,
  });

  // Declared before anything can read them: requests (/healthz) and segments' ends.
  const progress = new Progress();
  let stopping = false;
  const publishEnd = (
    orchestrator: string,
    conversationId: string,
    reason: string,
    end: EndedConversation,
    resumed: boolean,
  ) => {
    // The trace is linked only when the sampler kept it (it decided as the conversation ended).
    const seen = history.ended(orchestrator, conversationId, reason, resumed);
    const traceId = seen !== undefined && tracing.kept(seen) ? seen : undefined;
    live.publish(
      endUpdate(orchestrator, conversationId, reason, end, {
        ...(traceId === undefined ? {} : { traceId }),
        ...(resumed ? { resumed: true as const } : {}),
      }),
    );
  };
  // Every segment's end, whoever ran it (run(), recover(), an approval's resume()): last of the
  // observers, so the sampler has decided on the trace when it is told.
  const segments = new Segments<Book, DeskMessage>({
    onEnd: (orchestrator, conversationId, end) => {
      if (end.kind === 'left') history.left(conversationId);
      else if (end.kind === 'abandoned') {
        // Its trader left: ended in the store as aborted (counted then, by cancel()'s segment),
        // so recover() leaves it and the totals count it after a restart.
        const cancelling = byName
          .get(orchestrator)
          ?.cancel(conversationId, { reason: 'the trader left' });
        if (cancelling !== undefined) {
          track(
            cancelling.catch((error: unknown) =>
              process.stderr.write(
                `could not cancel ${conversationId}: ${(error as Error).message}\n`,
              ),
            ),
          );
        }
      } else if (end.kind === 'ended') {
        const outcome = end.end.ok ? end.end.result : end.end.error;
        progress.record(end.reason, outcome.dispatchCount, outcome.elapsedMs);
        publishEnd(orchestrator, conversationId, end.reason, outcome, end.resumed);
      } else {
        history.left(conversationId);
        approvals.suspended(orchestrator, conversationId, end.result.suspended?.payload);
      }
    },
  });
  const observers = recorder === undefined ? [telemetry] : [telemetry, recorder];
  const orchestrators: ConversationOrchestrator<Book, DeskMessage>[] = names.map((name, i) =>
    createDeskOrchestrator(
      name,
      Math.min(cfg.desks + i, 8),
      cfg,
      [...observers, segments.observer],
      store,
      (state, decision, dispatchCount, elapsedMs) => {
        const resumed = segments.resumed.has(state.conversationId);
        // The listener runs in the conversation's trace context: its span is the active one.
        history.dispatched(
          name,
          state.conversationId,
          dispatchCount,
          state.projection.spread,
          trace.getSpanContext(context.active()),
          resumed,
        );
        live.publish(
          dispatchUpdate(
            name,
            state,
            decision,
            dispatchCount,
            elapsedMs,
            resumed ? { resumed: true } : {},
          ),
        );
      },
    ),
  );
  const byName = new Map<string, ConversationOrchestrator<Book, DeskMessage>>(
    names.map((name, i) => [name, orchestrators[i] as (typeof orchestrators)[number]]),
  );

  // Every run, resume and recover of this process: aborted together at shutdown, which leaves
  // their conversations in the store as last committed, for the next start's recover().
  const stop = new AbortController();
  // One listener per run in flight, removed as it settles: thousands at once are expected.
  setMaxListeners(0, stop.signal);
  const tasks = new Set<Promise<unknown>>();
  const track = (task: Promise<unknown>) => {
    const settled = task.then(
      () => {},
      () => {},
    );
    tasks.add(settled);
    void settled.finally(() => tasks.delete(settled));
  };
  const approvals = new Approvals({
    store,
    orchestrators: byName,
    timeoutMs: cfg.approvalTimeoutSeconds * 1000,
    signal: stop.signal,
    track: (task) => track(task),
    publish: (update) => live.publish(update),
  });

  const page = new Page();
  const server = createHttpServer(
    { ...cfg, hosts, onRefused: (reason) => health.httpRefused.inc({ reason }) },
    serviceRoutes({
      handlers: [
        (target, req, res) => {
          const resume = RESUME_PATH.exec(target.pathname);
          if (resume === null) return false;
          serveResume(approvals, hosts, resume[1] as string, req, res);
          return true;
        },
        (target, req, res) => page.serve(target.pathname, req, res),
      ],
      metrics: new SharedExposition(registry),
      health: () => ({ stopping, inFlight: segments.running }),
    }),
  );
  // The endings earlier runs left in the store start the totals, read before any conversation
  // of this process can end (those that end from now on are counted live, once) and before the
  // service listens: nothing after the listen awaits, so no request, page or signal comes to a
  // service that is half started.
  const kept = await readEndings(store, names);
  history.seed(kept.totals, kept.oldest);
  // Conversations waiting for a person wait on across restarts: the list comes from the store.
  await approvals.rebuild();
  live.attach(server);
  const port = await listenOrReport(server, cfg.host, cfg.port);
  if (port === undefined) return 2;
  process.stdout.write(
    `${listeningLine(cfg.host, port)}\n${tracing.description}\nanswering Host: ${cfg.allowedHosts.join(', ')} and any IP address (--allowed-hosts)\n${cfg.record === undefined ? '' : `recording every conversation into ${cfg.record} (files of at most ${cfg.recordFileMb} MiB, the last ${cfg.recordFiles} kept)\n`}conversations kept ${opened.description} (--data, --store); ${kept.count} ended ones counted from it\n`,
  );

  // The workload: start conversations at `rate` per second, at most `concurrency` at once.
  let started = 0;
  const startOne = () => {
    const scenario = pickScenario(cfg.mix);
    const index = started++ % orchestrators.length;
    const orchestrator = orchestrators[index] as ConversationOrchestrator<Book, DeskMessage>;
    const desks = orchestrator.responderNames.length;
    const book = market(scenario, desks, cfg);
    let signal = stop.signal;
    let leave: NodeJS.Timeout | undefined;
    if (book.leaveAfterMs !== undefined) {
      const trader = new AbortController();
      leave = setTimeout(() => trader.abort(new TraderLeft()), book.leaveAfterMs);
      signal = AbortSignal.any([stop.signal, trader.signal]);
    }
    // How it ends is told by `segments` (for resumed conversations too).
    track(
      orchestrator
        .run({ sender: 'market', content: { market: book } }, { signal })
        .finally(() => clearTimeout(leave)),
    );
  };
  // Conversations in flight when the service was killed go on, at most --concurrency at once.
  const recovering = orchestrators.map((o) =>
    o.recover({ concurrency: cfg.concurrency, signal: stop.signal }),
  );
  for (const r of recovering) track(r);
  approvals.start();
  const recovered = Promise.all(recovering).then(
    (results) => {
      const resumed = results.reduce((n, r) => n + r.resumed, 0);
      if (resumed > 0) process.stdout.write(`resumed ${resumed} conversations from the store\n`);
    },
    (error: unknown) =>
      process.stderr.write(`recover() failed: ${(error as Error).message ?? String(error)}\n`),
  );
  // A conversation recover() skipped because its lease still looked held (a holder on another
  // host, or one whose death this host cannot see) is taken when that lease ends: the store is
  // swept again every RECOVER_SWEEP_MS (the default lease, 30 s), one sweep at a time.
  let sweeping: Promise<unknown> | undefined;
  const sweeper = setInterval(() => {
    if (stopping || sweeping !== undefined) return;
    sweeping = Promise.all(
      orchestrators.map((o) => o.recover({ concurrency: cfg.concurrency, signal: stop.signal })),
    )
      .then((results) => {
        const resumed = results.reduce((n, r) => n + r.resumed, 0);
        if (resumed > 0) process.stdout.write(`resumed ${resumed} conversations from the store\n`);
      })
      .catch((error: unknown) =>
        process.stderr.write(`recover() failed: ${(error as Error).message ?? String(error)}\n`),
      )
      .finally(() => {
        sweeping = undefined;
      });
    track(sweeping);
  }, RECOVER_SWEEP_MS);
  sweeper.unref();
  const ticker = paceStarts({
    rate: cfg.rate,
    start: startOne,
    room: () => segments.running < cfg.concurrency,
    stopping: () => stopping,
  });
  const tty = process.stdout.isTTY === true;
  const progressTimer = setInterval(() => {
    const line = progress.line(segments.running);
    process.stdout.write(tty ? `\r${line}\u001b[K` : `${line}\n`);
  }, cfg.progressSeconds * 1000);

  /** Flushes the recording (bounded like the span flush) and says what it wrote. */
  const closeRecording = async (): Promise<string> => {
    if (recorder === undefined || recordingFiles === undefined) return '';
    const stats = await recorder.close({ timeoutMs: Math.max(1, cfg.flushTimeoutMs) });
    await Promise.race([recordingFiles.close().catch(() => {}), sleep(SERVER_CLOSE_GRACE_MS)]);
    const dropped = stats.dropped.queueFull + stats.dropped.sinkFailed + stats.dropped.closed;
    return `, recorded ${stats.written} conversations into ${cfg.record}${dropped > 0 ? ` (${dropped} dropped)` : ''}`;
  };

  /** What the store holds for the next start, from its stats (bounded: it may be down). */
  const describeLeft = async (): Promise<string> => {
    const stats = await Promise.race([store.stats().catch(() => undefined), sleep(1000)]);
    if (stats === undefined) return '';
    let running = 0;
    let suspended = 0;
    for (const s of stats) {
      if (!(names as readonly string[]).includes(s.orchestrator)) continue;
      running += s.running;
      suspended += s.suspended;
    }
    return `left in the store: ${running} in flight (resumed at the next start), ${suspended} waiting for approval\n`;
  };

  // Graceful shutdown, bounded: abort in-flight conversations (recorded as aborted), then flush
  // spans (at most --flush-timeout-ms) while WebSocket clients get a short grace, then close.
  return new Promise<number>((resolve) => {
    const shutdown = async (signal: string) => {
      if (stopping) return;
      stopping = true;
      clearInterval(ticker);
      clearInterval(sweeper);
      clearInterval(progressTimer);
      const aborting = segments.running;
      approvals.stop();
      stop.abort(new Error(`service stopping (${signal})`));
      await recovered;
      // Until none is left: a run that settles now can start another task (the cancel() of a
      // conversation whose trader left just before), which must end before the recording
      // closes and the store does, or its ending would be neither recorded nor committed.
      while (tasks.size > 0) await Promise.allSettled([...tasks]);
      const [flush, , recorded] = await Promise.all([
        tracing.shutdown(),
        live.close(),
        closeRecording(),
      ]);
      exportFailures.flush();
      drops.flush();
      const left = await describeLeft();
      storeMetrics.close();
      await store.close().catch(() => {});
      server.closeAllConnections();
      // Every HTTP connection is closed above; do not let a straggler hold the exit.
      await Promise.race([
        new Promise<void>((r) => server.close(() => r())),
        sleep(SERVER_CLOSE_GRACE_MS),
      ]);
      process.stdout.write(
        `${tty ? '\n' : ''}${signal}: aborted ${aborting} in-flight conversations, ${describeFlush(flush, cfg.flushTimeoutMs)}${recorded}, closed. ${progress.summary()}\n${left}`,
      );
      resolve(0);
    };
    onStopSignal((signal) => void shutdown(signal));
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
