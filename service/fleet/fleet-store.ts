/** The store fleet mode's producer and workers share: `--store`, or the Redis of `--redis`. */
import type { ConversationStore } from '../../src/index.ts';
import { createPostgresStore } from '../../src/stores/postgres/index.ts';
import { createRedisStore } from '../../src/stores/redis/index.ts';

/** `postgres://…` or `redis://…`: the store every process of the fleet opens. */
export function openFleetStore(redisUrl: string, storeUrl: string | undefined): ConversationStore {
  const url = storeUrl ?? redisUrl;
  return /^postgres(ql)?:/.test(url)
    ? createPostgresStore({ connectionString: url })
    : createRedisStore({ url });
}

/**
 * Fleet mode's timing (docs/fleet.md, "Timing and recovery time"): a worker killed mid-segment has
 * its conversations resumed elsewhere within max(lock + stalled check, lease), about 6 s, rather
 * than the library's 15 s defaults: a demo shows recovery while one watches.
 */
export const FLEET_TIMING = { lockDurationMs: 4_000, stalledIntervalMs: 2_000, leaseMs: 4_000 };
