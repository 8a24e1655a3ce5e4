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

/**
 * `{prefix}:{queue}:co:segment:{id}`: set (to the job id) by the worker while a segment of the
 * conversation runs, dropped once its outcome is recorded (after the suspension marker). A
 * `resume()` that finds no suspension marker but this one waits for the segment to finish: the
 * store commits a suspension before the worker can record it, and an answer sent in between would
 * otherwise be told `{ enqueued: false }`.
 */
export function segmentKey(prefix: string, queue: string, id: string): string {
  return `${prefix}:${queue}:co:segment:${id}`;
}

/** A segment marker outlives a worker killed mid-segment this long at most. */
export const SEGMENT_MARKER_TTL_MS = 3600 * 1000;

export async function markSegment(client: Redis, key: string, jobId: string): Promise<void> {
  await client.set(key, jobId, 'PX', SEGMENT_MARKER_TTL_MS);
}

/** Drops the segment marker only when it is still this job's (a later segment may own it). */
const DROP_SEGMENT = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

export async function dropSegment(client: Redis, key: string, jobId: string): Promise<void> {
  await client.eval(DROP_SEGMENT, 1, key, jobId);
}

/** The suspension a conversation waits on (or `undefined`), and whether a segment of it runs. */
export async function readResumeState(
  client: Redis,
  suspension: string,
  segment: string,
): Promise<{
  readonly suspension: { readonly seq: number; readonly orchestrator: string } | undefined;
  readonly segmentRunning: boolean;
}> {
  const replies = await client
    .multi()
    .hmget(suspension, 'seq', 'orchestrator')
    .exists(segment)
    .exec();
  for (const reply of replies ?? []) if (reply[0] !== null) throw reply[0];
  const [seq, orchestrator] = (replies?.[0]?.[1] ?? []) as (string | null)[];
  const running = replies?.[1]?.[1] === 1;
  return {
    suspension:
      seq === null || seq === undefined || orchestrator === null || orchestrator === undefined
        ? undefined
        : { seq: Number(seq), orchestrator },
    segmentRunning: running,
  };
}

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
