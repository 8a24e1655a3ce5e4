/** The conformance kit against the Redis store on a real redis-server (AOF, a prefix per store). */
import { afterAll, beforeAll, describe } from 'vitest';
import { createRedisStore } from '../../src/stores/redis/index.ts';
import { hasRedisServer, type RunningRedis, startRedis } from '../helpers/redis.ts';
import { describeConversationStore } from '../helpers/store-conformance.ts';

let server: RunningRedis;
let prefixes = 0;

describe.runIf(hasRedisServer())('Redis store', () => {
  beforeAll(async () => {
    server = await startRedis({ aof: true });
  });
  afterAll(async () => {
    await server?.stop();
  });
  describeConversationStore('the Redis store', (options) =>
    createRedisStore({ url: server.url, prefix: `conformance${prefixes++}:`, ...options }),
  );
});
