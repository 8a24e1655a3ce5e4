/**
 * The orchestrator's durable calls outside a run: reading a stored conversation before taking its
 * lease, acquiring it and starting its next segment (resume, recover, cancel), telling a stored
 * ending again, and waiting out another process's cancel().
 */
import type { RunConfig } from '../loop/config.ts';
import type { Resumption } from '../loop/durability.ts';
import { type CallOptions, ConversationRun } from '../loop/run.ts';
import { NO_USAGE } from '../loop/usage.ts';
import {
  CheckpointError,
  ConversationLeaseError,
  ConversationNotFoundError,
  describeValue as describe,
  describeCause,
  restoredFailure,
  type StoredFailure,
  settleUsage,
} from '../spi/errors.ts';
import type { AcquireOutcome, Checkpoint, Lease } from '../spi/store.ts';
import type { ConversationResult, ConversationState } from '../spi/types.ts';
import {
  type AbortMark,
  bounded,
  type CheckpointState,
  checkedOutcome,
  type FreshState,
} from './checkpoint.ts';
import { checkedState } from './checkpoint-check.ts';
import type { DurableConfig, Segment } from './config.ts';
import { checkedEntry, foldEntries } from './incremental.ts';
import { newLeaseOwner, setLeaseOwnerLive } from './lease-owner.ts';
import { StoreSession } from './session.ts';
import { acquireChecked } from './session-calls.ts';

/**
 * Reads the conversation before its lease is asked for (once per segment): one of another
 * orchestrator sharing the store is refused with `ConversationNotFoundError` without taking its
 * lease, which would erase the crash mark (a dead holder's lease) that its own orchestrator's
 * `recover()` reads as `cause: 'crash'` and a raised attempt.
 */
export function ownConversation<S, C>(
  config: RunConfig<S, C>,
  durable: DurableConfig,
  id: string,
  what: 'resumed' | 'cancelled',
): Promise<void> {
  return bounded(() => durable.store.get(id), durable.storeTimeoutMs, 'get')
    .then((stored) => checkedOutcome(durable.store, 'get', stored))
    .then(
      (stored) => {
        if (stored === undefined) throw new ConversationNotFoundError(id);
        if (stored.orchestrator !== config.name) {
          throw new ConversationNotFoundError(id, stored.orchestrator);
        }
      },
      (error: unknown) => {
        throw new CheckpointError(
          `Conversation ${id} could not be ${what}: ${describeCause(error)}`,
          emptyState<S, C>(id),
          0,
          undefined,
          error,
        );
      },
    );
}

/** How long cancel() waits for another process's cancel() of the same conversation to end it. */
const OTHER_CANCEL_WAIT_MS = 5_000;

/**
 * Whether the conversation ends (its stored status `ended`) within OTHER_CANCEL_WAIT_MS, looking
 * every 25 ms: another process's cancel() holds its lease for the commit of that ending.
 */
export async function endedByOtherCancel(durable: DurableConfig, id: string): Promise<boolean> {
  const until = Date.now() + OTHER_CANCEL_WAIT_MS;
  while (Date.now() < until) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    const stored = await bounded(() => durable.store.get(id), durable.storeTimeoutMs, 'get').catch(
      () => undefined,
    );
    if (stored?.status === 'ended') return true;
  }
  return false;
}

/** What resumeStored() answers cancel() for a conversation that had already ended. */
export const ALREADY_ENDED: unknown = Object.freeze({});

/** An empty state, for errors raised before anything of the conversation was loaded. */
export function emptyState<S, C>(id: string): ConversationState<S, C> {
  return {
    conversationId: id,
    projection: undefined as S,
    lastMessage: { sender: '', content: undefined as C },
    queueDepth: 0,
    dispatchCount: 0,
    history: [],
    usage: NO_USAGE,
  };
}

/**
 * Acquires a stored conversation and runs its next segment. `quiet`: a conversation another
 * process took (or that ended, or vanished) meanwhile resolves with `undefined` (for recover()).
 */
