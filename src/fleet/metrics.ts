/**
 * The queue metrics of the workers of a process on a prom-client registry
 * (`createConversationWorker({ registry })`): one set of metrics per registry, a series per queue,
 * so several workers (of one queue or of several) share a registry:
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
  type PrometheusRegistry,
  registerCollector,
} from '../observability/registry.ts';
import { ScrapeCollector, ScrapeRead } from '../observability/scrape-read.ts';
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

/** One queue's share of the metrics: its series, its reads, the workers that feed it. */
class QueueEntry {
  readonly labels: Readonly<Record<string, string>>;
  readonly wait: HistogramSeries;
  stalled = 0;
  /** Workers of this queue on the registry, each with the BullMQ `Queue` it reads through. */
  readonly readers = new Set<{ readonly queue: Queue; readonly timeoutMs: number }>();
  /** One read of the queue per scrape (and per second), through the first worker still here. */
  #reads: ScrapeRead<QueueReading> | undefined;
  #through: { readonly queue: Queue; readonly timeoutMs: number } | undefined;

  constructor(queueName: string, histogram: CollectedHistogram) {
    this.labels = Object.freeze({ [LABEL_QUEUE]: queueName });
    this.wait = histogram.series(this.labels);
  }

  read(): Promise<QueueReading | undefined> {
    const reader = this.readers.values().next().value;
    if (reader === undefined) return Promise.resolve(undefined);
    if (this.#through !== reader || this.#reads === undefined) {
      this.#through = reader;
      this.#reads = new ScrapeRead(() => query(reader.queue), reader.timeoutMs, 1_000);
    }
    return this.#reads.read();
  }
}

async function query(queue: Queue): Promise<QueueReading> {
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
        : Math.max(0, Date.now() - first.timestamp - Math.max(first.delay, 0)) / 1000,
    completed: Number(completed.meta.count) || 0,
    failed: Number(failed.meta.count) || 0,
  };
}

/** The metrics of one registry: registered once, a series per queue. */
class RegistryMetrics {
  readonly #registry: PrometheusRegistry;
  readonly #names: readonly string[];
  readonly #wait: CollectedHistogram;
  readonly queues = new Map<string, QueueEntry>();

  constructor(registry: PrometheusRegistry) {
    this.#registry = registry;
    const wait = new CollectedHistogram(
      METRIC_QUEUE_JOB_WAIT,
      'Seconds a BullMQ job waited before a worker of this process took it (from when it was added, or its delay ran out).',
      [LABEL_QUEUE],
      WAIT_BUCKETS,
      EXEMPLAR_TRACE_ID,
    );
    this.#wait = wait;
    const entries = () => [...this.queues.values()];
    /** For each queue, what `pick` takes of its reading (none when Redis did not answer). */
    const perQueue = async (
      pick: (reading: QueueReading, entry: QueueEntry) => CollectedValue[],
    ): Promise<CollectedValue[]> => {
      const all = entries();
      const readings = await Promise.all(all.map((entry) => entry.read()));
      return all.flatMap((entry, i) => {
        const reading = readings[i];
        return reading === undefined ? [] : pick(reading, entry);
      });
    };
    const collectors: Collector[] = [
      new ScrapeCollector(
        METRIC_QUEUE_JOBS_STALLED,
        'Jobs the BullMQ workers of this process found stalled (their worker died or blocked past the lock) and moved back to wait.',
        'counter',
        () => entries().map((entry) => ({ value: entry.stalled, labels: entry.labels })),
      ),
      new ScrapeCollector(
        METRIC_QUEUE_OLDEST_WAITING,
        'Seconds the oldest job of the queue has waited (0 when none; read from Redis at scrape time).',
        'gauge',
        () => perQueue((r, e) => [{ value: r.oldestWaitingSeconds, labels: e.labels }]),
      ),
      new ScrapeCollector(
        BULLMQ_METRIC_JOB_COUNT,
        'Number of jobs in the queue by state',
        'gauge',
        () =>
          perQueue((r, e) =>
            Object.entries(r.counts).map(([state, value]) => ({
              value,
              labels: { ...e.labels, [LABEL_STATE]: state },
            })),
          ),
      ),
      new ScrapeCollector(
        BULLMQ_METRIC_JOBS_COMPLETED,
        'Total number of completed jobs',
        'counter',
        () => perQueue((r, e) => [{ value: r.completed, labels: e.labels }]),
      ),
      new ScrapeCollector(BULLMQ_METRIC_JOBS_FAILED, 'Total number of failed jobs', 'counter', () =>
        perQueue((r, e) => [{ value: r.failed, labels: e.labels }]),
      ),
    ];
    this.#names = [wait.name, ...collectors.map((c) => c.name)];
    assertFree(registry, this.#names);
    const registered: string[] = [];
    try {
      wait.register(registry);
      registered.push(wait.name);
      for (const collector of collectors) {
        registerCollector(registry, collector);
        registered.push(collector.name);
      }
    } catch (error) {
      // A registry that refuses one: none of them stays.
      this.#remove(registered);
      throw error;
    }
  }

  entry(queueName: string): QueueEntry {
    let entry = this.queues.get(queueName);
    if (entry === undefined) {
      entry = new QueueEntry(queueName, this.#wait);
      this.queues.set(queueName, entry);
    }
    return entry;
  }

  #remove(names: readonly string[]): void {
    const registry = this.#registry as PrometheusRegistry & {
      removeSingleMetric?: (name: string) => void;
    };
    for (const name of names) registry.removeSingleMetric?.(name);
  }

  /** Takes every metric off the registry (prom-client's `removeSingleMetric`). */
  remove(): void {
    this.#remove(this.#names);
  }
}

/** The metrics of each registry the workers of this process were given. */
const byRegistry = new WeakMap<PrometheusRegistry, RegistryMetrics>();

/** One worker's hold on the queue metrics of its registry; `close()` lets go. */
export class QueueMetrics {
  readonly #registry: PrometheusRegistry;
  readonly #metrics: RegistryMetrics;
  readonly #entry: QueueEntry;
  readonly #reader: { readonly queue: Queue; readonly timeoutMs: number };
  #closed = false;

  constructor(registry: PrometheusRegistry, queue: Queue, queueName: string, timeoutMs: number) {
    let metrics = byRegistry.get(registry);
    if (metrics === undefined) {
      metrics = new RegistryMetrics(registry);
      byRegistry.set(registry, metrics);
    }
    this.#registry = registry;
    this.#metrics = metrics;
    this.#entry = metrics.entry(queueName);
    this.#reader = { queue, timeoutMs };
    this.#entry.readers.add(this.#reader);
  }

  /** A job this worker took: how long it waited. */
  jobStarted(job: Job): void {
    const since = job.timestamp + Math.max(job.delay, 0);
    const taken = job.processedOn ?? Date.now();
    this.#entry.wait.observe(Math.max(0, taken - since) / 1000);
  }

  /** BullMQ's `stalled` event on this worker. */
  stalled(): void {
    this.#entry.stalled += 1;
  }

  /**
   * This worker is done. Its queue's series stay while another worker of the queue holds them
   * (counters never go back); the last worker on the registry takes every metric off it.
   */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#entry.readers.delete(this.#reader);
    const metrics = this.#metrics;
    for (const entry of metrics.queues.values()) if (entry.readers.size > 0) return;
    metrics.remove();
    byRegistry.delete(this.#registry);
  }
}
