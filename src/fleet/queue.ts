/**
 * The producer side: `createConversationQueue()` puts segments of conversations on a BullMQ queue
 * for the workers. It needs no store: a conversation is started once thanks to a Redis `SET NX`
 * marker (see markers.ts), and a suspension is answered once thanks to the job name
 * `resume.{id}.{seq}` plus the worker's check against the store.
 */
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import {
  CONVERSATION_ID_EXPECTED,
  isBoundedName,
  isConversationId,
} from '../core/shared/validate.ts';
import { ConversationExistsError, describeValue } from '../core/spi/errors.ts';
import type { ConversationStore } from '../core/spi/store.ts';
import {
  bounded,
  describeConnection,
  type FleetConnection,
  openClient,
  RedisUnreachableError,
} from './connection.ts';
import { checkQueueName, DEFAULT_PREFIX, DEFAULT_QUEUE_NAME, SEGMENT_JOB_OPTIONS } from './jobs.ts';
import { MARKER_TTL_MS, readResumeState, segmentKey, startedKey, suspendedKey } from './markers.ts';

/** How often a resume waiting for a running segment looks again. */
const RESUME_POLL_MS = 25;

import { jobIdOf, PAYLOAD_FORMAT, type SegmentPayload } from './payload.ts';
import { injectTrace } from './trace.ts';

/** What `createConversationQueue()` takes. */
export interface ConversationQueueOptions {
  /** The Redis of the queue: a `redis://` URL, ioredis options or an ioredis client (duplicated). */
  readonly connection: FleetConnection;
  /**
   * The BullMQ queue: its workers must run the orchestrators its conversations name. Give an
   * orchestrator a queue of its own to rate-limit it apart (the limiter is per queue).
   * @default 'conversations'
   */
  readonly queueName?: string;
  /**
   * BullMQ's key prefix.
   * @default 'bull'
   */
  readonly prefix?: string;
  /**
   * How long a call waits for Redis (to connect, then for each command) before rejecting with a
   * `RedisUnreachableError` naming it; a connection dropped under a command rejects with one too.
   * @default 5000
   */
  readonly timeoutMs?: number;
  /**
   * The store the workers share, when the producer can reach it. `resume()` then reads a
   * conversation the Redis markers say nothing of from the store: a suspension the store holds is
   * answered even when its worker died between committing it and recording it (without a store,
   * such an answer is told `{ enqueued: false }` until the job is recovered).
   */
  readonly store?: ConversationStore;
}

/** Options of `start()`. */
export interface StartOptions {
  /** The conversation's id (the core's rule: 1-128 characters). Refused when already started. */
  readonly conversationId: string;
}

/**
 * Options of `queue.resume()`. Not the core's `ResumeOptions` (`orchestrator.resume()`'s): an
 * answer sent through the queue has no signal of its caller to stop it.
 */
export interface FleetResumeOptions {
  /**
   * The person's answer: a message queued first when the conversation goes on.
   * @default undefined (nothing added)
   */
  readonly input?: unknown;
}

/**
 * @deprecated Use `FleetResumeOptions`: this name is also the core's `ResumeOptions` (the options
 * of `orchestrator.resume()`), a different type.
 */
export type ResumeOptions = FleetResumeOptions;

/** What `resume()` did. */
export interface ResumeOutcome {
  /**
   * True when a continuation was enqueued (or was already: a second resume of one suspension
   * enqueues nothing new and applies nothing); false when no suspension is recorded for the id
   * (it runs, has ended, or is unknown).
   */
  readonly enqueued: boolean;
  /** The suspension answered: the commit sequence of the suspended checkpoint. */
  readonly suspension?: number;
}

/** The producer handle. */
export interface ConversationQueue {
  /**
   * Enqueues a new conversation of the orchestrator named `orchestrator` with `input`. Rejects
   * with `ConversationExistsError` when the id was started already, also when two producers race.
   */
  start(orchestrator: string, input: unknown, options: StartOptions): Promise<void>;
  /**
   * Enqueues the continuation of a suspended conversation with a person's answer. A second resume
   * of the same suspension is a no-op: it resolves `{ enqueued: true }` and nothing is applied
   * twice (one job per suspension; the worker applies an answer only to the suspension it names).
   */
  resume(conversationId: string, options?: FleetResumeOptions): Promise<ResumeOutcome>;
  /** Closes the queue's connections; a call still waiting to connect rejects at once. Idempotent. */
  close(): Promise<void>;
}

/**
 * A message as the core's `run()`/`resume()` will check it, checked here before anything is
 * enqueued: a worker refusing it later would fail the job (or, for a resume, spend the suspension's
 * one answer) where the caller never sees it.
 */
