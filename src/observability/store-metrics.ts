/**
 * Gauges read from a `ConversationStore` at scrape time: what no single worker can count (the
 * conversations suspended in the store, how long the oldest has waited, the running ones no
 * worker holds). Every worker reading one store reports the same values; the ops rules take
 * their `max` over workers. A scrape never waits on the store for longer than `timeoutMs`, and
 * one read of the store is in flight at a time: while the store does not answer, scrapes say so
 * (`orchestrator_store_up` 0, the failure counted by reason) instead of sending more reads.
 */

import { fail, positiveInteger, positiveNumber } from '../core/shared/validate.ts';
import type { ConversationStore, StoreStats } from '../core/spi/store.ts';
import type { Series } from './collected-counter.ts';
import {
  asRegistry,
  assertFree,
  type Collector,
  type PrometheusRegistry,
  registerCollector,
} from './registry.ts';
import { ScrapeCollector, ScrapeRead, type ScrapeReadFailure } from './scrape-read.ts';
import {
  LABEL_ORCHESTRATOR,
  LABEL_REASON,
  LABEL_STORE,
  METRIC_CONVERSATIONS_SUSPENDED,
  METRIC_CONVERSATIONS_UNLEASED,
  METRIC_OLDEST_SUSPENDED,
  METRIC_STORE_READ_FAILURES,
  METRIC_STORE_UP,
  STORE_READ_FAILURE_REASONS,
} from './semconv.ts';
import { optionsObject, withMethods } from './shape.ts';

/** Options of `createStoreMetrics(options)`. */
export interface StoreMetricsOptions {
  /** The store to read (the one the orchestrators of this process use). */
  readonly store: ConversationStore;
  /** The prom-client registry the gauges are registered on (the telemetry's, usually). */
  readonly registry: PrometheusRegistry;
  /**
   * How long a scrape waits for the store. Past it (or when the store throws) the gauges expose
   * no series for that scrape, `orchestrator_store_up` is 0 and
   * `orchestrator_store_read_failures_total` counts one (`reason` `timeout` or `error`). A read
   * still unanswered is not sent again: the next scrapes wait for it (each at most `timeoutMs`).
   * @default 1000
   */
  readonly timeoutMs?: number;
  /**
   * Orchestrators whose recovery backlog is counted (one bounded `store.list()` each per scrape,
   * the ones with running conversations first come); the others get no backlog series.
   * @default 50
   */
  readonly maxOrchestrators?: number;
  /**
   * The most unleased running conversations counted per orchestrator (one page of
   * `store.list()`): past it the gauge says this many, a lower bound.
   * @default 1000
   */
  readonly maxUnleased?: number;
  /**
   * Reads at most this often: scrapes within it (the three gauges of one scrape, or several
   * Prometheus servers) share one read.
   * @default 1000
   */
  readonly minIntervalMs?: number;
  /**
   * The clock the oldest suspension's age is measured with (epoch milliseconds, like the store's
   * `suspendedAt`).
   * @default Date.now
   */
  readonly now?: () => number;
}

/** Why the last scrape-time read of the store answered nothing (`StoreMetrics.lastFailure`). */
export interface StoreReadFailure {
  /** `timeout`: no answer within `timeoutMs`; `error`: the store's call rejected. */
  readonly reason: 'timeout' | 'error';
  /** The store's error (with `reason` `error`): its message says what failed. */
  readonly error?: unknown;
  /** When the scrape gave up (epoch milliseconds, from `now`). */
  readonly at: number;
}

/** One read of the store: per orchestrator, its stats and unleased running conversations. */
interface Reading {
  readonly stats: readonly StoreStats[];
  readonly unleased: ReadonlyMap<string, number>;
  readonly at: number;
}

/** The store's gauges on a registry; `close()` takes them off it. */
export class StoreMetrics {
  readonly #store: ConversationStore;
  readonly #registry: PrometheusRegistry;
  readonly #timeoutMs: number;
  readonly #maxOrchestrators: number;
  readonly #maxUnleased: number;
  readonly #minIntervalMs: number;
  readonly #now: () => number;
  readonly #failures: Record<ScrapeReadFailure, Series>;
  readonly #names: readonly string[];
  readonly #reads: ScrapeRead<Reading>;
  #lastFailure: StoreReadFailure | undefined;

