/**
 * How fleet mode's workers tell the producer's page what they ran: Redis pub/sub on one channel,
 * each message a JSON array of the `/ws` updates (dispatch and end, each with its `worker`, and
 * the producer's own `suspended`) a
 * worker collected over `FLUSH_MS`. Pub/sub is fire-and-forget: a message published while the
 * producer is disconnected is lost, which a live page can afford (it draws the next dispatch);
 * what counts (a conversation's ending) is read back from the shared store by the producer's sweep
 * (fleet-mode.ts), never from this channel alone. BullMQ's `QueueEvents` would carry progress
 * too, but as a stream entry per update and a job-progress write per dispatch.
 */
import type { Redis } from 'ioredis';
import type { LiveMessage } from '../live/updates.ts';

/** The pub/sub channel of the demo's fleet updates (one per queue). */
export function updatesChannel(queueName: string): string {
  return `conversation-orchestrator-demo:${queueName}:updates`;
}

/**
 * Fleet-internal, never sent to a page: a conversation suspended (an `approval` market's risk
 * desk waits for a person). It is no longer in flight, so the producer frees its slot.
 */
export interface SuspendedUpdate {
  readonly type: 'suspended';
  readonly orchestrator: string;
  readonly conversationId: string;
  readonly worker?: string;
}

/** What a worker publishes: the page's updates, and suspensions for the producer. */
export type FleetUpdate = LiveMessage | SuspendedUpdate;

/** A worker's updates are sent together at most this often. */
const FLUSH_MS = 50;
/** Past this many updates waiting (Redis away), the oldest are dropped: the page only watches. */
const MAX_PENDING = 10_000;

/** Batches updates and publishes them on the channel. */
export class UpdatePublisher {
  readonly #redis: Redis;
  readonly #channel: string;
  #pending: FleetUpdate[] = [];
  #timer: NodeJS.Timeout | undefined;
  dropped = 0;

  constructor(redis: Redis, channel: string) {
    this.#redis = redis;
    this.#channel = channel;
  }

  publish(update: FleetUpdate): void {
    if (this.#pending.length >= MAX_PENDING) {
      this.#pending.shift();
      this.dropped++;
    }
    this.#pending.push(update);
    this.#timer ??= setTimeout(() => void this.flush(), FLUSH_MS);
  }

  /** Sends what is waiting; a failed publish is dropped (and counted), never retried. */
  async flush(): Promise<void> {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (this.#pending.length === 0) return;
    const batch = this.#pending;
    this.#pending = [];
    try {
      await this.#redis.publish(this.#channel, JSON.stringify(batch));
    } catch {
      this.dropped += batch.length;
    }
  }
}

/** The updates in one channel message; anything else on the channel gives none. */
export function parseUpdates(message: string): FleetUpdate[] {
  try {
    const parsed: unknown = JSON.parse(message);
    if (!Array.isArray(parsed)) return [];
    return parsed.filter(
      (u): u is FleetUpdate =>
        typeof u === 'object' &&
        u !== null &&
        (u.type === 'dispatch' || u.type === 'end' || u.type === 'suspended') &&
        typeof u.orchestrator === 'string' &&
        typeof u.conversationId === 'string',
    );
  } catch {
    return [];
  }
}
