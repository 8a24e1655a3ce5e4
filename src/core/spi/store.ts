/**
 * The storage interface of durable conversations (DESIGN §3b). The core commits a checkpoint of a
 * conversation through a `ConversationStore`. A store that implements only the required methods
 * keeps one row (key, document) per conversation, replaced whole on each commit. An incremental
 * store (`append` and `snapshot`, see `IncrementalStore`) also keeps a log: a commit then
 * writes what the dispatches since the previous one added (an entry), and now and then the core
 * writes a snapshot of the whole state, behind which the store deletes the entries it covers.
 *
 * What a store promises, and what `verifyConversationStore` (conversation-orchestrator/testing)
 * checks for any implementation:
 * - Every method that changes a conversation is atomic: one transaction, one Lua script, one
 *   compare-and-set statement. A reader never sees a torn checkpoint.
 * - Fencing. A conversation has a lease `{ owner, epoch, expiresAt }`. `create` and `acquire` take
 *   it and bump `epoch`; `commit`, `renew` and `release` succeed only when the stored owner and
 *   epoch are the caller's, and `commit` only when `checkpoint.seq` is the stored `seq + 1`. So
 *   two processes can never fork a conversation, and a paused process that comes back (its lease
 *   expired and taken) has every commit refused.
 * - Conflicts are outcomes, not exceptions: `create` answers `{ created: false }`, `acquire`
 *   answers `held` or `not_found`, `commit` answers `{ ok: false }`. A store throws (or rejects)
 *   only when it fails (I/O, a closed store, a value past its size limit); the core turns both
 *   into the public errors (`ConversationExistsError`, `ConversationLeaseError`, `CheckpointError`).
 * - Time: `leaseMs` is relative; a store computes `expiresAt` with its own clock (the database's,
 *   where there is one) and compares with the same clock.
 * - Retention: ended conversations are kept for the store's retention and then deleted by
 *   `purgeExpired()` (stores also call it on their own schedule, documented per store).
 *
 * The checkpoint's `state` and `result` are JSON text made by the core (through the orchestrator's
 * `codec`); a store keeps them verbatim and never interprets `state`.
 */

/** Where a conversation stands in its store. */
export type ConversationStatus = 'running' | 'suspended' | 'ended';

/**
 * When checkpoints are committed (LangGraph's words):
 * - `sync`: each dispatch's checkpoint is committed before the next responder is invoked;
 * - `async`: committed behind the loop (group commit), at most one commit in flight per
 *   conversation, newer checkpoints coalescing while it is;
 * - `exit`: committed only when the conversation suspends or ends.
 */
export type Durability = 'sync' | 'async' | 'exit';

/** One conversation's checkpoint, as the core hands it to a store. Replaces the previous one. */
export interface Checkpoint {
  /** The conversation's id (the `run()` option, 1-128 characters of the name rule). */
  readonly conversationId: string;
  /** The name of the orchestrator that runs it. */
  readonly orchestrator: string;
  /** `running` until it suspends or ends. */
  readonly status: ConversationStatus;
  /** Commit sequence: 1 for the checkpoint that creates the conversation, +1 for each commit. */
  readonly seq: number;
  /** Successful dispatches so far. */
  readonly dispatchCount: number;
  /** JSON text of the conversation's state, made by the core. Opaque to the store. */
  readonly state: string;
  /** JSON text of the `ConversationResult` (or the failure), when `status` is `ended`. */
  readonly result?: string | undefined;
  /** Epoch milliseconds when it suspended, while `status` is `suspended`. */
  readonly suspendedAt?: number | undefined;
}

/**
 * One commit of an incremental store: what the dispatches since the previous commit added (the
 * messages folded, the counters, the queue, the policies' saved state), as text made by the core.
 * It takes the place of a whole checkpoint at `seq`, for a `running` conversation.
 */
export interface CheckpointEntry {
  /** The conversation's id. */
  readonly conversationId: string;
  /** Commit sequence: the stored seq + 1, as for a whole checkpoint. */
  readonly seq: number;
  /** Successful dispatches so far. */
  readonly dispatchCount: number;
  /** JSON text of the entry, made by the core. Opaque to the store. */
  readonly entry: string;
}

/** What `snapshot()` answers. */
export type SnapshotOutcome =
  | {
      /** Stored: the snapshot is the conversation's base, the entries it covers deleted. */
      readonly ok: true;
      /** How many entries were deleted behind it. */
      readonly compacted: number;
    }
  | {
      /**
       * Refused, nothing changed: `fenced` (another owner or epoch), `stale` (the stored snapshot
       * is at this seq or later, or the seq is past the stored one), `not_found` (deleted).
       */
      readonly ok: false;
      /** Why nothing changed. */
      readonly reason: 'fenced' | 'stale' | 'not_found';
    };

/** A holder's claim on a conversation. */
export interface Lease {
  /** Who holds it: `{host}/{pid}/{token}`, unique per segment of a conversation (see `leaseOwner`). */
  readonly owner: string;
  /** Fencing token: raised by every `create`/`acquire`; commits carry it. */
  readonly epoch: number;
  /** Epoch milliseconds (the store's clock) after which another process may take the conversation. */
  readonly expiresAt: number;
}

