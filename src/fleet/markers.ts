/**
 * The fleet's own Redis keys beside BullMQ's, each changed by one command or one Lua script:
 * - `{prefix}:{queue}:co:started:{id}`: set once (`SET NX`) by the producer that starts a
 *   conversation, so two producers racing on one id cannot both start it, even after the start
 *   job has completed and been removed (BullMQ's jobId dedupe alone forgets removed jobs);
 * - `{prefix}:{queue}:co:suspended:{id}`: a hash `{ seq, orchestrator }` naming the suspension a
 *   conversation waits on, written by the worker when a segment suspends and dropped when a
 *   resume job hands the answer to the core. `resume()` reads it to name its job
 *   `resume.{id}.{seq}`: BullMQ keeps one job per name, so concurrent resumes of one suspension
 *   enqueue one job, and the worker checks `seq` against the store before applying it.
 */
import type { Redis } from 'ioredis';

/** Markers live this long (a suspension nobody answers, a started id) unless removed before. */
export const MARKER_TTL_MS = 30 * 24 * 3600 * 1000;

export function startedKey(prefix: string, queue: string, id: string): string {
  return `${prefix}:${queue}:co:started:${id}`;
}

export function suspendedKey(prefix: string, queue: string, id: string): string {
  return `${prefix}:${queue}:co:suspended:${id}`;
}

/**
 * Records a suspension unless a later one is recorded already (a slow worker must not put back an
 * older suspension over a newer one).
 */
const SET_SUSPENSION = `
local current = redis.call('HGET', KEYS[1], 'seq')
if current and tonumber(current) >= tonumber(ARGV[1]) then return 0 end
redis.call('HSET', KEYS[1], 'seq', ARGV[1], 'orchestrator', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1`;

/** Drops the suspension marker only when it still names that suspension. */
const DROP_SUSPENSION = `
if redis.call('HGET', KEYS[1], 'seq') == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

export async function recordSuspension(
  client: Redis,
  key: string,
  seq: number,
  orchestrator: string,
): Promise<void> {
  await client.eval(SET_SUSPENSION, 1, key, String(seq), orchestrator, String(MARKER_TTL_MS));
}

export async function dropSuspension(client: Redis, key: string, seq: number): Promise<void> {
  await client.eval(DROP_SUSPENSION, 1, key, String(seq));
}

/** The suspension a conversation waits on, as recorded, or `undefined`. */
export async function readSuspension(
  client: Redis,
  key: string,
): Promise<{ readonly seq: number; readonly orchestrator: string } | undefined> {
  const [seq, orchestrator] = await client.hmget(key, 'seq', 'orchestrator');
  if (seq === null || seq === undefined || orchestrator === null || orchestrator === undefined) {
    return undefined;
  }
  return { seq: Number(seq), orchestrator };
}
