/**
 * The Redis store against a real redis-server started by the test: every method and its races
 * (test/helpers/network-store-cases.ts), key prefixes, retention, ownership of the client, and
 * bad servers.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Lease } from '../../src/core/spi/store.ts';
import { createRedisStore } from '../../src/stores/redis/index.ts';
import { checkpoint, remoteOwner, storeCases } from '../helpers/network-store-cases.ts';
import { freePort } from '../helpers/prometheus.ts';
import { hasRedisServer, type RunningRedis, startRedis } from '../helpers/redis.ts';
import { silentServer } from '../helpers/silent-server.ts';

const LONG = 60_000;
let server: RunningRedis;

describe.runIf(hasRedisServer())('Redis store', () => {
  beforeAll(async () => {
    server = await startRedis({ aof: true });
  });
  afterAll(async () => {
    await server?.stop();
  });

  // maxSnapshotBytes below its 256 MiB default: the size case builds a string one byte past it.
  storeCases('redis', () =>
    createRedisStore({ url: server.url, maxSnapshotBytes: 20 * 1024 * 1024 }),
  );

  describe('keys', () => {
    it('writes only under its prefix, and two prefixes on one server do not see each other', async () => {
      const a = createRedisStore({ url: server.url, prefix: 'alpha:' });
      const b = createRedisStore({ url: server.url, prefix: 'beta:' });
      const client = new Redis(server.url);
      try {
        await a.create(checkpoint('same', 1), remoteOwner(), LONG);
        expect(await b.get('same')).toBeUndefined();
        expect((await b.create(checkpoint('same', 1), remoteOwner(), LONG)).created).toBe(true);
        const keys = (await client.keys('alpha:*')).sort();
        expect(keys).toEqual([
          'alpha:|c:same',
          'alpha:|ids',
          'alpha:|o:desks',
          'alpha:|orchestrators',
          'alpha:|os:desks:running',
          'alpha:|s:running',
        ]);
        expect(await a.delete('same')).toBe(true);
        expect((await client.keys('alpha:*')).sort()).toEqual(['alpha:|orchestrators']);
      } finally {
        client.disconnect();
        await a.close();
        await b.close();
      }
    });

    it('keeps stores with nested prefixes apart (co: and co:c:), and refuses a prefix with |', async () => {
      const outer = createRedisStore({ url: server.url, prefix: 'nest:' });
      const inner = createRedisStore({ url: server.url, prefix: 'nest:c:' });
      try {
        // Without a separator, outer's `c:x` and inner's `x` would both be the key nest:c:c:x.
        await outer.create(checkpoint('c:x', 1), remoteOwner(), LONG);
        expect(await inner.get('x')).toBeUndefined();
        expect((await inner.create(checkpoint('x', 1), remoteOwner(), LONG)).created).toBe(true);
        expect((await outer.list({ limit: 10 })).map((c) => c.conversationId)).toEqual(['c:x']);
        expect((await inner.list({ limit: 10 })).map((c) => c.conversationId)).toEqual(['x']);
      } finally {
        await outer.close();
        await inner.close();
      }
      expect(() => createRedisStore({ url: server.url, prefix: 'a|b' })).toThrow(
        'Expected `prefix` to be a string of at most 256 characters without `|`, got `"a|b"` (string) (createRedisStore)',
      );
    });
  });

  describe('retention', () => {
    it('purgeExpired() deletes ended conversations past retentionMs with their index entries', async () => {
      const prefix = `r${randomUUID()}:`;
      const store = createRedisStore({ url: server.url, prefix, retentionMs: 0 });
      const client = new Redis(server.url);
      try {
        const { lease } = (await store.create(checkpoint('ended', 1), remoteOwner(), LONG)) as {
          lease: Lease;
        };
        await store.create(checkpoint('running', 1), remoteOwner(), LONG);
        await store.commit(checkpoint('ended', 2, { status: 'ended', result: '{}' }), lease, LONG);
        await new Promise((r) => setTimeout(r, 5));
        expect(await store.purgeExpired()).toBe(1);
        expect(await store.get('ended')).toBeUndefined();
        expect((await store.get('running'))?.status).toBe('running');
        expect(await store.purgeExpired()).toBe(0);
        expect(await client.zrange(`${prefix}|ids`, 0, -1)).toEqual(['running']);
        expect(await client.zcard(`${prefix}|ended`)).toBe(0);
        expect(await client.zcard(`${prefix}|s:ended`)).toBe(0);
      } finally {
        client.disconnect();
        await store.close();
      }
    });
  });

  describe('ownership of the client', () => {
    it('leaves a given client open when it closes, and runs its scripts again after SCRIPT FLUSH', async () => {
      const client = new Redis(server.url);
      const store = createRedisStore({ client });
      await store.create(checkpoint(`own-${randomUUID()}`, 1), remoteOwner(), LONG);
      await client.script('FLUSH');
      expect(await store.get('nobody')).toBeUndefined();
      await store.close();
      expect(await client.ping()).toBe('PONG');
      client.disconnect();
    });
  });

  describe('bad servers and bad options', () => {
    // Accepts connections and never says a word.
    const silent = silentServer();

    it('fails a call to a server that never answers within commandTimeoutMs, naming the store', async () => {
      const store = createRedisStore({
        url: `redis://:secret@127.0.0.1:${silent.port}`,
        commandTimeoutMs: 300,
      });
      await expect(store.get('x')).rejects.toThrow(
        `Redis store (redis://127.0.0.1:${silent.port}): get of conversation "x" failed: no answer within`,
      );
      await store.close();
    });

    it('fails a call to a port nobody listens on, and to a host that does not exist', async () => {
      const port = await freePort();
      const refused = createRedisStore({ url: `redis://127.0.0.1:${port}` });
      await expect(refused.get('x')).rejects.toThrow(
        `Redis store (redis://127.0.0.1:${port}): get of conversation "x" failed: Redis is unreachable (connect ECONNREFUSED 127.0.0.1:${port}; `,
      );
      await refused.close();
      const nowhere = createRedisStore({ url: 'redis://no-such-host.invalid:6379' });
      await expect(nowhere.get('x')).rejects.toThrow(
        /^Redis store \(redis:\/\/no-such-host.invalid:6379\): get of conversation "x" failed: Redis is unreachable \(getaddrinfo (ENOTFOUND|EAI_AGAIN) no-such-host.invalid/,
      );
      await nowhere.close();
    });

    it('fails with a wrong password, naming the store and the refusal', async () => {
      const guarded = await startRedis({ args: ['--requirepass', 'right-one'] });
      try {
        const store = createRedisStore({
          url: `redis://:wrong-one@127.0.0.1:${guarded.port}`,
        });
        await expect(store.get('x')).rejects.toThrow(
          `Redis store (redis://127.0.0.1:${guarded.port}): get of conversation "x" failed: WRONGPASS invalid username-password pair or user is disabled.`,
        );
        await store.close();
        const right = createRedisStore({ url: `redis://:right-one@127.0.0.1:${guarded.port}` });
        expect(await right.get('x')).toBeUndefined();
        await right.close();
      } finally {
        await guarded.stop();
      }
    });

    it('rejects bad options at construction with the value shown', () => {
      expect(() => createRedisStore({ url: server.url, retentionMs: 1.5 })).toThrow(
        'Expected `retentionMs` to be an integer >= 0, got `1.5` (number) (createRedisStore)',
      );
      expect(() => createRedisStore({} as never)).toThrow(
        'Expected createRedisStore options with `client` (an ioredis client) or `url` (a string), got keys []',
      );
    });
  });
});
