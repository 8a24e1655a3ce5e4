/**
 * The options of `createRedisStore`, their defaults and their checks.
 */
import type { Redis } from 'ioredis';
import {
  checkInteger as checkStoreInteger,
  checkString,
  NETWORK_DEFAULTS,
} from '../shared/options.ts';

/** Options shared by both forms of {@link RedisStoreOptions}. */
export interface RedisStoreCommonOptions {
  /**
   * Prefix of every key the store writes (followed by `|`, so a prefix may not contain `|`).
   * Several stores (or apps) share one Redis with distinct prefixes, nested ones included (`co:`
   * and `co:c:` never write the same key). On Redis Cluster use a hash tag (`{co}:`) so every key is in one slot: the scripts
   * touch a conversation and its indexes together.
   * @default 'co:'
   */
  readonly prefix?: string | undefined;
  /**
   * How long an ended conversation is kept (from when it ended) before `purgeExpired()` deletes it.
   * @default 604_800_000 (7 days)
   */
  readonly retentionMs?: number | undefined;
  /**
   * How often the store runs `purgeExpired()` itself (an unref'd timer; its errors are ignored and
   * the next run retries). `0`: never, call `purgeExpired()` yourself.
   * @default 600_000 (10 minutes)
   */
  readonly purgeIntervalMs?: number | undefined;
  /**
   * The largest entry (an incremental commit, `append`: UTF-8 bytes) the store accepts; a larger
   * one is rejected with an error naming the conversation and both sizes.
   * @default 16_777_216 (16 MiB)
   */
  readonly maxCheckpointBytes?: number | undefined;
  /**
   * The largest snapshot or whole checkpoint (`state` + `result`, UTF-8 bytes) the store accepts:
   * what bounds a long conversation's whole state, while `maxCheckpointBytes` bounds one entry
   * (`append`). At most 536,870,912 (Redis's `proto-max-bulk-len` default, 512 MiB).
   * @default 268_435_456 (256 MiB)
   */
  readonly maxSnapshotBytes?: number | undefined;
  /**
   * How long one call may take, in milliseconds, before it rejects with an error naming the store
   * and what failed (a commit that timed out may or may not have been applied: its seq tells on
   * the next `acquire`). With `{ url }` it is also the client's `commandTimeout`.
   * @default 10_000
   */
  readonly commandTimeoutMs?: number | undefined;
}

/** The store makes and owns its `ioredis` client from a URL (closed by `close()`). */
export interface RedisUrlOptions extends RedisStoreCommonOptions {
  /** `redis://[user:password@]host:port[/db]` or `rediss://…` (TLS). */
  readonly url: string;
  /**
   * How long to wait for the TCP connection, in ms. While Redis is unreachable the client keeps
   * reconnecting and each call fails after one retry instead of queueing without end.
   * @default 5_000
   */
  readonly connectTimeoutMs?: number | undefined;
}

/** The store uses an `ioredis` client you made and own (it never closes it). */
export interface RedisClientOptions extends RedisStoreCommonOptions {
  /**
   * An `ioredis` client (`new Redis(...)`). Give it `maxRetriesPerRequest` and `commandTimeout`
   * bounds of your own; the store also bounds each call by `commandTimeoutMs`.
   */
  readonly client: Redis;
}

/** Options of {@link createRedisStore}: a `client` of yours or a `url`. */
export type RedisStoreOptions = RedisUrlOptions | RedisClientOptions;

/** The two ways to give createRedisStore its client, named in the error of options in neither form. */
export const CLIENT_FORMS = [
  ['client', 'an ioredis client'],
  ['url', 'a string'],
] as const;

export const DEFAULTS = {
  ...NETWORK_DEFAULTS,
  prefix: 'co:',
  commandTimeoutMs: 10_000,
} as const;

export function checkInteger(name: string, value: unknown, min: number): number {
  return checkStoreInteger('createRedisStore', name, value, min);
}

/** Between the prefix and the store's own key names; a prefix never contains it. */
export const KEY_SEPARATOR = '|';

export function checkPrefix(value: unknown): string {
  return checkString(
    'createRedisStore',
    'prefix',
    value,
    (prefix) => prefix.length <= 256 && !prefix.includes(KEY_SEPARATOR),
    `a string of at most 256 characters without \`${KEY_SEPARATOR}\``,
  );
}
