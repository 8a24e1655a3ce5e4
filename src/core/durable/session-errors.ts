/**
 * The errors the store session (session.ts) raises, built from where the run stopped: each names
 * the conversation, the dispatch it reached and why, and carries the run's state back. Which of
 * them no retry can store (the conversation then ends as failed) is the session's to record.
 */
import type { DurableHost } from '../loop/durability.ts';
import {
  CheckpointError,
  ConversationError,
  ConversationLeaseError,
  describeCause,
  describeValue,
} from '../spi/errors.ts';
import { UnstorableValueError } from './checkpoint.ts';

/** Where the run stopped, as the errors tell it. */
export type StopPoint<S, C> = Pick<
  DurableHost<S, C>,
  'conversationId' | 'dispatchCount' | 'state' | 'elapsedMs'
>;

/**
 * A CheckpointError naming the conversation, where it was (`at`) and the offending value's path;
 * a ConversationError (already one of the run's) passes as it is.
 */
export function checkpointError<S, C>(
  at: StopPoint<S, C>,
  error: unknown,
  where: string,
): ConversationError<S, C> {
  if (error instanceof ConversationError) return error as ConversationError<S, C>;
  const path = error instanceof UnstorableValueError ? error.path : undefined;
  return new CheckpointError<S, C>(
    `Conversation ${at.conversationId} could not be checkpointed at ${where}: ${describeCause(error)}`,
    at.state(),
    at.elapsedMs(),
    path,
    error,
  );
}

/**
 * A whole commit of `bytes` past `max`, the limit the store sets (`limit`: `maxSnapshotBytes` on
 * an incremental store, `maxCheckpointBytes` on another).
 */
export function tooLargeError<S, C>(
  at: StopPoint<S, C>,
  max: number,
  limit: 'maxSnapshotBytes' | 'maxCheckpointBytes',
  bytes: number,
): CheckpointError<S, C> {
  return new CheckpointError<S, C>(
    `Conversation ${at.conversationId} could not be checkpointed at dispatch ${at.dispatchCount}: expected at most ${max} bytes (the store's ${limit}), got ${bytes}`,
    at.state(),
    at.elapsedMs(),
  );
}

/** The conversation grew to `bytes`, past `checkpoints.maxConversationBytes` (`max`). */
export function outgrownError<S, C>(
  at: StopPoint<S, C>,
  max: number,
  bytes: number,
): CheckpointError<S, C> {
  return new CheckpointError<S, C>(
    `Conversation ${at.conversationId} could not be checkpointed at dispatch ${at.dispatchCount}: it outgrew the orchestrator's checkpoints.maxConversationBytes: expected at most ${max} bytes in the store, got ${bytes}`,
    at.state(),
    at.elapsedMs(),
  );
}

/** The conversation was deleted from the store while this process ran it. */
export function deletedError<S, C>(at: StopPoint<S, C>): ConversationLeaseError<S, C> {
  return new ConversationLeaseError(
    `Conversation ${at.conversationId} was deleted from the store while it ran (its commit found no such conversation); this process stopped at dispatch ${at.dispatchCount} and invokes no more responders`,
    at.state(),
    at.elapsedMs(),
  );
}

/** Another process holds the conversation: `why` this process knows it. */
export function leaseLostError<S, C>(
  at: StopPoint<S, C>,
  why: string,
): ConversationLeaseError<S, C> {
  return new ConversationLeaseError(
    `Conversation ${at.conversationId} is held by another process: ${why}; this process stopped at dispatch ${at.dispatchCount} and invokes no more responders`,
    at.state(),
    at.elapsedMs(),
  );
}

/** Why a snapshot did not land, from the store's answer `outcome` (anything but `{ ok: true }`). */
export function snapshotFailure(outcome: unknown): Error {
  return new Error(
    typeof outcome === 'object' && outcome !== null && (outcome as { ok?: unknown }).ok === false
      ? `the store refused the snapshot (${String((outcome as { reason?: unknown }).reason)})`
      : `expected a snapshot outcome from the store, got ${describeValue(outcome)}`,
  );
}
