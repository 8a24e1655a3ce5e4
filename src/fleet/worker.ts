/**
 * The BullMQ adapter of the fleet: a worker takes segment jobs, runs each through `runSegment`
 * (segment.ts) and maps the outcome onto BullMQ's own moves: completed (ended, suspended, stale),
 * back to wait (handed back by a drain), delayed (the lease is held elsewhere), failed for good
 * (an orchestrator it does not run, a payload that is not ours), retried with backoff (Redis or
 * the store unreachable). A dead worker's jobs are BullMQ's stalled jobs: another worker gets them
 * once their lock expires, and resumes each conversation from its last checkpoint.
 */
import { randomUUID } from 'node:crypto';
import { DelayedError, type Job, Queue, UnrecoverableError, WaitingError, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { ConversationStore } from '../core/spi/store.ts';
import { asRegistry, type PrometheusRegistry } from '../observability/registry.ts';
import {
  bounded,
  describeConnection,
  type FleetConnection,
  openClient,
  RedisUnreachableError,
} from './connection.ts';
import { UnknownOrchestratorError } from './errors.ts';
import { backoffDelay, checkQueueName, DEFAULT_PREFIX, DEFAULT_QUEUE_NAME } from './jobs.ts';
import {
  dropSegment,
  dropSuspension,
  markSegment,
  recordSuspension,
  segmentKey,
  suspendedKey,
} from './markers.ts';
import { QueueMetrics } from './metrics.ts';
import { ForeignPayloadError, parsePayload } from './payload.ts';
import { type FleetOrchestrator, runSegment, type SegmentOutcome } from './segment.ts';

/** A rate limit on the segments a queue starts (BullMQ's limiter: for the queue, across workers). */
export interface SegmentRateLimit {
  /** At most this many segments start ... */
  readonly max: number;
  /** ... per this many milliseconds. */
  readonly duration: number;
}

/** Something worth a log line, given to `onEvent`. */
export interface FleetEvent {
  /**
   * `refused` (a job that is not ours), `unknown_orchestrator`, `fenced` (our run lost its lease
   * to another worker: we were paused), `retry` (Redis or the store failed; the job is retried),
   * `redis_error` (a connection error; ioredis reconnects), `stale` (a resume already answered).
   */
  readonly type: 'refused' | 'unknown_orchestrator' | 'fenced' | 'retry' | 'redis_error' | 'stale';
  /** What happened, in a sentence. */
  readonly message: string;
  /** The BullMQ job it concerns, when one. */
  readonly jobId?: string | undefined;
  /** The conversation it concerns, when one. */
  readonly conversationId?: string | undefined;
}

/** What `createConversationWorker()` takes. */
export interface ConversationWorkerOptions {
  /** The Redis of the queue: a `redis://` URL, ioredis options or an ioredis client (duplicated). */
  readonly connection: FleetConnection;
  /**
   * The BullMQ queue to work on. Every worker of a queue must run the same orchestrators: a job
   * naming one this worker does not run fails for good.
   * @default 'conversations'
   */
  readonly queueName?: string;
  /** The store every worker shares (PostgreSQL or Redis in production); the orchestrators' own. */
  readonly store: ConversationStore;
  /** The orchestrators this worker runs, matched to jobs by name (built with `store` and a name each). */
  readonly orchestrators: readonly FleetOrchestrator[];
  /**
   * Segments run at once by this worker. Conversations mostly wait on model calls, so many fit.
   * @default 50
   */
  readonly concurrency?: number;
  /**
   * BullMQ's rate limiter: segments started per period on this queue, across all its workers.
   * To limit one orchestrator apart, give it a queue of its own.
   * @default undefined (no limit)
   */
  readonly limiter?: SegmentRateLimit;
  /**
   * BullMQ's job lock: a worker that stops renewing it (dead, paused) loses its jobs this long
   * after its last renewal (renewed every half of it).
   * @default 10000
   */
  readonly lockDurationMs?: number;
  /**
   * How often each worker looks for jobs whose lock expired and hands them back to wait.
   * @default 5000
   */
  readonly stalledIntervalMs?: number;
  /**
   * Times a job may be taken back from a dead worker before BullMQ fails it. High: a conversation
   * must not fail because its workers died; a job that kills every worker it lands on (an
   * out-of-memory conversation) is failed after this many.
   * @default 1000
   */
  readonly maxStalledCount?: number;
  /**
   * BullMQ's key prefix.
   * @default 'bull'
   */
  readonly prefix?: string;
  /**
   * Receives refused jobs, fenced segments, retries and connection errors.
   * @default a process warning per event
   */
  readonly onEvent?: (event: FleetEvent) => void;
  /**
   * A prom-client `Registry` (any 15.x copy; the telemetry's, usually) to register the queue
   * metrics on: `orchestrator_queue_job_wait_seconds` and `orchestrator_queue_jobs_stalled_total`
   * (this worker's), and, read from Redis at scrape time, `orchestrator_queue_oldest_waiting_seconds`
   * and BullMQ's `bullmq_job_count`, `bullmq_job_completed_total`, `bullmq_job_failed_total`
   * (docs/telemetry.md). `close()` takes them off it.
   * @default none (no metrics)
   */
  readonly registry?: PrometheusRegistry;
  /**
   * How long a scrape waits for Redis for the queue-wide metrics (then they have no series for
   * that scrape).
   * @default 1000
   */
  readonly metricsTimeoutMs?: number;
}

/** After a drain's timeout, how long cut segments get to let go before the worker closes. */
const CUT_GRACE_MS = 1_000;

/** Options of `close()`. */
export interface CloseOptions {
  /**
   * The drain timeout: how long running segments get to finish the responder call in flight,
   * commit it and be handed back. Past it the rest are cut (each stops at once, at a point the
   * store can hold, the call it cut to run again elsewhere with a higher attempt) and get 1 s more;
   * then the worker closes anyway and any job left comes back through stalled-job detection.
   * @default 10000
   */
  readonly timeoutMs?: number;
}

/** Counts since the worker started. */
export interface ConversationWorkerStats {
  /** Segments that ended their conversation. */
  readonly ended: number;
  /** Segments that left their conversation suspended. */
  readonly suspended: number;
  /** Segments handed back to the queue by a drain. */
  readonly handedBack: number;
  /** Segments put back as delayed because another holder had the lease. */
  readonly held: number;
  /** Segments whose run lost its lease mid-way (its commits refused: we had been paused). */
  readonly fenced: number;
  /** Jobs that had nothing to do (a resume already answered). */
  readonly stale: number;
  /** Jobs refused: not ours, or for an orchestrator this worker does not run. */
  readonly refused: number;
  /** Segments that failed on Redis or the store and were retried with backoff. */
  readonly retried: number;
  /** Connection errors seen (each reconnected with backoff). */
  readonly redisErrors: number;
}

/** The worker handle. */
export interface ConversationWorker {
  /** Resolves once connected to Redis; rejects with a `RedisUnreachableError` naming it past `timeoutMs`. */
  ready(timeoutMs?: number): Promise<void>;
  /** Counts since the worker started. */
  stats(): ConversationWorkerStats;
  /**
   * Drains: takes no new job, lets each running segment finish its responder call in flight and
   * commit it, hands its job back to the queue for another worker (which goes on from there,
   * running nothing twice), then closes. Segments still running after `timeoutMs` are cut.
   * Returns within `timeoutMs` plus 1 s for cut segments and the time to close connections
   * (about 1 s): 12 s by default.
   */
  close(options?: CloseOptions): Promise<void>;
}

type Counter = { -readonly [K in keyof ConversationWorkerStats]: number };

function checkPositive(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new TypeError(`Expected \`${option}\` to be a positive integer, got ${String(value)}`);
  }
  return value;
}

