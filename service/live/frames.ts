/**
 * The `updates` frames of one interval: what `publish` recorded per conversation, serialized
 * once per subscription (all, or one orchestrator) on first use, however many clients share it.
 */
import {
  compactSpread,
  type DispatchesSince,
  type EndUpdate,
  type UpdatesMessage,
} from './updates.ts';

/** One conversation's dispatches since the last frame, as `publish` records them. */
export interface PendingDispatches {
  readonly orchestrator: string;
  readonly conversationId: string;
  readonly fromDispatch: number;
  readonly spreads: number[];
  decision: DispatchesSince['decision'];
  elapsedMs: number;
  worker: string | undefined;
  /** Set once any of them came from a segment that resumed the conversation. */
  resumed: boolean;
}

/**
 * One interval's updates, serialized once per subscription (all, or one orchestrator) on first
 * use: however many clients share a subscription, they share its bytes.
 */
export class Frames {
  readonly #dispatches: readonly DispatchesSince[];
  readonly #ends: readonly Omit<EndUpdate, 'type'>[];
  readonly #built = new Map<string | undefined, Frame | undefined>();

  constructor(dispatches: Iterable<PendingDispatches>, ends: readonly Omit<EndUpdate, 'type'>[]) {
    this.#dispatches = Array.from(dispatches, (d) => ({
      orchestrator: d.orchestrator,
      conversationId: d.conversationId,
      fromDispatch: d.fromDispatch,
      spreads: d.spreads.map(compactSpread),
      decision: d.decision,
      elapsedMs: d.elapsedMs,
      ...(d.worker === undefined ? {} : { worker: d.worker }),
      ...(d.resumed ? { resumed: true as const } : {}),
    }));
    this.#ends = ends;
  }

  /** The frame for a client subscribed to `filter`, or undefined when nothing concerns it. */
  for(filter: string | undefined): Frame | undefined {
    if (this.#built.has(filter)) return this.#built.get(filter);
    const dispatches =
      filter === undefined
        ? this.#dispatches
        : this.#dispatches.filter((d) => d.orchestrator === filter);
    const ends =
      filter === undefined ? this.#ends : this.#ends.filter((e) => e.orchestrator === filter);
    const message: UpdatesMessage = { type: 'updates', dispatches, ends };
    const frame =
      dispatches.length === 0 && ends.length === 0
        ? undefined
        : {
            data: Buffer.from(JSON.stringify(message)),
            updates: dispatches.reduce((n, d) => n + d.spreads.length, 0) + ends.length,
          };
    this.#built.set(filter, frame);
    return frame;
  }
}

export interface Frame {
  /** The serialized `updates` message, sent as a text frame. */
  readonly data: Buffer;
  /** The updates it carries (each dispatch and each ending): counted as dropped when skipped. */
  readonly updates: number;
}