  constructor(options: StoreMetricsOptions) {
    optionsObject(options);
    withMethods('store', options.store, ['stats', 'list'], 'a ConversationStore (stats(), list())');
    this.#store = options.store;
    this.#registry = asRegistry(options.registry);
    this.#timeoutMs = positiveNumber('timeoutMs', options.timeoutMs ?? 1000);
    this.#maxOrchestrators = positiveInteger('maxOrchestrators', options.maxOrchestrators ?? 50);
    this.#maxUnleased = positiveInteger('maxUnleased', Math.min(options.maxUnleased ?? 1000, 1000));
    this.#minIntervalMs = positiveNumber('minIntervalMs', options.minIntervalMs ?? 1000);
    if (options.now !== undefined && typeof options.now !== 'function') {
      fail('now', 'a function', options.now);
    }
    this.#now = options.now ?? Date.now;
    let storeName = 'store';
    try {
      if (typeof this.#store.name === 'string' && this.#store.name !== '') {
        storeName = this.#store.name.slice(0, 64);
      }
    } catch {
      // A name that cannot be read: the generic label.
    }
    const series = (reason: ScrapeReadFailure): Series => ({
      labels: { [LABEL_STORE]: storeName, [LABEL_REASON]: reason },
      count: 0,
    });
    const failures: Record<ScrapeReadFailure, Series> = {
      timeout: series('timeout'),
      error: series('error'),
    };
    this.#failures = failures;
    this.#reads = new ScrapeRead(
      () => this.#query(),
      this.#timeoutMs,
      this.#minIntervalMs,
      (reason, error) => {
        failures[reason].count++;
        this.#lastFailure = { reason, error, at: this.#now() };
      },
    );
    // A gauge by orchestrator from the scrape's read: no series when the read answered nothing.
    const byOrchestrator = (
      name: string,
      help: string,
      values: (reading: Reading) => Iterable<readonly [orchestrator: string, value: number]>,
    ): Collector =>
      new ScrapeCollector(name, help, 'gauge', async () => {
        const reading = await this.#reads.read();
        if (reading === undefined) return [];
        return Array.from(values(reading), ([orchestrator, value]) => ({
          value,
          labels: { [LABEL_ORCHESTRATOR]: orchestrator },
        }));
      });
    const collectors: Collector[] = [
      byOrchestrator(
        METRIC_CONVERSATIONS_SUSPENDED,
        'Conversations suspended in the store, waiting for resume() (read from the store at scrape time).',
        (reading) => reading.stats.map((s) => [s.orchestrator, s.suspended]),
      ),
      byOrchestrator(
        METRIC_OLDEST_SUSPENDED,
        'Age in seconds of the oldest suspended conversation (0 when none; read at scrape time).',
        (reading) =>
          reading.stats.map((s) => [
            s.orchestrator,
            s.oldestSuspendedAt === undefined
              ? 0
              : Math.max(0, reading.at - s.oldestSuspendedAt) / 1000,
          ]),
      ),
      byOrchestrator(
        METRIC_CONVERSATIONS_UNLEASED,
        'Conversations running in the store whose lease no worker holds: the recovery backlog (read at scrape time).',
        (reading) => reading.unleased,
      ),
      // Read after the scrape's store read settled: a read failing in this scrape counts in it.
      new ScrapeCollector(
        METRIC_STORE_UP,
        'Whether the last scrape-time read of the store answered within timeoutMs (1) or failed or did not answer (0).',
        'gauge',
        async () => {
          const reading = await this.#reads.read();
          return [{ value: reading === undefined ? 0 : 1, labels: { [LABEL_STORE]: storeName } }];
        },
      ),
      new ScrapeCollector(
        METRIC_STORE_READ_FAILURES,
        'Scrape-time reads of the store that failed (reason error) or did not answer within timeoutMs (reason timeout).',
        'counter',
        async () => {
          await this.#reads.read();
          return STORE_READ_FAILURE_REASONS.map((reason) => ({
            value: failures[reason].count,
            labels: failures[reason].labels,
          }));
        },
      ),
    ];
    this.#names = collectors.map((c) => c.name);
    assertFree(this.#registry, this.#names);
    for (const collector of collectors) registerCollector(this.#registry, collector);
  }

  /**
   * Why the last read that answered nothing did (the reason and the store's error, for a log);
   * undefined before any. `orchestrator_store_up` says whether the last read answered.
   */
  get lastFailure(): StoreReadFailure | undefined {
    return this.#lastFailure;
  }

  /** Reads that failed or timed out so far (both reasons). */
  get failures(): number {
    return this.#failures.timeout.count + this.#failures.error.count;
  }

  async #query(): Promise<Reading> {
    const stats = await this.#store.stats();
    const at = this.#now();
    const unleased = new Map<string, number>();
    const running = stats.filter((s) => s.running > 0).slice(0, this.#maxOrchestrators);
    const pages = await Promise.all(
      running.map((s) =>
        this.#store.list({
          orchestrator: s.orchestrator,
          status: 'running',
          unleased: true,
          limit: this.#maxUnleased,
        }),
      ),
    );
    for (const s of stats) if (s.running === 0) unleased.set(s.orchestrator, 0);
    running.forEach((s, i) => {
      unleased.set(s.orchestrator, Math.min(pages[i]?.length ?? 0, this.#maxUnleased));
    });
    return { stats, unleased, at };
  }

  /** Takes the gauges off the registry (prom-client's `removeSingleMetric`). */
  close(): void {
    const registry = this.#registry as PrometheusRegistry & {
      removeSingleMetric?: (name: string) => void;
    };
    for (const name of this.#names) registry.removeSingleMetric?.(name);
  }
}

/**
 * Registers the store's gauges (`orchestrator_conversations_suspended`,
 * `orchestrator_oldest_suspended_seconds`, `orchestrator_conversations_unleased`), whether the
 * last read answered (`orchestrator_store_up`) and the count of failed reads by reason on
 * `registry`, read from `store` at scrape time within `timeoutMs`.
 * @example createStoreMetrics({ store, registry })
 */
export function createStoreMetrics(options: StoreMetricsOptions): StoreMetrics {
  return new StoreMetrics(options);
}
