/**
 * The Redis store under faults, on a real redis-server with AOF: the server SIGKILLed under commits
 * and restarted (with `appendfsync always`, and with `everysec`: a killed process loses nothing
 * either way, since each write reached the kernel before its reply; only a machine crash can lose
 * `everysec`'s last second), and writer processes SIGKILLed mid-commit many times.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { createRedisStore } from '../../src/stores/redis/index.ts';
import { checkpoint, remoteOwner } from '../helpers/network-store-cases.ts';
import { killServer, killWriters } from '../helpers/network-store-crash.ts';
import { hasRedisServer, type RunningRedis, startRedis } from '../helpers/redis.ts';

const servers: RunningRedis[] = [];

describe.runIf(hasRedisServer())('Redis store under faults', () => {
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  for (const appendfsync of ['always', 'everysec'] as const) {
    it(`loses no acknowledged commit when redis-server (AOF, appendfsync ${appendfsync}) is SIGKILLed, fails calls clearly meanwhile, and works after the restart`, async () => {
      const server = await startRedis({ aof: true, appendfsync });
      servers.push(server);
      const store = createRedisStore({
        url: server.url,
        connectTimeoutMs: 1_000,
        commandTimeoutMs: 2_000,
      });
      try {
        await killServer(
          store,
          { kill: () => server.kill('SIGKILL'), restart: () => server.restart() },
          new RegExp(
            `^Redis store \\(redis://127.0.0.1:${server.port}\\): (commit|get) of conversation "outage-\\d-\\d+" failed: (Redis is unreachable|no answer within)`,
          ),
        );
      } finally {
        await store.close();
      }
    }, 120_000);
  }

  it('loses every conversation when redis-server without AOF is SIGKILLed (what the docs warn of)', async () => {
    const server = await startRedis({ aof: false });
    servers.push(server);
    const store = createRedisStore({ url: server.url });
    try {
      const created = await store.create(checkpoint('volatile', 1), remoteOwner(), 60_000);
      expect(created.created).toBe(true);
      expect((await store.get('volatile'))?.seq).toBe(1);
      await server.kill('SIGKILL');
      await server.restart();
      expect(await store.get('volatile')).toBeUndefined();
    } finally {
      await store.close();
    }
  });

  it('keeps whole checkpoints and every confirmed commit across 12 SIGKILLs of the writer mid-commit', async () => {
    const server = await startRedis({ aof: true });
    servers.push(server);
    const store = createRedisStore({ url: server.url, prefix: 'crash:' });
    try {
      await killWriters(store, ['redis', server.url, 'crash:', '8'], 8, 12);
    } finally {
      await store.close();
    }
  }, 300_000);
});
