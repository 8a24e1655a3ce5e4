/**
 * `conversation-orchestrator/redis`: the Redis conversation store, on `ioredis` (an optional peer
 * dependency: install it to use this entry point).
 */
export type {
  RedisClientOptions,
  RedisStoreCommonOptions,
  RedisStoreOptions,
  RedisUrlOptions,
} from './options.ts';
export { createRedisStore, type RedisStore } from './store.ts';