/** Starts a worker of a fleet (see docs/fleet.md). */
export function createConversationWorker(options: ConversationWorkerOptions): ConversationWorker {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected the options to be an object, got ${String(options)}`);
  }
  const queueName = checkQueueName(options.queueName ?? DEFAULT_QUEUE_NAME);
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const store = options.store;
  if (typeof store !== 'object' || store === null || typeof store.acquire !== 'function') {
    throw new TypeError('Expected `store` to be a ConversationStore');
  }
  if (!Array.isArray(options.orchestrators)) {
    throw new TypeError('Expected `orchestrators` to be an array of ConversationOrchestrators');
  }
  const orchestrators = new Map<string, FleetOrchestrator>();
  for (const o of options.orchestrators) {
    if (o.durable !== true) {
      throw new TypeError(
        `Expected every orchestrator to be built with a \`store\` (the worker's), got ${JSON.stringify(o.name)} built without one: a worker would lose its results`,
      );
    }
    if (orchestrators.has(o.name)) {
      throw new TypeError(
        `Expected orchestrator names to be unique, got ${JSON.stringify(o.name)} twice`,
      );
    }
    orchestrators.set(o.name, o);
  }
  const concurrency = checkPositive('concurrency', options.concurrency ?? 50);
  const lockDuration = checkPositive('lockDurationMs', options.lockDurationMs ?? 10_000);
  const stalledInterval = checkPositive('stalledIntervalMs', options.stalledIntervalMs ?? 5_000);
  const maxStalledCount = checkPositive('maxStalledCount', options.maxStalledCount ?? 1_000);
  const registry = options.registry === undefined ? undefined : asRegistry(options.registry);
  const metricsTimeoutMs = checkPositive('metricsTimeoutMs', options.metricsTimeoutMs ?? 1_000);
  const url = describeConnection(options.connection);
  const counts: Counter = {
    ended: 0,
    suspended: 0,
    handedBack: 0,
    held: 0,
    fenced: 0,
    stale: 0,
    refused: 0,
    retried: 0,
    redisErrors: 0,
  };
  const emit =
    options.onEvent ??
    ((event: FleetEvent) =>
      process.emitWarning(`${event.type}: ${event.message}`, { code: 'CONVERSATION_FLEET' }));
  let lastError: unknown;
  let closed = false;
  const onRedisError = (error: unknown) => {
    // Our own disconnects at the end of close() are not worth an event.
    if (closed) return;
    lastError = error;
    counts.redisErrors += 1;
    emit({ type: 'redis_error', message: `${url}: ${(error as Error)?.message ?? error}` });
  };

  const client: Redis = openClient(options.connection, `co-worker:${queueName}`);
  client.on('error', onRedisError);
  const markers: Redis = openClient(options.connection, `co-markers:${queueName}`);
  markers.on('error', () => undefined);
  // The queue-wide reads of the metrics go through the markers' connection (short commands).
  const metricsQueue =
    registry === undefined ? undefined : new Queue(queueName, { connection: markers, prefix });
  metricsQueue?.on('error', () => undefined);
  let metrics: QueueMetrics | undefined;
  try {
    metrics =
      registry === undefined || metricsQueue === undefined
        ? undefined
        : new QueueMetrics(registry, metricsQueue, queueName, metricsTimeoutMs);
  } catch (error) {
    // A registry that refuses the metrics (their names taken): no connection is left open.
    closed = true;
    void metricsQueue?.close().catch(() => undefined);
    markers.disconnect();
    client.disconnect();
    throw error;
  }
  /** Each running segment's two stops: `drain` (finish the call, commit, hand back), `cut`. */
  const running = new Set<{ readonly drain: AbortController; readonly cut: AbortController }>();
  let draining = false;

  const processor = async (job: Job, token?: string): Promise<unknown> => {
    metrics?.jobStarted(job);
    let payload: ReturnType<typeof parsePayload>;
    try {
      payload = parsePayload(job.data);
    } catch (error) {
      counts.refused += 1;
      emit({ type: 'refused', message: (error as Error).message, jobId: job.id });
      throw new UnrecoverableError(`Refused job ${job.id}: ${(error as Error).message}`);
    }
    const id = payload.conversationId;
    // Fetched as the drain began (BullMQ's pause lets a fetch under way finish): back to wait at
    // once, touching neither the store nor the conversation's lease.
    if (draining) {
      counts.handedBack += 1;
      await job.moveToWait(token);
      throw new WaitingError();
    }
    // Marked running before the segment can commit anything: resume() waits on it (bounded 1 s
    // here: a Redis that does not answer fails the segment's own store calls anyway).
    const segment = segmentKey(prefix, queueName, id);
    // Unique to this run of the job: a paused worker's run coming back must not drop the mark of
    // the run that took its job over (both runs have the job's id).
    const jobId = `${String(job.id)} ${randomUUID()}`;
    await Promise.race([
      markSegment(markers, segment, jobId).catch(() => undefined),
      new Promise((resolve) => setTimeout(resolve, 1_000).unref()),
    ]);
    try {
      return await runJob(job, token, payload, id);
    } finally {
      // After the outcome (and the suspension marker) is recorded; same connection, in order.
      void dropSegment(markers, segment, jobId).catch(() => undefined);
    }
  };

  const runJob = async (
    job: Job,
    token: string | undefined,
    payload: ReturnType<typeof parsePayload>,
    id: string,
  ): Promise<unknown> => {
    const controller = new AbortController();
    const drain = new AbortController();
    if (draining) drain.abort(new Error('the worker is draining'));
    const stops = { drain, cut: controller };
    running.add(stops);
    let outcome: SegmentOutcome;
    try {
      outcome = await runSegment(payload, {
        store,
        orchestrators,
        signal: controller.signal,
        drain: drain.signal,
        onAnswering: (seq) => dropSuspension(markers, suspendedKey(prefix, queueName, id), seq),
      });
    } catch (error) {
      if (error instanceof UnknownOrchestratorError || error instanceof ForeignPayloadError) {
        counts.refused += 1;
        emit({
          type: error instanceof UnknownOrchestratorError ? 'unknown_orchestrator' : 'refused',
          message: error.message,
          jobId: job.id,
          conversationId: id,
        });
        throw new UnrecoverableError(error.message);
      }
      if (controller.signal.aborted) {
        counts.handedBack += 1;
        await job.moveToWait(token);
        throw new WaitingError();
      }
      counts.retried += 1;
      emit({
        type: 'retry',
        message: `Segment of ${JSON.stringify(id)} failed (attempt ${job.attemptsMade + 1}), retried: ${(error as Error)?.message ?? error}`,
        jobId: job.id,
        conversationId: id,
      });
      throw error;
    } finally {
      running.delete(stops);
    }
    switch (outcome.status) {
      case 'ended':
        counts.ended += 1;
        return { status: 'ended', dispatchCount: outcome.dispatchCount };
      case 'suspended':
        counts.suspended += 1;
        await recordSuspension(
          markers,
          suspendedKey(prefix, queueName, id),
          outcome.seq,
          payload.orchestrator,
        );
        return { status: 'suspended', seq: outcome.seq, dispatchCount: outcome.dispatchCount };
      case 'stale':
        counts.stale += 1;
        if (outcome.stored?.status === 'suspended') {
          await recordSuspension(
            markers,
            suspendedKey(prefix, queueName, id),
            outcome.stored.seq,
            payload.orchestrator,
          );
        }
        emit({ type: 'stale', message: outcome.reason, jobId: job.id, conversationId: id });
        return { status: 'stale', reason: outcome.reason };
      case 'handed_back':
        counts.handedBack += 1;
        await job.moveToWait(token);
        throw new WaitingError();
      case 'held':
        if (outcome.fenced) {
          counts.fenced += 1;
          emit({
            type: 'fenced',
            message: `The run of ${JSON.stringify(id)} lost its lease to another worker; its commits were refused`,
            jobId: job.id,
            conversationId: id,
          });
        } else {
          counts.held += 1;
        }
        await job.moveToDelayed(outcome.retryAt, token);
        throw new DelayedError();
    }
  };

  /** Every processor call not yet returned: a segment is handed back only once its job has moved. */
  const active = new Set<Promise<unknown>>();
  const tracked = (job: Job, token?: string): Promise<unknown> => {
    const call = processor(job, token);
    active.add(call);
    call.then(
      () => active.delete(call),
      () => active.delete(call),
    );
    return call;
  };

  const worker = new Worker(queueName, tracked, {
    connection: client,
    prefix,
    concurrency,
    lockDuration,
    stalledInterval,
    maxStalledCount,
    ...(options.limiter === undefined
      ? {}
      : { limiter: { max: options.limiter.max, duration: options.limiter.duration } }),
    settings: { backoffStrategy: (attemptsMade: number) => backoffDelay(attemptsMade) },
    autorun: true,
  });
  worker.on('error', onRedisError);
  if (metrics !== undefined) worker.on('stalled', () => metrics.stalled());

  let closing: Promise<void> | undefined;
  return {
    async ready(timeoutMs = 5_000) {
      await bounded(worker.waitUntilReady(), url, timeoutMs, () => lastError).catch((error) => {
        throw error instanceof RedisUnreachableError
          ? error
          : new RedisUnreachableError(url, timeoutMs, error);
      });
      await bounded(client.ping(), url, timeoutMs, () => lastError);
    },
    stats: () => ({ ...counts }),
    close(closeOptions = {}) {
      closing ??= (async () => {
        const timeoutMs = closeOptions.timeoutMs ?? 10_000;
        draining = true;
        // BullMQ's close() cannot be forced once a graceful one is under way (a second call
        // returns the first), so: stop fetching, abort and wait for the segments ourselves
        // (bounded), then close once, forced only when some segment did not stop in time.
        const deadline = Date.now() + timeoutMs;
        await bounded(worker.pause(true), url, timeoutMs, () => lastError).catch(() => undefined);
        // First a drain: each segment lets its call in flight finish, commits that dispatch and
        // hands back there, so the next worker runs nothing twice. Past timeoutMs the rest are cut
        // (each stops at once, at a point the store can hold) and get CUT_GRACE_MS to let go.
        for (const stops of running) stops.drain.abort(new Error('the worker is draining'));
        const settled = async (until: number): Promise<void> => {
          while (active.size > 0 && Date.now() < until) {
            let timer: NodeJS.Timeout | undefined;
            await Promise.race([
              Promise.allSettled([...active]),
              new Promise<void>((resolve) => {
                timer = setTimeout(resolve, until - Date.now());
              }),
            ]);
            clearTimeout(timer);
          }
        };
        await settled(deadline);
        if (active.size > 0) {
          for (const stops of running) stops.cut.abort(new Error('the drain timed out'));
          await settled(Date.now() + CUT_GRACE_MS);
        }
        await Promise.race([worker.close(active.size > 0).catch(() => undefined), delay(1_000)]);
        closed = true;
        metrics?.close();
        await Promise.race([metricsQueue?.close().catch(() => undefined), delay(1_000)]);
        markers.disconnect();
        client.disconnect();
      })();
      return closing;
    },
  };
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
