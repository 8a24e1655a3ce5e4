/**
 * A worker's queue metrics on a prom-client registry (`createConversationWorker({ registry })`):
 * what this worker saw (how long each job it took had waited, the stalled jobs its BullMQ found)
 * and, read from Redis at scrape time, what the queue holds (BullMQ's own job counts, the age of
 * the oldest waiting job). Every worker of a queue reports the same queue-wide values; the ops
 * rules and dashboards take their `max` over workers. A scrape never waits on Redis for longer
 * than `timeoutMs`: past it (or when Redis fails) the queue-wide metrics have no series for that
 * scrape. Registered as scrape-time collectors, like the telemetry's: no prom-client is loaded.
 */
import type { Job, Queue } from 'bullmq';
import { CollectedHistogram, type HistogramSeries } from '../observability/dispatch-histogram.ts';
import {
  assertFree,
  type CollectedValue,
  type Collector,
  collected,
  type PrometheusRegistry,
  registerCollector,
} from '../observability/registry.ts';
import {
  BULLMQ_METRIC_JOB_COUNT,
  BULLMQ_METRIC_JOBS_COMPLETED,
  BULLMQ_METRIC_JOBS_FAILED,
  EXEMPLAR_TRACE_ID,
  LABEL_QUEUE,
  LABEL_STATE,
  METRIC_QUEUE_JOB_WAIT,
  METRIC_QUEUE_JOBS_STALLED,
  METRIC_QUEUE_OLDEST_WAITING,
} from '../observability/semconv.ts';

/** Seconds a job waited: from a few milliseconds (an idle fleet) to minutes (a backlog). */
const WAIT_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900];

/** What Redis said of the queue, shared by the metrics of one scrape. */
interface QueueReading {
  readonly counts: Readonly<Record<string, number>>;
  readonly oldestWaitingSeconds: number;
  readonly completed: number;
  readonly failed: number;
}

class ReadCollector implements Collector {
  readonly aggregator = 'sum' as const;
  constructor(
    public name: string,
    readonly help: string,
    readonly type: 'gauge' | 'counter',
    private readonly values: () => CollectedValue[] | Promise<CollectedValue[]>,
  ) {}

  async get() {
    return collected(this, await this.values());
  }

  reset(): void {}
}

/** The queue metrics of one worker; `close()` takes them off the registry. */
export class QueueMetrics {
  readonly #registry: PrometheusRegistry;
  readonly #queue: Queue;
  readonly #labels: Readonly<Record<string, string>>;
  readonly #timeoutMs: number;
  readonly #wait: HistogramSeries;
  readonly #names: readonly string[];
  #stalled = 0;
  #reading: Promise<QueueReading | undefined> | undefined;
  #readAt = Number.NEGATIVE_INFINITY;
  /** A read is under way: every metric (and scrape) shares it, however long it takes. */
  #inFlight = false;

