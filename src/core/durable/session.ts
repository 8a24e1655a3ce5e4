/**
 * A durable run's store session: the only place a run calls the store. It creates a new
 * conversation, commits the loop's position (as `durability` says, group commit included), renews
 * the lease on a heartbeat, commits endings and suspensions, and carries out the failure plan
 * (failure-plan.ts) when the run fails. The loop reaches it through `RunDurability` and is read
 * through `DurableHost` (core/loop/durability.ts): the loop knows no store, lease nor codec.
 */
import { performance } from 'node:perf_hooks';
import type { CutPoint, DurabilityOpener, DurableHost, RunDurability } from '../loop/durability.ts';
import {
  CheckpointError,
  ConversationAbortedError,
  type ConversationError,
  ConversationExistsError,
  ConversationLeaseError,
} from '../spi/errors.ts';
import type { Checkpoint, ConversationStatus, Lease } from '../spi/store.ts';
import type { ConversationResult, ConversationSuspension, Message } from '../spi/types.ts';
import { bounded, checkedOutcome } from './checkpoint.ts';
import {
  type Built,
  type CheckpointMaker,
  checkpointsOf,
  creationOutgrown,
  endedState,
  entryPays,
  entryPossible,
  failureResult,
  freshState,
  snapshotWanted,
  stateOf,
  wholeLimit,
} from './commit-plan.ts';
import type { DurableConfig, Segment } from './config.ts';
import { planFailure } from './failure-plan.ts';
import { entryOf } from './incremental.ts';
import { newLeaseOwner, setLeaseOwnerLive } from './lease-owner.ts';
import { LogAccount } from './log-account.ts';
import { acquiredAsCommitted, landed, writeAbortMark } from './session-calls.ts';
import {
  checkpointError,
  deletedError,
  leaseLostError,
  outgrownError,
  tooLargeError,
} from './session-errors.ts';

/** How a durable orchestrator's new conversations open their store session. */
export function durabilityOpener<S, C>(
  durable: DurableConfig,
  orchestrator: string,
): DurabilityOpener<S, C> {
  return {
    mode: durable.durability,
    storeName: durable.store.name,
    open: (host) => new StoreSession(durable, orchestrator, host, undefined, 1, 0),
  };
}

/**
 * A run's store session (opened by `durabilityOpener` for a new conversation, by resume.ts's
 * `resumption` for a stored one's next segment).
 */
export class StoreSession<S, C> implements RunDurability<S, C> {
  readonly #durable: DurableConfig;
  readonly #host: DurableHost<S, C>;
  readonly #segment: Segment<C> | undefined;
  readonly #segmentNumber: number;
  #owner: string | undefined;
  #lease: Lease | undefined;
  #seq = 0;
  /** Invocations the last landed commit holds: more in the run means work a release would hide. */
  #committedInvocations: number;
  /** The queue of the last running commit that landed in this segment (its message objects). */
  #committedQueue: readonly Message<C>[] | undefined;
  #inflight: Promise<void> | undefined;
  #heartbeat: NodeJS.Timeout | undefined;
  /** What the store holds (incremental stores): the base, the entries after it, the snapshots. */
  readonly #log: LogAccount;
  /** This conversation's checkpoint at a seq (its id and orchestrator filled in). */
  readonly #checkpointAt: CheckpointMaker;
  /**
   * The CheckpointError of a state the codec refused or that outgrew the store's limit: no retry
   * can store it, so the conversation ends as failed instead of staying resumable.
   */
  #unstorable: CheckpointError<S, C> | undefined;

  constructor(
    durable: DurableConfig,
    orchestrator: string,
    host: DurableHost<S, C>,
    segment: Segment<C> | undefined,
    segmentNumber: number,
    invocations: number,
  ) {
    this.#durable = durable;
    this.#host = host;
    this.#segment = segment;
    this.#segmentNumber = segmentNumber;
    this.#committedInvocations = invocations;
    this.#log = new LogAccount(segment?.stored);
    this.#checkpointAt = checkpointsOf(host.conversationId, orchestrator);
    if (segment !== undefined) {
      this.#owner = segment.owner;
      this.#lease = segment.lease;
      this.#seq = segment.checkpoint.seq;
    }
  }

  get idle(): boolean {
    return this.#inflight === undefined;
  }

