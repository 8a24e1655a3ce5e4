/**
 * What a fleet worker takes and gives: its options, its handle and counts, and the one check that
 * turns the options into a worker's settings (every bad value refused at construction, named).
 */
import type { ConversationStore } from '../core/spi/store.ts';
import { asRegistry, type PrometheusRegistry } from '../observability/registry.ts';
import { describeConnection, type FleetConnection } from './connection.ts';
import { checkQueueName, DEFAULT_PREFIX, DEFAULT_QUEUE_NAME } from './jobs.ts';
import type { FleetOrchestrator } from './segment.ts';

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

/** The options of a worker, checked and with their defaults: what the worker runs with. */
export interface WorkerSettings {
  readonly queueName: string;
  readonly prefix: string;
  readonly store: ConversationStore;
  /** The orchestrators by name. */
  readonly orchestrators: ReadonlyMap<string, FleetOrchestrator>;
  readonly concurrency: number;
  readonly lockDuration: number;
  readonly stalledInterval: number;
  readonly maxStalledCount: number;
  readonly limiter: SegmentRateLimit | undefined;
  readonly registry: PrometheusRegistry | undefined;
  readonly metricsTimeoutMs: number;
  /** The server, for messages: `redis://host:port/db`, never with a password. */
  readonly url: string;
  readonly emit: (event: FleetEvent) => void;
}

function checkPositive(option: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 1) {
    throw new TypeError(`Expected \`${option}\` to be a positive integer, got ${String(value)}`);
  }
  return value;
}

/** The orchestrators by name: each durable (built with a store), no name twice. */
function indexOrchestrators(list: readonly FleetOrchestrator[]): Map<string, FleetOrchestrator> {
  if (!Array.isArray(list)) {
    throw new TypeError('Expected `orchestrators` to be an array of ConversationOrchestrators');
  }
  const orchestrators = new Map<string, FleetOrchestrator>();
  for (const o of list) {
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
  return orchestrators;
}

/** Checks a worker's options (throwing a `TypeError` naming the bad one) and fills in defaults. */
export function workerSettings(options: ConversationWorkerOptions): WorkerSettings {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected the options to be an object, got ${String(options)}`);
  }
  const queueName = checkQueueName(options.queueName ?? DEFAULT_QUEUE_NAME);
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const store = options.store;
  if (typeof store !== 'object' || store === null || typeof store.acquire !== 'function') {
    throw new TypeError('Expected `store` to be a ConversationStore');
  }
  const orchestrators = indexOrchestrators(options.orchestrators);
  const concurrency = checkPositive('concurrency', options.concurrency ?? 50);
  const lockDuration = checkPositive('lockDurationMs', options.lockDurationMs ?? 10_000);
  const stalledInterval = checkPositive('stalledIntervalMs', options.stalledIntervalMs ?? 5_000);
  const maxStalledCount = checkPositive('maxStalledCount', options.maxStalledCount ?? 1_000);
  const registry = options.registry === undefined ? undefined : asRegistry(options.registry);
  const metricsTimeoutMs = checkPositive('metricsTimeoutMs', options.metricsTimeoutMs ?? 1_000);
  return {
    queueName,
    prefix,
    store,
    orchestrators,
    concurrency,
    lockDuration,
    stalledInterval,
    maxStalledCount,
    limiter: options.limiter,
    registry,
    metricsTimeoutMs,
    url: describeConnection(options.connection),
    emit:
      options.onEvent ??
      ((event: FleetEvent) =>
        process.emitWarning(`${event.type}: ${event.message}`, { code: 'CONVERSATION_FLEET' })),
  };
}