/** What `store.get()` and `store.list()` tell of a conversation. */
export interface StoredConversation {
  /** The conversation's id. */
  readonly conversationId: string;
  /** The name of the orchestrator that runs it. */
  readonly orchestrator: string;
  /** Where it stands. */
  readonly status: ConversationStatus;
  /** Successful dispatches committed so far. */
  readonly dispatchCount: number;
  /** The commit sequence of the stored checkpoint. */
  readonly seq: number;
  /** Epoch milliseconds of the last commit. */
  readonly updatedAt: number;
  /** Epoch milliseconds when it suspended, while suspended. */
  readonly suspendedAt?: number | undefined;
  /** The current lease holder, while one holds it (released or expired leases are not shown). */
  readonly owner?: string | undefined;
  /** When the current lease expires, while one is held. */
  readonly leaseExpiresAt?: number | undefined;
  /** The parsed `ConversationResult` (the failure's, for a failed one), when ended. */
  readonly result?: unknown;
}

/** What `create()` answers. */
export type CreateOutcome =
  | {
      /** Inserted: the conversation is new and its lease is the caller's. */
      readonly created: true;
      /** The lease taken (epoch 1). */
      readonly lease: Lease;
    }
  | {
      /** The id was taken: nothing changed. */
      readonly created: false;
    };

/** What `acquire()` answers. */
export type AcquireOutcome =
  | {
      /** The lease is now the caller's (epoch raised). */
      readonly status: 'acquired';
      /**
       * The stored checkpoint: its `seq`, `status` and `dispatchCount` the conversation's latest;
       * on an incremental store its `state` is the latest snapshot's, which `entries` continue.
       */
      readonly checkpoint: Checkpoint;
      /**
       * An incremental store's entries after the snapshot, in commit order (their `entry` texts);
       * absent or empty when `state` is whole.
       */
      readonly entries?: readonly string[] | undefined;
      /** The lease taken. */
      readonly lease: Lease;
      /**
       * True when a previous holder's lease was still recorded (expired, or its process gone)
       * rather than released: the core calls that resume a crash, and re-runs the dispatch in
       * flight.
       */
      readonly takenOver: boolean;
    }
  | {
      /** Another holder's lease is live: nothing changed. */
      readonly status: 'held';
      /** Who holds it. */
      readonly owner: string;
      /** When its lease expires (the store's clock). */
      readonly leaseExpiresAt: number;
    }
  | {
      /** The conversation has ended: no lease is taken. */
      readonly status: 'ended';
      /** The stored checkpoint, holding its result. */
      readonly checkpoint: Checkpoint;
    }
  | {
      /** No such conversation. */
      readonly status: 'not_found';
    };

/** What `commit()` answers. */
export type CommitOutcome =
  | {
      /** Replaced; the lease renewed for `leaseMs` (released, when the status is not `running`). */
      readonly ok: true;
      /** The renewed lease. */
      readonly lease: Lease;
    }
  | {
      /** Refused: the lease is no longer the caller's, or `seq` is not the stored one plus 1. */
      readonly ok: false;
      /** `fenced`: another owner or epoch; `sequence`: not the stored seq + 1; `not_found`: deleted. */
      readonly reason: 'fenced' | 'sequence' | 'not_found';
      /** The stored checkpoint's `seq`, when there is one. */
      readonly storedSeq?: number | undefined;
    };

/** What `list()` selects. Results are ordered by `conversationId`; page with `after`. */
export interface ListQuery {
  /** Only this orchestrator's conversations. */
  readonly orchestrator?: string | undefined;
  /** Only conversations in this status. */
  readonly status?: ConversationStatus | undefined;
  /**
   * Only conversations no live lease holds (never leased, released or expired by the store's clock):
   * what `recover()` may take.
   */
  readonly unleased?: boolean | undefined;
  /**
   * At most this many: a non-negative integer (0 answers none; anything else is rejected with an
   * error). A store may cap it; 1,000 at most is always honoured.
   */
  readonly limit: number;
  /** Only ids after this one (the last id of the previous page). */
  readonly after?: string | undefined;
}

/** Counts for the gauges, per orchestrator, read with one bounded query. */
export interface StoreStats {
  /** The orchestrator's name. */
  readonly orchestrator: string;
  /** Conversations running (held or waiting for recovery). */
  readonly running: number;
  /** Conversations suspended. */
  readonly suspended: number;
  /** Epoch milliseconds of the oldest suspension, when any is suspended. */
  readonly oldestSuspendedAt?: number | undefined;
}

/**
 * Where durable conversations live. Implement it for your own database and check it with
 * `verifyConversationStore` from `conversation-orchestrator/testing`.
 */