  create(): Promise<void> {
    const durable = this.#durable;
    const host = this.#host;
    const owner = newLeaseOwner();
    // Live before the store sees it: a concurrent acquire must not take it for a dead one's.
    setLeaseOwnerLive(owner, true);
    const failed = (error: unknown): never => {
      setLeaseOwnerLive(owner, false);
      throw error;
    };
    let state: string;
    try {
      state = durable.codec.encode(freshState(host.input, host.observations.save()));
    } catch (error) {
      return Promise.reject(this.#checkpointError(error, 'its input')).catch(failed);
    }
    const outgrown = creationOutgrown(durable.plan, state);
    // Nothing is stored: a conversation that cannot even be created fails at its start.
    if (outgrown !== undefined) {
      const error = outgrownError(host, durable.plan.maxConversationBytes, outgrown);
      return Promise.reject(error).catch(failed);
    }
    const checkpoint = this.#checkpointAt('running', 1, 0, state, undefined);
    const store = durable.store;
    return bounded(
      () => store.create(checkpoint, owner, durable.leaseMs),
      durable.storeTimeoutMs,
      'create',
    )
      .then((outcome) => checkedOutcome(store, 'create', outcome))
      .then(
        (outcome) => {
          if (!outcome.created) failed(new ConversationExistsError(host.conversationId));
          else {
            this.#owner = owner;
            this.#lease = outcome.lease;
            this.#seq = 1;
            this.#log.created(Buffer.byteLength(state));
          }
        },
        (error: unknown) => failed(this.#checkpointError(error, 'its creation')),
      );
  }

  begin(): void {
    if (this.#owner !== undefined) setLeaseOwnerLive(this.#owner, true);
    this.#heartbeat = setInterval(() => this.#renewIfIdle(), this.#durable.leaseMs / 3);
    this.#heartbeat.unref();
  }

  commit(reopen = false): Promise<void> {
    return this.#commit('running', undefined, reopen);
  }

  settle(
    result: ConversationResult<S, C>,
    suspension: ConversationSuspension | undefined,
  ): Promise<void> {
    // The question waits in the store with the conversation (a payload JSON cannot hold fails it).
    let text: string | undefined;
    if (suspension === undefined) {
      try {
        text = this.#durable.codec.encode(result);
      } catch (error) {
        throw this.#checkpointError(error, 'its result');
      }
    }
    // Suspensions and endings are committed whatever the durability, after any commit in flight.
    return this.#afterInflight(() =>
      this.#commit(suspension === undefined ? 'ended' : 'suspended', text),
    );
  }

  fail(
    error: ConversationError<S, C>,
    cutAt: CutPoint,
    draining: boolean,
  ): Promise<boolean> | undefined {
    const durable = this.#durable;
    const lease = this.#lease;
    // A durable run that failed before its creation landed stored nothing: no ending either.
    if (lease === undefined) return undefined;
    const host = this.#host;
    const segment = this.#segment;
    const cancel = segment?.cancel;
    const unstorable = error === this.#unstorable;
    const kept = (): boolean => false;
    const release = (): Promise<void> =>
      bounded(
        () => durable.store.release(host.conversationId, this.#lease ?? lease),
        durable.storeTimeoutMs,
        'release',
      );
    const crashMarkUnsaved = (): boolean =>
      segment?.takenOver === true && this.#seq === segment.checkpoint.seq;
    const unsaved = (): boolean =>
      host.invocations > this.#committedInvocations || crashMarkUnsaved();
    const plan = planFailure({
      leaseLost: error instanceof ConversationLeaseError,
      cancel: cancel !== undefined,
      unstorable,
      aborted: error instanceof ConversationAbortedError,
      storeFailed: error instanceof CheckpointError,
      cutAt,
      // A drain hands back at a commit point in every mode: with 'exit', what ran is committed
      // there too (the process leaves; another goes on from there, running nothing twice).
      exit: durable.durability === 'exit' && !draining,
      unsaved: host.invocations > this.#committedInvocations,
      crashMarkUnsaved: crashMarkUnsaved(),
      resumedUncommitted: segment !== undefined && this.#seq === segment.checkpoint.seq,
      takenOver: segment?.takenOver === true,
    });
    switch (plan) {
      case 'release':
        return this.#afterInflight(release).then(kept, kept);
      case 'lapse':
        return this.#afterInflight(() => Promise.resolve()).then(kept, kept);
      case 'mark_abort_then_release':
        // Once the commit in flight has landed: the mark is written on what the store holds. If
        // it cannot be written the lease lapses (the next holder says `crash`).
        return this.#afterInflight(() => this.#markAbort().then(release)).then(kept, kept);
      case 'reopen_then_release':
        return this.#afterInflight(() =>
          this.#commit('running', undefined, true).then(release),
        ).then(kept, kept);
      case 'commit_unsaved_then_release':
        // Read once the commit in flight has landed: it may hold what ran.
        return this.#afterInflight(() =>
          unsaved() ? this.#commit('running', undefined, false).then(release) : release(),
        ).then(kept, kept);
      case 'commit_ended':
        break;
    }
    // A failure is an ending: committed as ended with what failed, so resume() tells it again.
    // An unstorable state is not stored with its failure either (it is what could not be).
    const text = failureResult(durable.codec, host.conversationId, error, unstorable);
    return this.#afterInflight(() => this.#commit('ended', text)).then(
      () => true,
      (failed: unknown) => {
        // Not stored as ended: it stays running for recover(), which will end it again. cancel()
        // learns why it did not end (the store failed, another process took it).
        if (cancel === undefined) return false;
        throw failed;
      },
    );
  }

