/**
 * Lease owners: `{host}/{pid}/{token}`, one per segment of a conversation (a run, a resume, a
 * recovery). Stores on one host (SQLite, memory) read the pid back to tell at once that a holder's
 * process is gone, instead of waiting for its lease to expire.
 */
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';

const HOST = hostname().replace(/\//g, '_') || 'localhost';

/** Tokens of the owners this process's runs hold right now (added and removed by the core). */
const liveHere = new Set<string>();

/** The token prefix of a `cancel()`'s owner: its hold is one commit, never a live run. */
const CANCEL_TOKEN = 'cancel-';

/**
 * A new owner for one segment of a conversation run by this process; `cancel` for a `cancel()`,
 * whose token says so, so that another process's `cancel()` finding it holding the lease waits for
 * its ending rather than reporting a live holder.
 */
export function newLeaseOwner(kind?: 'cancel'): string {
  return `${HOST}/${process.pid}/${kind === 'cancel' ? CANCEL_TOKEN : ''}${randomUUID()}`;
}

/** Whether `owner` is a `cancel()`'s (of any process, any host). */
export function isCancelOwner(owner: string | undefined): boolean {
  return owner !== undefined && (parseLeaseOwner(owner)?.token.startsWith(CANCEL_TOKEN) ?? false);
}

/** The parts of a lease owner. */
export interface LeaseOwnerParts {
  /** The host name of the process that made it. */
  readonly host: string;
  /** That process's id. */
  readonly pid: number;
  /** A random token, one per segment. */
  readonly token: string;
}

/** The host and pid an owner was made on, or `undefined` when it is not of that form. */
export function parseLeaseOwner(owner: string): LeaseOwnerParts | undefined {
  const match = /^(.+)\/(\d{1,10})\/([^/]+)$/.exec(owner);
  if (match === null) return undefined;
  return { host: match[1] as string, pid: Number(match[2]), token: match[3] as string };
}

/** Marks an owner of this process as running (or no longer). */
export function setLeaseOwnerLive(owner: string, live: boolean): void {
  if (live) liveHere.add(owner);
  else liveHere.delete(owner);
}

/**
 * Whether the holder `owner` may still be alive. `false` only when that is certain: the owner was
 * made on this host and its process is gone, or it was made by this process and no run of it
 * holds it any more. Anything else (another host, an unreadable owner) is `true`: wait for expiry.
 */
export function isLeaseOwnerAlive(owner: string): boolean {
  const parsed = parseLeaseOwner(owner);
  if (parsed === undefined || parsed.host !== HOST) return true;
  if (parsed.pid === process.pid) return liveHere.has(owner);
  try {
    process.kill(parsed.pid, 0);
  } catch (error) {
    // EPERM: a process with that pid exists (another user's); only ESRCH says it is gone.
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
  return !isZombie(parsed.pid);
}

/**
 * Whether `pid` is a zombie (killed or exited, its parent not having reaped it yet): it still
 * answers `kill(pid, 0)`, but runs nothing and will never renew a lease. Read from /proc where
 * there is one (Linux); elsewhere `false`, and the lease's expiry decides.
 */
function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // `pid (comm) S …`: the state follows the last `)`, as comm may hold one.
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state === 'Z' || state === 'X';
  } catch {
    return false;
  }
}