export async function resumeStored<S, C>(
  config: RunConfig<S, C>,
  durable: DurableConfig,
  id: string,
  options: CallOptions<C>,
  quiet: true,
): Promise<ConversationResult<S, C> | undefined>;
export async function resumeStored<S, C>(
  config: RunConfig<S, C>,
  durable: DurableConfig,
  id: string,
  options: CallOptions<C>,
): Promise<ConversationResult<S, C>>;
export async function resumeStored<S, C>(
  config: RunConfig<S, C>,
  durable: DurableConfig,
  id: string,
  options: CallOptions<C>,
  quiet = false,
): Promise<ConversationResult<S, C> | undefined> {
  const owner = newLeaseOwner(options.cancel === undefined ? undefined : 'cancel');
  // Live before the store sees it: a concurrent acquire must not take it for a dead one's.
  setLeaseOwnerLive(owner, true);
  let outcome: AcquireOutcome;
  try {
    outcome = await acquireChecked(durable, id, owner);
  } catch (error) {
    setLeaseOwnerLive(owner, false);
    throw new CheckpointError(
      `Conversation ${id} could not be resumed: ${describeCause(error)}`,
      emptyState<S, C>(id),
      0,
      undefined,
      error,
    );
  }
  if (outcome.status !== 'acquired') setLeaseOwnerLive(owner, false);
  // A store may be shared by orchestrators: another's conversation is not resumed (or answered)
  // here, whatever its state would fold into.
  if (
    (outcome.status === 'acquired' || outcome.status === 'ended') &&
    outcome.checkpoint.orchestrator !== config.name
  ) {
    if (outcome.status === 'acquired') {
      // Its id changed hands between ownConversation()'s read and this acquire. One taken over
      // from a dead holder is left to lapse (this owner is no longer live): a release would erase
      // the crash mark its own orchestrator's recover() reads as `cause: 'crash'` and a raised
      // attempt. Bounded like every store call: a store that never answers must not hang resume().
      await releaseUnlessTakenOver(durable, id, outcome);
      setLeaseOwnerLive(owner, false);
    }
    if (quiet) return undefined;
    throw new ConversationNotFoundError(id, outcome.checkpoint.orchestrator);
  }
  switch (outcome.status) {
    case 'not_found':
      if (quiet) return undefined;
      throw new ConversationNotFoundError(id);
    case 'held':
      throw new ConversationLeaseError(
        `Conversation ${id} is held by another live process (${outcome.owner}) until ${new Date(outcome.leaseExpiresAt).toISOString()}`,
        emptyState<S, C>(id),
        0,
        outcome.owner,
      );
    case 'ended': {
      if (options.cancel !== undefined) return ALREADY_ENDED as ConversationResult<S, C>;
      if (quiet) return undefined;
      return storedEnding<S, C>(durable, outcome.checkpoint);
    }
  }
  let restored: CheckpointState<S, C> | FreshState<C>;
  let decoded = false;
  const entries = outcome.entries ?? [];
  let baseDispatch = 0;
  let logBytes = 0;
  // The last commit's abort mark: the base's, or the last entry's when there are entries.
  let interrupted: AbortMark | undefined;
  try {
    const value = durable.codec.decode(outcome.checkpoint.state);
    decoded = true;
    restored = checkedState<S, C>(value, config.responders.length);
    interrupted = restored.interrupted;
    if (!('fresh' in restored)) baseDispatch = restored.dispatchCount;
    if (entries.length > 0) {
      // The base and the entries after it: the projection folds what each entry folded.
      decoded = false;
      const values = entries.map((text) => {
        logBytes += Buffer.byteLength(text);
        return durable.codec.decode(text);
      });
      decoded = true;
      const decodedEntries = values.map((value, i) => checkedEntry<C>(value, i + 1));
      interrupted = decodedEntries[decodedEntries.length - 1]?.interrupted;
      restored = checkedState<S, C>(
        foldEntries(config, restored, decodedEntries),
        config.responders.length,
      );
    }
  } catch (error) {
    // Released as it was: a process with the right version (or codec) can still resume it. One
    // taken over from a dead holder is left to lapse instead, so that its crash mark stays.
    await releaseUnlessTakenOver(durable, id, outcome);
    setLeaseOwnerLive(owner, false);
    throw new CheckpointError(
      decoded
        ? `Conversation ${id}'s checkpoint is not one this version can resume: ${describeCause(error)}`
        : `Conversation ${id}'s checkpoint could not be decoded: ${describeCause(error)}`,
      emptyState<S, C>(id),
      0,
      undefined,
      error,
    );
  }
  const segment: Segment<C> = {
    owner,
    lease: outcome.lease,
    checkpoint: outcome.checkpoint,
    takenOver: outcome.takenOver,
    interrupted,
    input: options.input,
    cancel: options.cancel,
    stored: {
      baseBytes: Buffer.byteLength(outcome.checkpoint.state),
      baseSeq: outcome.checkpoint.seq - entries.length,
      baseDispatch,
      logBytes,
      entries: entries.length,
    },
  };
  return new ConversationRun(
    config,
    restored.input,
    { conversationId: id, signal: options.signal, drain: options.drain },
    resumption(durable, config.name, segment, restored),
  ).execute();
}