  failedEnding(error: ConversationError<S, C>): Promise<void> | undefined {
    const durable = this.#durable;
    const lease = this.#lease;
    // Dispatches the store does not hold (the last one, whose ending did not land) must not be
    // hidden by a clean release: the lease is left to lapse, so the next holder re-runs them with
    // the attempt raised, as after a crash.
    if (
      lease === undefined ||
      error instanceof ConversationLeaseError ||
      (durable.durability !== 'exit' && this.#host.invocations > this.#committedInvocations)
    ) {
      return undefined;
    }
    const done = (): void => {};
    return bounded(
      () => durable.store.release(this.#host.conversationId, lease),
      durable.storeTimeoutMs,
      'release',
    ).then(done, done);
  }

  stop(): void {
    if (this.#heartbeat !== undefined) {
      clearInterval(this.#heartbeat);
      this.#heartbeat = undefined;
    }
  }

  end(): void {
    if (this.#owner !== undefined) setLeaseOwnerLive(this.#owner, false);
  }

  /**
   * Writes the last commit again, marked as cut by an abort (`AbortMark`): read back with an
   * acquire by this very owner (what the next holder would read), then committed whole, or, when
   * the store holds entries after its base, appended as an entry that folds nothing. Rejects
   * when the store does not hold the conversation as this session last committed it, or when a
   * store call fails: the caller then leaves the lease to lapse.
   */
  async #markAbort(): Promise<void> {
    const id = this.#host.conversationId;
    const acquired = await acquiredAsCommitted(
      this.#durable,
      id,
      (this.#lease as Lease).owner,
      this.#seq,
    );
    this.#lease = acquired.lease;
    const { seq, lease } = await writeAbortMark(this.#durable, id, acquired);
    this.#seq = seq;
    this.#lease = lease;
  }

  #afterInflight<T>(next: () => Promise<T>): Promise<T> {
    const inflight = this.#inflight;
    return inflight === undefined ? next() : inflight.then(next, next);
  }

  /**
   * Commits the conversation's current state (`status`, with `result` text when it ended): an
   * entry or the whole state (`#build`). Resolves when the store has it; rejects with a
   * CheckpointError (unstorable value, store failure or timeout) or a ConversationLeaseError
   * (refused: another process holds it).
   */
  #commit(status: ConversationStatus, result?: string, reopen = false): Promise<void> {
    const durable = this.#durable;
    const host = this.#host;
    let built: Built;
    try {
      built = this.#build(status, result, reopen);
    } catch (error) {
      return Promise.reject(error);
    }
    const { checkpoint, entry } = built;
    const seq = built.seq;
    const started = performance.now();
    const invocations = reopen ? host.invocations - 1 : host.invocations;
    const lease = this.#lease as Lease;
    const observations = host.observations;
    const store = durable.store;
    const landedNow = (): void => {
      this.#seq = seq;
      this.#committedInvocations = invocations;
      this.#committedQueue = built.queue as readonly Message<C>[] | undefined;
      // What landed is in the store: the next entry starts after it.
      const folded = host.folded;
      if (folded !== undefined && built.foldedUpTo > 0) {
        if (folded.length === built.foldedUpTo) folded.length = 0;
        else folded.splice(0, built.foldedUpTo);
      }
      if (observations.wantsWrites) {
        observations.written({
          kind: entry === undefined ? 'whole' : 'entry',
          bytes: built.bytes,
          durationMs: performance.now() - started,
        });
      }
      if (entry === undefined) this.#log.wholeLanded(built.bytes, seq, built.dispatchCount);
      else {
        this.#log.entryLanded(built.bytes);
        const snapshot = built.snapshot;
        if (snapshot !== undefined) {
          this.#log.snapshot(
            durable,
            snapshot,
            built.snapshotBytes,
            this.#lease as Lease,
            // Read when the snapshot answers: a run that has ended by then tells nobody.
            () => this.#host.observations,
          );
        }
      }
    };
    const commit = bounded(
      () =>
        entry === undefined
          ? store.commit(checkpoint as Checkpoint, lease, durable.leaseMs)
          : (store.append as NonNullable<typeof store.append>).call(
              store,
              entry,
              lease,
              durable.leaseMs,
            ),
      durable.storeTimeoutMs,
      `${entry === undefined ? 'commit' : 'append'} (seq ${seq})`,
    )
      .then((outcome) => checkedOutcome(store, entry === undefined ? 'commit' : 'append', outcome))
      .then(
        (outcome) => {
          observations.checkpointed(performance.now() - started, undefined, false);
          if (!outcome.ok) {
            observations.leaseConflict();
            throw outcome.reason === 'not_found'
              ? deletedError(host)
              : leaseLostError(host, `its commit was refused (${outcome.reason})`);
          }
          this.#lease = outcome.lease;
          landedNow();
        },
        async (error: unknown) => {
          // A commit whose answer was lost (a timeout, a dropped connection) may have landed:
          // asked once, so that a stored ending is not run again by recover() nor left uncounted,
          // and a stored dispatch is counted and goes on (it would not run again on resume). A
          // running checkpoint counts as ours only while our lease still holds it.
          if (
            await landed(
              durable,
              host.conversationId,
              seq,
              status,
              status === 'running' ? lease.owner : undefined,
            )
          ) {
            observations.checkpointed(performance.now() - started, undefined, false);
            landedNow();
            return;
          }
          observations.checkpointed(performance.now() - started, error, true);
          throw this.#checkpointError(error, `the commit of dispatch ${built.dispatchCount}`);
        },
      );
    this.#inflight = commit;
    const done = (): void => {
      if (this.#inflight === commit) this.#inflight = undefined;
    };
    commit.then(done, done);
    return commit;
  }

  /**
   * What to commit now: on an incremental store, a running conversation past the size of a
   * whole commit writes an entry (the messages folded since the last commit, and the rest of the
   * position), with a snapshot of the whole state when one is due (sent once the entry lands);
   * anything else writes the whole state. With `reopen`, a responder's call is open (the run was
   * cut while it ran): the point before that call is committed, its attempt raised, so the call
   * runs again with its key and attempt > 1.
   */
  #build(status: ConversationStatus, result: string | undefined, reopen: boolean): Built {
    const host = this.#host;
    const durable = this.#durable;
    const plan = durable.plan;
    const seq = this.#seq + 1;
    const folded = host.folded;
    const foldedUpTo = folded?.length ?? 0;
    if (status === 'ended') {
      const elapsedMs = host.elapsedMs();
      // Saved as at every commit: an observer counts what this commit stores when it lands.
      const observers = host.observations.save();
      const ended = endedState(host.dispatchCount, this.#segmentNumber, elapsedMs, observers);
      return this.#whole(status, seq, this.#encode(ended), result, foldedUpTo);
    }
    const position = host.position(reopen);
    const stored = this.#log.storedBytes;
    if (entryPossible(plan, status, folded !== undefined, stored)) {
      const text = this.#encode(
        entryOf(
          position,
          folded as NonNullable<typeof folded>,
          this.#segmentNumber,
          this.#committedQueue,
        ),
      );
      const bytes = Buffer.byteLength(text);
      const total = stored + bytes;
      if (entryPays(bytes, stored, durable.maxCheckpointBytes)) {
        if (total > plan.maxConversationBytes) {
          throw this.#refuse(outgrownError(host, plan.maxConversationBytes, total));
        }
        let snapshot: Checkpoint | undefined;
        let snapshotBytes = 0;
        if (snapshotWanted(plan, this.#log.withEntry(bytes, position.dispatchCount))) {
          // The whole state at this entry's seq, encoded now (the position moves on once the loop
          // goes on), written once the entry has landed, without the loop waiting for it.
          const state = this.#encode(stateOf(position, this.#segmentNumber));
          snapshotBytes = Buffer.byteLength(state);
          if (snapshotBytes <= plan.maxSnapshotBytes) {
            snapshot = this.#checkpointAt('running', seq, position.dispatchCount, state, undefined);
          }
        }
        return {
          seq,
          dispatchCount: position.dispatchCount,
          entry: {
            conversationId: host.conversationId,
            seq,
            dispatchCount: position.dispatchCount,
            entry: text,
          },
          bytes,
          foldedUpTo,
          snapshot,
          snapshotBytes,
          queue: position.queue,
        };
      }
    }
    const text = this.#encode(stateOf(position, this.#segmentNumber));
    const queue = status === 'running' ? position.queue : undefined;
    return this.#whole(status, seq, text, result, foldedUpTo, queue);
  }

  /** `value` as the codec writes it; a refusal fails the conversation (no retry can store it). */
  #encode(value: unknown): string {
    try {
      return this.#durable.codec.encode(value);
    } catch (error) {
      throw this.#checkpointError(error, `dispatch ${this.#host.dispatchCount}`, true);
    }
  }

  /** A whole commit of `text`, once its size is checked against the store's limits. */
  #whole(
    status: ConversationStatus,
    seq: number,
    text: string,
    result: string | undefined,
    foldedUpTo: number,
    queue?: readonly Message<C>[],
  ): Built {
    const host = this.#host;
    const durable = this.#durable;
    const plan = durable.plan;
    const bytes = Buffer.byteLength(text);
    const whole = bytes + (result === undefined ? 0 : Buffer.byteLength(result));
    // An incremental store bounds an entry by maxCheckpointBytes, a whole state by the
    // conversation's bound (and its maxSnapshotBytes); another, every commit by maxCheckpointBytes.
    if ((plan.incremental || plan.conversationBounded) && whole > plan.maxConversationBytes) {
      throw this.#refuse(outgrownError(host, plan.maxConversationBytes, whole));
    }
    const { max, limit } = wholeLimit(plan, durable.maxCheckpointBytes);
    if (whole > max) throw this.#refuse(tooLargeError(host, max, limit, whole));
    return {
      seq,
      dispatchCount: host.dispatchCount,
      checkpoint: this.#checkpointAt(status, seq, host.dispatchCount, text, result),
      bytes,
      foldedUpTo,
      snapshotBytes: 0,
      queue,
    };
  }

  /** `error`, recorded as one no retry can store: the conversation ends as failed (`fail`). */
  #refuse(error: CheckpointError<S, C>): CheckpointError<S, C> {
    this.#unstorable = error;
    return error;
  }