export interface ConversationStore {
  /** A short bounded name (`memory`, `sqlite`, `postgres`, `redis`): the `store` metric label. */
  readonly name: string;
  /**
   * The largest checkpoint (`state` + `result`, UTF-8 bytes) the store accepts. The core checks it
   * before committing and fails the conversation with a clear error past it.
   */
  readonly maxCheckpointBytes: number;
  /**
   * Inserts a new conversation with its first checkpoint (`seq` 1) and gives its lease to `owner`
   * (epoch 1), atomically, if the id is not taken; answers `{ created: false }` otherwise (also
   * when two callers race: exactly one creates it).
   */
  create(checkpoint: Checkpoint, owner: string, leaseMs: number): Promise<CreateOutcome>;
  /**
   * Takes the lease of a stored conversation (running or suspended) for `owner` when no live
   * lease holds it (never leased, released, expired, or held by `owner` itself), raising the
   * epoch. Two callers racing: exactly one acquires. A store may also take a lease whose holder
   * `isLeaseOwnerAlive()` (lease-owner.ts) says is gone, before it expires.
   */
  acquire(conversationId: string, owner: string, leaseMs: number): Promise<AcquireOutcome>;
  /**
   * Replaces the checkpoint if `lease` is the stored one (owner and epoch) and `checkpoint.seq` is
   * the stored seq + 1. Renews the lease for `leaseMs` while `running`; releases it otherwise.
   * A lease past its expiry whose conversation nobody else took still commits (the epoch is what
   * fences, not the clock).
   */
  commit(checkpoint: Checkpoint, lease: Lease, leaseMs: number): Promise<CommitOutcome>;
  /** Extends a held lease by `leaseMs` from now; `undefined` when it is no longer the caller's. */
  renew(conversationId: string, lease: Lease, leaseMs: number): Promise<Lease | undefined>;
  /** Gives up a lease without committing (an abort, a drain): the conversation stays as stored. */
  release(conversationId: string, lease: Lease): Promise<void>;
  /** What is stored of a conversation, or `undefined`. */
  get(conversationId: string): Promise<StoredConversation | undefined>;
  /** Deletes a conversation whatever its status; `true` when there was one. */
  delete(conversationId: string): Promise<boolean>;
  /** A page of conversations matching `query` (for `recover()` and operators). */
  list(query: ListQuery): Promise<readonly StoredConversation[]>;
  /** Running and suspended counts per orchestrator (for the gauges, read at scrape time). */
  stats(): Promise<readonly StoreStats[]>;
  /** Deletes ended conversations past the store's retention; resolves with how many. */
  purgeExpired(): Promise<number>;
  /** Closes connections and timers the store owns (not a client passed in). Idempotent. */
  close(): Promise<void>;
  /**
   * Appends an entry (incremental stores; see `IncrementalStore`). Optional: a store
   * without it gets whole checkpoints only, and every commit replaces the whole state.
   */
  append?(entry: CheckpointEntry, lease: Lease, leaseMs: number): Promise<CommitOutcome>;
  /** Stores a snapshot (incremental stores; see `IncrementalStore`). Optional, with `append`. */
  snapshot?(checkpoint: Checkpoint, lease: Lease): Promise<SnapshotOutcome>;
  /**
   * The largest snapshot or whole checkpoint (`state` + `result`, UTF-8 bytes) an incremental
   * store accepts; `maxCheckpointBytes` then bounds one entry. Defaults to `maxCheckpointBytes`.
   */
  readonly maxSnapshotBytes?: number | undefined;
}

/**
 * A store that keeps entries: `ConversationStore` with `append` and `snapshot` (both, or neither). The core then
 * commits a long conversation as a log: a commit costs what the dispatch added, not what the
 * conversation holds. What it promises, checked by `verifyConversationStore`:
 * - `append(entry, lease, leaseMs)` is a commit: fenced and sequenced exactly as `commit` (the
 *   lease's owner and epoch, `entry.seq` the stored seq + 1), atomic, renews the lease, leaves the
 *   status `running`, and answers as `commit` does. A zombie's append after losing its lease is
 *   refused (`fenced`) and stores nothing.
 * - `commit(checkpoint, …)` stores a whole checkpoint: it becomes the base and every entry is
 *   deleted (suspensions and endings are always committed whole).
 * - `snapshot(checkpoint, lease)` stores the whole state at `checkpoint.seq`, a seq the store
 *   already holds (committed by an entry), without changing the seq, status, dispatch count or
 *   lease: fenced by owner and epoch, refused as `stale` unless `checkpoint.seq` is after the
 *   stored base's and at most the stored seq. Atomically, it becomes the base and the entries up to
 *   its seq are deleted (compaction); the entries after it stay.
 * - `acquire` answers the base as `checkpoint.state` (with the latest seq, status and dispatch
 *   count) and the entries after it as `entries`, in order. `get` and `list` tell the latest seq.
 * - `maxCheckpointBytes` bounds an entry; `maxSnapshotBytes` a snapshot or whole checkpoint.
 */
export interface IncrementalStore extends ConversationStore {
  append(entry: CheckpointEntry, lease: Lease, leaseMs: number): Promise<CommitOutcome>;
  snapshot(checkpoint: Checkpoint, lease: Lease): Promise<SnapshotOutcome>;
  readonly maxSnapshotBytes: number;
}