  constructor(registry: PrometheusRegistry, queue: Queue, queueName: string, timeoutMs: number) {
    this.#registry = registry;
    this.#queue = queue;
    this.#labels = Object.freeze({ [LABEL_QUEUE]: queueName });
    this.#timeoutMs = timeoutMs;
    const labels = this.#labels;
    const wait = new CollectedHistogram(
      METRIC_QUEUE_JOB_WAIT,
      'Seconds a BullMQ job waited before this worker took it (from when it was added, or its delay ran out).',
      [LABEL_QUEUE],
      WAIT_BUCKETS,
      EXEMPLAR_TRACE_ID,
    );
    this.#wait = wait.series(labels);
    const read = async <T>(pick: (reading: QueueReading) => T): Promise<T | undefined> => {
      const reading = await this.#read();
      return reading === undefined ? undefined : pick(reading);
    };
    const collectors: Collector[] = [
      wait,
      new ReadCollector(
        METRIC_QUEUE_JOBS_STALLED,
        "Jobs this worker's BullMQ found stalled (their worker died or blocked past the lock) and moved back to wait.",
        'counter',
        () => [{ value: this.#stalled, labels }],
      ),
      new ReadCollector(
        METRIC_QUEUE_OLDEST_WAITING,
        'Seconds the oldest job of the queue has waited (0 when none; read from Redis at scrape time).',
        'gauge',
        async () => {
          const value = await read((r) => r.oldestWaitingSeconds);
          return value === undefined ? [] : [{ value, labels }];
        },
      ),
      new ReadCollector(
        BULLMQ_METRIC_JOB_COUNT,
        'Number of jobs in the queue by state',
        'gauge',
        async () =>
          (await read((r) =>
            Object.entries(r.counts).map(([state, value]) => ({
              value,
              labels: { ...labels, [LABEL_STATE]: state },
            })),
          )) ?? [],
      ),
      new ReadCollector(
        BULLMQ_METRIC_JOBS_COMPLETED,
        'Total number of completed jobs',
        'counter',
        async () => {
          const value = await read((r) => r.completed);
          return value === undefined ? [] : [{ value, labels }];
        },
      ),
      new ReadCollector(
        BULLMQ_METRIC_JOBS_FAILED,
        'Total number of failed jobs',
        'counter',
        async () => {
          const value = await read((r) => r.failed);
          return value === undefined ? [] : [{ value, labels }];
        },
      ),
    ];
    this.#names = collectors.map((c) => c.name);
    assertFree(registry, this.#names);
    wait.register(registry);
    for (const collector of collectors.slice(1)) registerCollector(registry, collector);
  }

  /** A job this worker took: how long it waited. */
  jobStarted(job: Job): void {
    const since = job.timestamp + (job.delay > 0 ? job.delay : 0);
    const taken = job.processedOn ?? Date.now();
    this.#wait.observe(Math.max(0, taken - since) / 1000);
  }

  /** BullMQ's `stalled` event on this worker. */
  stalled(): void {
    this.#stalled += 1;
  }

  /** One read of the queue for the metrics of a scrape (and of scrapes within a second). */
  #read(): Promise<QueueReading | undefined> {
    const now = performance.now();
    if (this.#reading !== undefined && (this.#inFlight || now - this.#readAt < 1_000)) {
      return this.#reading;
    }
    this.#readAt = now;
    this.#inFlight = true;
    let timer: NodeJS.Timeout | undefined;
    const reading = Promise.race([
      this.#query(),
      new Promise<undefined>((resolve) => {
        timer = setTimeout(() => resolve(undefined), this.#timeoutMs);
        timer.unref();
      }),
    ]).then(
      (value) => {
        clearTimeout(timer);
        this.#inFlight = false;
        if (value === undefined) this.#readAt = Number.NEGATIVE_INFINITY;
        return value;
      },
      () => {
        clearTimeout(timer);
        this.#inFlight = false;
        // The next scrape reads again rather than sharing a failure.
        this.#readAt = Number.NEGATIVE_INFINITY;
        return undefined;
      },
    );
    this.#reading = reading;
    return reading;
  }

  async #query(): Promise<QueueReading> {
    const queue = this.#queue;
    const [counts, oldest, completed, failed] = await Promise.all([
      queue.getJobCounts(),
      queue.getJobs(['wait'], 0, 0, true),
      queue.getMetrics('completed', 0, 0),
      queue.getMetrics('failed', 0, 0),
    ]);
    const first = oldest[0];
    return {
      counts,
      oldestWaitingSeconds:
        first === undefined
          ? 0
          : Math.max(0, Date.now() - first.timestamp - (first.delay > 0 ? first.delay : 0)) / 1000,
      completed: Number(completed.meta.count) || 0,
      failed: Number(failed.meta.count) || 0,
    };
  }

  /** Takes the metrics off the registry (prom-client's `removeSingleMetric`). */
  close(): void {
    const registry = this.#registry as PrometheusRegistry & {
      removeSingleMetric?: (name: string) => void;
    };
    for (const name of this.#names) registry.removeSingleMetric?.(name);
  }
}