  /**
   * A CheckpointError naming the conversation, where it was and the offending value's path.
   * `refused`: `error` is the codec's refusal of the state to commit (not a store's failure): the
   * value will be refused every time, so the conversation ends rather than stays resumable.
   */
  #checkpointError(error: unknown, at: string, refused = false): ConversationError<S, C> {
    const built = checkpointError(this.#host, error, at);
    if (refused && built !== error) this.#unstorable = built as CheckpointError<S, C>;
    return built;
  }

  /**
   * The heartbeat, every `leaseMs / 3`: renews the lease unless a commit (which renews it) is in
   * flight. Renewing at every beat, not only when no commit renewed it for a third of the lease,
   * keeps the lease alive however the beats and commits fall: the next renewal starts at most
   * `leaseMs / 3` after the last one landed and lands within `storeTimeoutMs` (at most
   * `leaseMs / 2`, checked at construction), before the lease expires.
   */
  #renewIfIdle(): void {
    const host = this.#host;
    if (host.settled || this.#inflight !== undefined) return;
    const durable = this.#durable;
    const lease = this.#lease as Lease;
    const store = durable.store;
    bounded(
      () => store.renew(host.conversationId, lease, durable.leaseMs),
      durable.storeTimeoutMs,
      'renew',
    )
      .then((renewed) => checkedOutcome(store, 'renew', renewed))
      .then(
        (renewed) => {
          if (host.settled) return;
          if (renewed === undefined) {
            host.observations.leaseConflict();
            host.interrupt(leaseLostError(host, 'its lease renewal was refused'));
          } else if (this.#lease === lease) this.#lease = renewed;
        },
        // A renewal that fails is tried again at the next beat; the commit will tell if it is lost.
        () => {},
      );
  }
}
