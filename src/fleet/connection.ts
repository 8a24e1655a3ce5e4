/**
 * Redis connections of the fleet: a URL, ioredis options or an ioredis client, each turned into
 * clients of our own (BullMQ's workers need `maxRetriesPerRequest: null`, so commands wait through
 * an outage instead of failing), and a bounded check that names the server when it cannot be
 * reached.
 */

import { Redis, type RedisOptions } from 'ioredis';
import { bounded as boundedCall } from '../core/shared/bounded.ts';
import { OrchestratorError } from '../core/spi/errors.ts';

/**
 * Where the queue lives: a `redis://` URL, ioredis options, or an ioredis client (which is
 * duplicated, never closed by the fleet).
 */
export type FleetConnection = string | RedisOptions | Redis;

/** Redis could not be reached (or answered an error) within the bound: names the server. */
export class RedisUnreachableError extends OrchestratorError {
  /** The class's name, for logs. */
  override readonly name = 'RedisUnreachableError';
  override readonly code: string = 'ERR_REDIS_UNREACHABLE';
  /** `redis://host:port/db`, without the password. */
  readonly url: string;
  constructor(url: string, timeoutMs: number, cause: unknown) {
    const why = cause instanceof Error ? cause.message : String(cause);
    super(`Could not reach Redis at ${url} within ${timeoutMs} ms: ${why}`, { cause });
    this.url = url;
  }
}

/** The server as `redis://host:port/db`, never with a password. */
export function describeConnection(connection: FleetConnection): string {
  if (typeof connection === 'string') {
    try {
      const url = new URL(connection);
      url.password = '';
      url.username = '';
      return url.toString().replace(/\/$/, '');
    } catch {
      return '(an unparsable Redis URL)';
    }
  }
  const o = connection instanceof Redis ? connection.options : connection;
  if (typeof o.path === 'string') return `redis+unix://${o.path}`;
  return `redis://${o.host ?? 'localhost'}:${o.port ?? 6379}/${o.db ?? 0}`;
}

/** What we pass to a client: ioredis 5's options, and 6's without the reply mapping. */
type ClientOptions = Omit<RedisOptions, 'replyMapping'>;

/**
 * A new client of ours on `connection`. Reconnects forever with a capped backoff (50 ms doubling
 * to 2 s): an outage delays work, it never loses it.
 */
export function openClient(
  connection: FleetConnection,
  name: string,
  options: { readonly offlineQueue?: boolean } = {},
): Redis {
  const offline = options.offlineQueue ?? true;
  // ioredis 6 types its reply mapping as a constructor type parameter; ours is always the default.
  const own: ClientOptions = {
    // A producer fails fast while Redis is away (its caller decides); a worker waits it out.
    maxRetriesPerRequest: offline ? null : 0,
    enableOfflineQueue: offline,
    connectionName: name,
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 2_000),
  };
  if (typeof connection === 'string') return new Redis(connection, own);
  const base: ClientOptions = connection instanceof Redis ? { ...connection.options } : connection;
  return new Redis({ ...base, ...own });
}

/** Runs `operation`, rejecting with a `RedisUnreachableError` when it takes longer than `timeoutMs`. */
export async function bounded<T>(
  operation: Promise<T>,
  url: string,
  timeoutMs: number,
  lastError: () => unknown,
): Promise<T> {
  return boundedCall(
    () => operation,
    timeoutMs,
    () => new RedisUnreachableError(url, timeoutMs, lastError() ?? 'no answer'),
  );
}
