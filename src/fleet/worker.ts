/**
 * The BullMQ adapter of the fleet: a worker takes segment jobs, runs each through `runSegment`
 * (segment.ts) and maps the outcome onto BullMQ's own moves: completed (ended, suspended, stale),
 * back to wait (handed back by a drain), delayed (the lease is held elsewhere), failed for good
 * (an orchestrator it does not run, a payload that is not ours), retried with backoff (Redis or
 * the store unreachable). A dead worker's jobs are BullMQ's stalled jobs: another worker gets them
 * once their lock expires, and resumes each conversation from its last checkpoint.
 *
 * A job goes through named steps, in order: `#process` (claim it: parse, hand back when draining,
 * mark the segment running), `#runSegment` (run or resume it; the orchestrator is picked by
 * `runSegment`), `#settle` (the outcome as a BullMQ move), `#handBack` (to wait, for another
 * worker); `close()` drains (`#drain`) and then closes (`#disconnect`).
 */
import { randomUUID } from 'node:crypto';
import { DelayedError, type Job, Queue, UnrecoverableError, WaitingError, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { bounded, type FleetConnection, openClient, RedisUnreachableError } from './connection.ts';
import { UnknownOrchestratorError } from './errors.ts';
import { backoffDelay } from './jobs.ts';
import {
  dropSegment,
  dropSuspension,
  markSegment,
  recordSuspension,
  segmentKey,
  suspendedKey,
} from './markers.ts';
import { QueueMetrics } from './metrics.ts';
import { ForeignPayloadError, parsePayload, type SegmentPayload } from './payload.ts';
import { runSegment, type SegmentOutcome } from './segment.ts';
import {
  type CloseOptions,
  type ConversationWorker,
  type ConversationWorkerOptions,
  type ConversationWorkerStats,
  type WorkerSettings,
  workerSettings,
} from './worker-options.ts';

/** After a drain's timeout, how long cut segments get to let go before the worker closes. */
const CUT_GRACE_MS = 1_000;

type Counter = { -readonly [K in keyof ConversationWorkerStats]: number };

/** A running segment's two stops: `drain` (finish the call, commit, hand back), `cut`. */
interface Stops {
  readonly drain: AbortController;
  readonly cut: AbortController;
}

/** Starts a worker of a fleet (see docs/fleet.md). */
export function createConversationWorker(options: ConversationWorkerOptions): ConversationWorker {
  const worker = new FleetWorker(options.connection, workerSettings(options));
  // A plain handle, as before: its methods work detached from it.
  return {
    ready: (timeoutMs) => worker.ready(timeoutMs),
    stats: () => worker.stats(),
    close: (closeOptions) => worker.close(closeOptions),
  };
}

/**
 * One worker: its connections, BullMQ's `Worker`, the counts, and the segments running. Each step
 * of a job is one method; failures travel one way, as BullMQ's own errors (`WaitingError`,
 * `DelayedError`, `UnrecoverableError`) or the error a retry is for.
 */
class FleetWorker {
  readonly #settings: WorkerSettings;
  readonly #counts: Counter = {
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
  /** BullMQ's connection (blocking commands). */
  readonly #client: Redis;
  /** The markers' connection (short commands), also the metrics' reads of the queue. */
  readonly #markers: Redis;
  readonly #metricsQueue: Queue | undefined;
  readonly #metrics: QueueMetrics | undefined;
  readonly #worker: Worker;
  /** Each running segment's stops. */
  readonly #running = new Set<Stops>();
  /** Every processor call not yet returned: a segment is handed back only once its job has moved. */
  readonly #active = new Set<Promise<unknown>>();
  #lastError: unknown;
  #closed = false;
  #draining = false;
  #closing: Promise<void> | undefined;

  constructor(connection: FleetConnection, settings: WorkerSettings) {
    this.#settings = settings;
    const { queueName, prefix, registry } = settings;
    const onRedisError = (error: unknown) => this.#onRedisError(error);
    this.#client = openClient(connection, `co-worker:${queueName}`);
    this.#client.on('error', onRedisError);
    this.#markers = openClient(connection, `co-markers:${queueName}`);
    this.#markers.on('error', () => undefined);
    this.#metricsQueue =
      registry === undefined
        ? undefined
        : new Queue(queueName, { connection: this.#markers, prefix });
    this.#metricsQueue?.on('error', () => undefined);
    try {
      this.#metrics =
        registry === undefined || this.#metricsQueue === undefined
          ? undefined
          : new QueueMetrics(registry, this.#metricsQueue, queueName, settings.metricsTimeoutMs);
    } catch (error) {
      // A registry that refuses the metrics (their names taken): no connection is left open.
      this.#closed = true;
      void this.#metricsQueue?.close().catch(() => undefined);
      this.#markers.disconnect();
      this.#client.disconnect();
      throw error;
    }
    const limiter = settings.limiter;
    this.#worker = new Worker(queueName, (job, token) => this.#track(job, token), {
      connection: this.#client,
      prefix,
      concurrency: settings.concurrency,
      lockDuration: settings.lockDuration,
      stalledInterval: settings.stalledInterval,
      maxStalledCount: settings.maxStalledCount,
      ...(limiter === undefined
        ? {}
        : { limiter: { max: limiter.max, duration: limiter.duration } }),
      settings: { backoffStrategy: (attemptsMade: number) => backoffDelay(attemptsMade) },
      autorun: true,
    });
    this.#worker.on('error', onRedisError);
    const metrics = this.#metrics;
    if (metrics !== undefined) this.#worker.on('stalled', () => metrics.stalled());
  }

  async ready(timeoutMs = 5_000): Promise<void> {
    const { url } = this.#settings;
    const lastError = () => this.#lastError;
    await bounded(this.#worker.waitUntilReady(), url, timeoutMs, lastError).catch((error) => {
      throw error instanceof RedisUnreachableError
        ? error
        : new RedisUnreachableError(url, timeoutMs, error);
    });
    await bounded(this.#client.ping(), url, timeoutMs, lastError);
  }

  stats(): ConversationWorkerStats {
    return { ...this.#counts };
  }

  close(closeOptions: CloseOptions = {}): Promise<void> {
    this.#closing ??= (async () => {
      await this.#drain(closeOptions.timeoutMs ?? 10_000);
      await this.#disconnect();
    })();
    return this.#closing;
  }

  #onRedisError(error: unknown): void {
    // Our own disconnects at the end of close() are not worth an event.
    if (this.#closed) return;
    this.#lastError = error;
    this.#counts.redisErrors += 1;
    this.#settings.emit({
      type: 'redis_error',
      message: `${this.#settings.url}: ${(error as Error)?.message ?? error}`,
    });
  }

  /** BullMQ's processor: each call is tracked until it returns (see `#active`). */
  #track(job: Job, token?: string): Promise<unknown> {
    const call = this.#process(job, token);
    this.#active.add(call);
    call.then(
      () => this.#active.delete(call),
      () => this.#active.delete(call),
    );
    return call;
  }

  /** Claims a job: its payload checked, handed back when draining, its segment marked running. */
  async #process(job: Job, token?: string): Promise<unknown> {
    this.#metrics?.jobStarted(job);
    const payload = this.#parse(job);
    // Fetched as the drain began (BullMQ's pause lets a fetch under way finish): back to wait at
    // once, touching neither the store nor the conversation's lease.
    if (this.#draining) return this.#handBack(job, token);
    const { prefix, queueName } = this.#settings;
    // Marked running before the segment can commit anything: resume() waits on it (bounded 1 s
    // here: a Redis that does not answer fails the segment's own store calls anyway).
    const segment = segmentKey(prefix, queueName, payload.conversationId);
    // Unique to this run of the job: a paused worker's run coming back must not drop the mark of
    // the run that took its job over (both runs have the job's id).
    const runId = `${String(job.id)} ${randomUUID()}`;
    await Promise.race([
      markSegment(this.#markers, segment, runId).catch(() => undefined),
      new Promise((resolve) => setTimeout(resolve, 1_000).unref()),
    ]);
    try {
      return await this.#settle(job, token, payload, await this.#runSegment(job, token, payload));
    } finally {
      // After the outcome (and the suspension marker) is recorded; same connection, in order.
      void dropSegment(this.#markers, segment, runId).catch(() => undefined);
    }
  }

  /** The job's payload; a job that is not ours fails for good. */
  #parse(job: Job): SegmentPayload {
    try {
      return parsePayload(job.data);
    } catch (error) {
      this.#counts.refused += 1;
      this.#settings.emit({ type: 'refused', message: (error as Error).message, jobId: job.id });
      throw new UnrecoverableError(`Refused job ${job.id}: ${(error as Error).message}`);
    }
  }

  /** Runs or resumes the segment, stoppable by a drain or a cut. */
  async #runSegment(
    job: Job,
    token: string | undefined,
    payload: SegmentPayload,
  ): Promise<SegmentOutcome> {
    const { store, orchestrators, prefix, queueName } = this.#settings;
    const id = payload.conversationId;
    const stops: Stops = { drain: new AbortController(), cut: new AbortController() };
    if (this.#draining) stops.drain.abort(new Error('the worker is draining'));
    this.#running.add(stops);
    try {
      return await runSegment(payload, {
        store,
        orchestrators,
        signal: stops.cut.signal,
        drain: stops.drain.signal,
        onAnswering: (seq) =>
          dropSuspension(this.#markers, suspendedKey(prefix, queueName, id), seq),
      });
    } catch (error) {
      return await this.#failed(job, token, id, error, stops.cut.signal);
    } finally {
      this.#running.delete(stops);
    }
  }

  /**
   * A segment that threw: refused for good (an orchestrator we do not run, a payload not ours),
   * handed back (cut by a drain), or retried with backoff (Redis or the store failed).
   */
  async #failed(
    job: Job,
    token: string | undefined,
    id: string,
    error: unknown,
    cut: AbortSignal,
  ): Promise<never> {
    const emit = this.#settings.emit;
    if (error instanceof UnknownOrchestratorError || error instanceof ForeignPayloadError) {
      this.#counts.refused += 1;
      emit({
        type: error instanceof UnknownOrchestratorError ? 'unknown_orchestrator' : 'refused',
        message: error.message,
        jobId: job.id,
        conversationId: id,
      });
      throw new UnrecoverableError(error.message);
    }
    if (cut.aborted) return this.#handBack(job, token);
    this.#counts.retried += 1;
    emit({
      type: 'retry',
      message: `Segment of ${JSON.stringify(id)} failed (attempt ${job.attemptsMade + 1}), retried: ${(error as Error)?.message ?? error}`,
      jobId: job.id,
      conversationId: id,
    });
    throw error;
  }

  /** Settles the job as the outcome says: its return value, or a move BullMQ is told of. */
  async #settle(
    job: Job,
    token: string | undefined,
    payload: SegmentPayload,
    outcome: SegmentOutcome,
  ): Promise<unknown> {
    const id = payload.conversationId;
    switch (outcome.status) {
      case 'ended':
        this.#counts.ended += 1;
        return { status: 'ended', dispatchCount: outcome.dispatchCount };
      case 'suspended':
        this.#counts.suspended += 1;
        await this.#recordSuspension(id, outcome.seq, payload.orchestrator);
        return { status: 'suspended', seq: outcome.seq, dispatchCount: outcome.dispatchCount };
      case 'stale':
        this.#counts.stale += 1;
        if (outcome.stored?.status === 'suspended') {
          await this.#recordSuspension(id, outcome.stored.seq, payload.orchestrator);
        }
        this.#settings.emit({
          type: 'stale',
          message: outcome.reason,
          jobId: job.id,
          conversationId: id,
        });
        return { status: 'stale', reason: outcome.reason };
      case 'handed_back':
        return this.#handBack(job, token);
      case 'held':
        return this.#hold(job, token, id, outcome);
    }
  }

  /** Records a suspension for the producers' `resume()`. */
  #recordSuspension(id: string, seq: number, orchestrator: string): Promise<void> {
    const { prefix, queueName } = this.#settings;
    return recordSuspension(this.#markers, suspendedKey(prefix, queueName, id), seq, orchestrator);
  }

  /** Hands the job back to wait, for another worker (which goes on from the last commit). */
  async #handBack(job: Job, token: string | undefined): Promise<never> {
    this.#counts.handedBack += 1;
    await job.moveToWait(token);
    throw new WaitingError();
  }

  /** Delays the job until the other holder's lease expires (counted as fenced when we lost it). */
  async #hold(
    job: Job,
    token: string | undefined,
    id: string,
    outcome: Extract<SegmentOutcome, { status: 'held' }>,
  ): Promise<never> {
    if (outcome.fenced) {
      this.#counts.fenced += 1;
      this.#settings.emit({
        type: 'fenced',
        message: `The run of ${JSON.stringify(id)} lost its lease to another worker; its commits were refused`,
        jobId: job.id,
        conversationId: id,
      });
    } else {
      this.#counts.held += 1;
    }
    await job.moveToDelayed(outcome.retryAt, token);
    throw new DelayedError();
  }

  /**
   * Drains: no new job, each segment lets its call in flight finish, commits that dispatch and
   * hands back there (so the next worker runs nothing twice). Past `timeoutMs` the rest are cut
   * (each stops at once, at a point the store can hold) and get CUT_GRACE_MS to let go.
   */
  async #drain(timeoutMs: number): Promise<void> {
    this.#draining = true;
    // BullMQ's close() cannot be forced once a graceful one is under way (a second call returns
    // the first), so: stop fetching, abort and wait for the segments ourselves (bounded), then
    // close once, forced only when some segment did not stop in time.
    const deadline = Date.now() + timeoutMs;
    await bounded(
      this.#worker.pause(true),
      this.#settings.url,
      timeoutMs,
      () => this.#lastError,
    ).catch(() => undefined);
    for (const stops of this.#running) stops.drain.abort(new Error('the worker is draining'));
    await this.#settled(deadline);
    if (this.#active.size > 0) {
      for (const stops of this.#running) stops.cut.abort(new Error('the drain timed out'));
      await this.#settled(Date.now() + CUT_GRACE_MS);
    }
  }

  /** Waits until every processor call has returned, or `until` (epoch ms). */
  async #settled(until: number): Promise<void> {
    while (this.#active.size > 0 && Date.now() < until) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        Promise.allSettled([...this.#active]),
        new Promise<void>((resolve) => {
          timer = setTimeout(resolve, until - Date.now());
        }),
      ]);
      clearTimeout(timer);
    }
  }

  /** Closes BullMQ's worker (forced when a segment is still running), the metrics, the clients. */
  async #disconnect(): Promise<void> {
    await Promise.race([
      this.#worker.close(this.#active.size > 0).catch(() => undefined),
      delay(1_000),
    ]);
    this.#closed = true;
    this.#metrics?.close();
    await Promise.race([this.#metricsQueue?.close().catch(() => undefined), delay(1_000)]);
    this.#markers.disconnect();
    this.#client.disconnect();
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
