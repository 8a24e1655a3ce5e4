/**
 * What a durable conversation does with the store when its segment fails, aborts or is drained:
 * a pure decision on facts the run reads, so that every case is in one table
 * (test/durable/failure-plan.test.ts) and the run only carries the plan out.
 *
 * The conversation either stays resumable as last committed (released for `recover()` or
 * `resume()`; or, where the store does not hold what ran, marked as cut by an abort or its lease
 * left to lapse, so that the next holder raises the attempt of the call that was open), or its
 * failure is an ending (committed as ended, so `resume()` tells it again).
 */

import type { CutPoint } from '../loop/durability.ts';

export type { CutPoint };

/** What the run knows when it fails. */
export interface FailureFacts {
  /** Another process holds the conversation, or took it over (`ConversationLeaseError`). */
  readonly leaseLost: boolean;
  /** The segment is a `cancel()`'s: its failure is the conversation's ending. */
  readonly cancel: boolean;
  /** The state could never be stored (the codec refused it, or it is too large). */
  readonly unstorable: boolean;
  /** An abort (`ConversationAbortedError`: the caller's signal, a drain). */
  readonly aborted: boolean;
  /** A store failure (`CheckpointError` that is not `unstorable`). */
  readonly storeFailed: boolean;
  readonly cutAt: CutPoint;
  /** `durability: 'exit'` and not a drain: only endings and suspensions are committed. */
  readonly exit: boolean;
  /** Responder calls ran that the last landed commit does not hold. */
  readonly unsaved: boolean;
  /**
   * The segment took over a dead holder's lease and has not landed a commit: the raised attempt
   * (the crash mark) is not stored yet, and a release would erase it.
   */
  readonly crashMarkUnsaved: boolean;
  /** A resumed segment whose first commit has not landed: it changed nothing stored. */
  readonly resumedUncommitted: boolean;
  /** With `resumedUncommitted`: the segment took over a dead holder's lease. */
  readonly takenOver: boolean;
}

/** What to do, once the commit in flight (if any) has settled. Each leaves the result `kept` unless it says `ended`. */
export type FailurePlan =
  /** Let the lease go: the conversation stays as last committed. */
  | 'release'
  /** Do nothing: the lease lapses and the next holder takes over as after a crash. */
  | 'lapse'
  /**
   * An abort where the store cannot hold the point in memory: the last commit is written again,
   * marked as cut by an abort, then released; the next holder re-runs the open call with its
   * attempt raised, as after a crash, and says `cause: 'abort'`. If that write fails, the lease
   * lapses.
   */
  | 'mark_abort_then_release'
  /** Commit the point before the open call (its attempt raised), then release. */
  | 'reopen_then_release'
  /** Commit what ran if the store still lacks it (read again once the commit in flight landed), then release. */
  | 'commit_unsaved_then_release'
  /** Commit the failure as the conversation's ending (`ended`; if that commit fails, `kept`). */
  | 'commit_ended';

export function planFailure(facts: FailureFacts): FailurePlan {
  // Another process holds it: a release is refused unless the lease is ours.
  if (facts.leaseLost) return 'release';
  if (!facts.cancel && !facts.unstorable && (facts.aborted || facts.storeFailed)) {
    // Stays resumable. Work the store does not hold must not be hidden by a clean release, or
    // it would run again with attempt 1. ('exit' commits only endings and suspensions: a handoff
    // re-runs it all, but a crash mark must not be erased.)
    const holdsLess = facts.exit
      ? facts.crashMarkUnsaved
      : facts.cutAt === 'call' || facts.unsaved || facts.crashMarkUnsaved;
    if (!holdsLess) return 'release';
    // After an abort at a point the store can hold, that point is committed first; where it
    // cannot be (cut inside a step, or a takeover's crash mark not stored yet), the last commit
    // is marked as cut by an abort. After a store failure nothing can be written: the lease lapses.
    if (facts.aborted && facts.cutAt !== 'inside' && !facts.exit) {
      return facts.cutAt === 'call' ? 'reopen_then_release' : 'commit_unsaved_then_release';
    }
    return facts.aborted ? 'mark_abort_then_release' : 'lapse';
  }
  // A resumed segment that failed before its first commit landed changed nothing stored:
  // released it stays as it was (suspended, or running for recover()); one that took over a dead
  // holder's lease lapses instead, so its crash mark stays.
  if (!facts.cancel && !facts.unstorable && facts.resumedUncommitted) {
    return facts.takenOver ? 'lapse' : 'release';
  }
  return 'commit_ended';
}