/** What an ended conversation's resume answers: its stored result, or its stored failure. */
function storedEnding<S, C>(
  durable: DurableConfig,
  checkpoint: Checkpoint,
): ConversationResult<S, C> {
  const id = checkpoint.conversationId;
  let stored: (ConversationResult<S, C> & { error?: StoredFailure }) | null;
  try {
    stored = durable.codec.decode(checkpoint.result ?? 'null') as typeof stored;
    const error: unknown = stored?.error;
    if (
      stored !== null &&
      (typeof stored !== 'object' ||
        (error !== undefined && (typeof error !== 'object' || error === null)))
    ) {
      throw new TypeError(
        `expected \`result\` to be a result or a failure ({ error: { name, message, reason } }), got ${describe(stored)}`,
      );
    }
  } catch (error) {
    throw new CheckpointError(
      `Conversation ${id}'s stored ending could not be read: ${describeCause(error)}`,
      emptyState<S, C>(id),
      0,
      undefined,
      error,
    );
  }
  if (stored === null) throw new ConversationNotFoundError(id);
  if (stored.error !== undefined) {
    const error = restoredFailure<S, C>(
      stored.error,
      stored.state ?? emptyState<S, C>(id),
      stored.elapsedMs,
    );
    if (stored.usage !== undefined) settleUsage(error, stored.usage);
    throw error;
  }
  return stored;
}

/** The run of a stored conversation (`segment`, its decoded state `restored`), for the loop. */
function resumption<S, C>(
  durable: DurableConfig,
  orchestrator: string,
  segment: Segment<C>,
  restored: CheckpointState<S, C> | FreshState<C>,
): Resumption<S, C> {
  const fresh = 'fresh' in restored;
  const number = (restored.segment ?? 1) + 1;
  const invocations = fresh ? 0 : restored.invocations;
  return {
    position: fresh ? undefined : restored,
    cause: segment.cancel
      ? 'cancel'
      : segment.takenOver
        ? 'crash'
        : segment.interrupted === 'abort'
          ? 'abort'
          : segment.checkpoint.status === 'suspended'
            ? 'suspend'
            : 'handoff',
    segment: number,
    invocations,
    // After a crash, or an abort inside a step (its last commit marked), the call that was open
    // may have run: it runs again with its attempt raised (once, if both).
    attempt:
      (restored.attempt ?? 1) + (segment.takenOver || segment.interrupted === 'abort' ? 1 : 0),
    entries: segment.stored.entries,
    saved: restored.observers,
    input: segment.input,
    cancel: segment.cancel,
    open: (host) => new StoreSession(durable, orchestrator, host, segment, number, invocations),
  };
}

/**
 * Lets go of a conversation this resume acquired and will not run, bounded like every store call
 * (a store that never answers must not hang resume()). One taken over from a dead holder is left
 * to lapse instead: a release would erase the crash mark the next holder reads.
 */
async function releaseUnlessTakenOver(
  durable: DurableConfig,
  id: string,
  outcome: { readonly takenOver: boolean; readonly lease: Lease },
): Promise<void> {
  if (outcome.takenOver) return;
  await bounded(
    () => durable.store.release(id, outcome.lease),
    durable.storeTimeoutMs,
    'release',
  ).catch(() => {});
}
