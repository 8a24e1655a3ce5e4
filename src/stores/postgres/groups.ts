import type { CommitOutcome } from '../../core/spi/store.ts';
import { type Settles, TurnQueue } from '../shared/group-commit.ts';

/**
 * The group commit's grouping, for commits and appends alike: a turn's items in statements of at
 * most `max`, at most one item per conversation in each (a conversation's later item waits for
 * its earlier one's answer, so its seq follows).
 */
export function sendInGroups<I>(
  pending: I[],
  idOf: (item: I) => string,
  max: number,
  send: (group: I[]) => Promise<void>,
  requeue: (items: I[]) => void,
): void {
  let left = pending;
  while (left.length > 0) {
    const group: I[] = [];
    const waiting: I[] = [];
    const rest: I[] = [];
    const ids = new Set<string>();
    for (const item of left) {
      const id = idOf(item);
      if (ids.has(id)) waiting.push(item);
      else if (group.length < max) {
        ids.add(id);
        group.push(item);
      } else rest.push(item);
    }
    left = rest;
    const sent = send(group);
    if (waiting.length > 0) void sent.then(() => requeue(waiting));
  }
}

/** A write waiting for its group: what the caller gave and how the caller is answered. */
export type Queued<W> = W & Settles<CommitOutcome>;

/**
 * One kind of grouped write `W` (commits, appends): how one is checked, named, sent alone and
 * sent with others in one statement, and the queue of the turn's writes waiting for their group.
 */
export interface WriteLane<W> {
  /** `commit`, `append`: the call, as error messages name it. */
  readonly kind: string;
  readonly idOf: (write: W) => string;
  /** What the write is, for its errors (`commit of conversation "c1"`). */
  readonly what: (write: W) => string;
  /** Throws when the write is refused before it is sent (too large). */
  readonly check: (write: W) => void;
  readonly one: (write: W) => Promise<CommitOutcome>;
  /** Sends a group in one statement, settling each of its writes. */
  readonly many: (group: readonly Queued<W>[]) => Promise<void>;
  /** The error of one write of a group that failed as a whole. */
  readonly fail: (what: string, cause: unknown) => Error;
  readonly queue: TurnQueue<Queued<W>>;
}

/** The lane of `spec`, its queue flushed in groups of at most `max`. */
export function writeLane<W>(spec: Omit<WriteLane<W>, 'queue'>, max: number): WriteLane<W> {
  const lane: WriteLane<W> = {
    ...spec,
    queue: new TurnQueue<Queued<W>>((pending) =>
      sendInGroups(
        pending,
        lane.idOf,
        max,
        (group) => sendGroup(lane, group),
        (waiting) => lane.queue.push(...waiting),
      ),
    ),
  };
  return lane;
}

/** The outcome of `write` once its group has been written. */
export function queuedWrite<W>(lane: WriteLane<W>, write: W): Promise<CommitOutcome> {
  return new Promise<CommitOutcome>((resolve, reject) =>
    lane.queue.push({ ...write, resolve, reject }),
  );
}

/** One group: resolves (never rejects) once each of its writes has its answer or error. */
function sendGroup<W>(lane: WriteLane<W>, group: readonly Queued<W>[]): Promise<void> {
  const only = group.length === 1 ? group[0] : undefined;
  const work = only === undefined ? lane.many(group) : lane.one(only).then(only.resolve);
  return work.catch((error: Error) => {
    if (only !== undefined) return only.reject(error);
    // Each caller's error names its own conversation.
    for (const p of group) {
      p.reject(
        lane.fail(
          `${lane.kind} of conversation "${lane.idOf(p)}" (in a group commit of ${group.length})`,
          error.cause ?? error,
        ),
      );
    }
  });
}