function checkMessage(option: string, value: unknown): void {
  let ok = false;
  try {
    ok =
      typeof value === 'object' &&
      value !== null &&
      typeof (value as { sender?: unknown }).sender === 'string';
  } catch {}
  if (!ok) {
    const got =
      value === null
        ? 'null'
        : typeof value === 'object'
          ? 'an object without a string `sender`'
          : `${typeof value} ${String(value).slice(0, 60)}`;
    throw new TypeError(
      `Expected \`${option}\` to be a message ({ sender: string, content }), got ${got}`,
    );
  }
  try {
    JSON.stringify(value);
  } catch (error) {
    throw new TypeError(
      `Expected \`${option}\` to be a message the queue can carry as JSON, got one that JSON.stringify refuses: ${(error as Error).message}`,
    );
  }
}

/** Creates the producer side of a fleet (see docs/fleet.md). */
export function createConversationQueue(options: ConversationQueueOptions): ConversationQueue {
  if (typeof options !== 'object' || options === null) {
    throw new TypeError(`Expected the options to be an object, got ${String(options)}`);
  }
  const queueName = checkQueueName(options.queueName ?? DEFAULT_QUEUE_NAME);
  const prefix = options.prefix ?? DEFAULT_PREFIX;
  const timeoutMs = options.timeoutMs ?? 5_000;
  const store = options.store;
  if (store !== undefined && (typeof store !== 'object' || typeof store?.get !== 'function')) {
    throw new TypeError(
      `Expected \`store\` to be a ConversationStore (the workers'), got ${describeValue(store)}`,
    );
  }
  const url = describeConnection(options.connection);
  const client: Redis = openClient(options.connection, `co-producer:${queueName}`, {
    offlineQueue: false,
  });
  let lastError: unknown;
  client.on('error', (error) => {
    lastError = error;
  });
  const queue = new Queue(queueName, { connection: client, prefix });
  queue.on('error', (error) => {
    lastError = error;
  });
  let closed = false;

  /**
   * Waits (bounded) until the client is connected; with no offline queue, commands never wait.
   * Concurrent callers share one wait (one listener, however many calls are in flight); `close()`
   * rejects it at once.
   */
  let connecting: Promise<void> | undefined;
  let stopWaiting: (() => void) | undefined;
  const closedError = () =>
    new Error(`The conversation queue ${JSON.stringify(queueName)} is closed`);
  const ready = (): Promise<void> => {
    if (closed) return Promise.reject(closedError());
    if (client.status === 'ready') return Promise.resolve();
    connecting ??= new Promise<void>((resolve, reject) => {
      const settle = (error?: Error) => {
        clearTimeout(timer);
        client.off('ready', onReady);
        connecting = undefined;
        stopWaiting = undefined;
        if (error === undefined) resolve();
        else reject(error);
      };
      const timer = setTimeout(
        () => settle(new RedisUnreachableError(url, timeoutMs, lastError ?? 'no answer')),
        timeoutMs,
      );
      timer.unref();
      const onReady = () => settle();
      stopWaiting = () => settle(closedError());
      client.once('ready', onReady);
    });
    return connecting;
  };

  /**
   * One Redis command (or BullMQ call) of a producer, bounded by `timeoutMs`: a server that stops
   * answering, or a connection dropped under the command, rejects with a `RedisUnreachableError`
   * naming the server. An error Redis itself answered on a live connection comes through as is.
   */
  const command = <T>(operation: Promise<T>): Promise<T> =>
    bounded(operation, url, timeoutMs, () => lastError).catch((error: unknown) => {
      if (error instanceof RedisUnreachableError || client.status === 'ready') throw error;
      throw new RedisUnreachableError(url, timeoutMs, error);
    });

  return {
    async start(orchestrator, input, startOptions) {
      if (!isBoundedName(orchestrator)) {
        throw new TypeError(
          `Expected \`orchestrator\` to be an orchestrator's name, got ${JSON.stringify(orchestrator)}`,
        );
      }
      const id = startOptions?.conversationId;
      if (!isConversationId(id)) {
        throw new TypeError(
          `Expected \`conversationId\` to be ${CONVERSATION_ID_EXPECTED}, got ${describeValue(id)}`,
        );
      }
      checkMessage('input', input);
      const trace = injectTrace();
      const payload: SegmentPayload = {
        format: PAYLOAD_FORMAT,
        kind: 'start',
        orchestrator,
        conversationId: id,
        input,
        ...(trace === undefined ? {} : { trace }),
      };
      await ready();
      const key = startedKey(prefix, queueName, id);
      const token = `${orchestrator} ${Date.now()} ${Math.random().toString(36).slice(2)}`;
      // Claimed for a short while first (three times the bound of the add), then for the
      // marker's lifetime once the job is in: a producer killed between the two leaves the id
      // claimed for seconds, not for MARKER_TTL_MS with no job to run it.
      const taken = await command(client.set(key, token, 'PX', 3 * timeoutMs, 'NX'));
      if (taken !== 'OK') {
        throw new ConversationExistsError(id);
      }
      const jobId = jobIdOf('start', id);
      const keep = () =>
        command(
          client.eval(
            "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0",
            1,
            key,
            token,
            String(MARKER_TTL_MS),
          ),
        );
      /** Whose start job holds the id: this call's (`ours`), another's, or none. */
      const holder = async (): Promise<'ours' | 'other' | 'none'> => {
        const job = await command(queue.getJob(jobId));
        if (job === undefined || job === null) return 'none';
        return (job.data as { claim?: unknown } | undefined)?.claim === token ? 'ours' : 'other';
      };
      try {
        await command(
          queue.add('start', { ...payload, claim: token }, { ...SEGMENT_JOB_OPTIONS, jobId }),
        );
      } catch (error) {
        // Did the job get in all the same (its answer lost, not the add)? Asked on the same
        // connection, after the add. In: it is this call's start, kept. Not in: the id is given
        // back so that a retry can start it. Unknown (Redis still not answering): the short claim
        // is left to lapse, never deleted while the add may still land.
        const where = await holder().catch(() => undefined);
        if (where === 'ours') {
          await keep().catch(() => undefined);
          return;
        }
        if (where === 'none') {
          await command(
            client.eval(
              "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
              1,
              key,
              token,
            ),
          ).catch(() => undefined);
        }
        throw error;
      }
      // BullMQ keeps one job per id and answers an add of an existing one without adding it: a
      // start job of another call (its marker lapsed) still holds the id.
      if ((await holder()) === 'other') throw new ConversationExistsError(id);
      await keep();
    },

    async resume(conversationId, resumeOptions = {}) {
      if (!isConversationId(conversationId)) {
        throw new TypeError(
          `Expected \`conversationId\` to be ${CONVERSATION_ID_EXPECTED}, got ${describeValue(conversationId)}`,
        );
      }
      if (resumeOptions.input !== undefined) checkMessage('input', resumeOptions.input);
      await ready();
      // A segment still running may be about to suspend: the store commits a suspension before
      // the worker records it, so an answer sent in between waits (bounded) for the worker.
      const deadline = Date.now() + timeoutMs;
      let suspension: { readonly seq: number; readonly orchestrator: string } | undefined;
      for (;;) {
        const state = await command(
          readResumeState(
            client,
            suspendedKey(prefix, queueName, conversationId),
            segmentKey(prefix, queueName, conversationId),
          ),
        );
        suspension = state.suspension;
        if (suspension !== undefined) break;
        if (store !== undefined) {
          // The store knows: a suspension it holds is the one to answer (the worker checks its
          // seq again before applying the answer).
          let stored: Awaited<ReturnType<ConversationStore['get']>>;
          try {
            let timer: NodeJS.Timeout | undefined;
            stored = await Promise.race([
              Promise.resolve().then(() => store.get(conversationId)),
              new Promise<never>((_, reject) => {
                timer = setTimeout(
                  () => reject(new Error(`no answer to get() within ${timeoutMs} ms (timeoutMs)`)),
                  timeoutMs,
                );
              }),
            ]).finally(() => clearTimeout(timer));
          } catch (error) {
            throw new Error(
              `Could not read conversation ${JSON.stringify(conversationId)} from the store \`${String(store.name)}\`: ${error instanceof Error ? error.message : String(error)}`,
              { cause: error },
            );
          }
          if (stored?.status === 'suspended') {
            suspension = { seq: stored.seq, orchestrator: stored.orchestrator };
          }
          break;
        }
        if (!state.segmentRunning || Date.now() >= deadline) break;
        await new Promise((resolve) => setTimeout(resolve, RESUME_POLL_MS));
        if (closed) throw closedError();
      }
      if (suspension === undefined) return { enqueued: false };
      const trace = injectTrace();
      const payload: SegmentPayload = {
        format: PAYLOAD_FORMAT,
        kind: 'resume',
        orchestrator: suspension.orchestrator,
        conversationId,
        suspension: suspension.seq,
        ...(resumeOptions.input === undefined ? {} : { input: resumeOptions.input }),
        ...(trace === undefined ? {} : { trace }),
      };
      await command(
        queue.add('resume', payload, {
          ...SEGMENT_JOB_OPTIONS,
          jobId: jobIdOf('resume', conversationId, suspension.seq),
        }),
      );
      return { enqueued: true, suspension: suspension.seq };
    },

    async close() {
      if (closed) return;
      closed = true;
      stopWaiting?.();
      await queue.close().catch(() => undefined);
      client.disconnect();
    },
  };
}
