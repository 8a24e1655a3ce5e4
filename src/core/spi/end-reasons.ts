/**
 * The end reasons the library knows, in one table: the loop's own endings and those of the
 * library's termination policies. The core's reserved reasons, the telemetry's label values and
 * initialized series, the sampler's default keep rule, the ops bundle's recording rules and the
 * docs' tables all read it (test/core/end-reasons.test.ts holds them to it).
 *
 * Finality is not a property of a reason: every reason here ends the conversation for good. A
 * durable conversation that suspends, hands off or loses its lease has no reason; its
 * `ConversationEnd.ended` is false, which the telemetry writes as `conversation.ended` and the
 * sampler reads (docs/telemetry.md).
 */

/** One reason a conversation ends with. */
export interface EndReasonInfo {
  readonly reason: string;
  /** Who gives it: the loop itself (reserved: no termination policy may), or a library policy. */
  readonly decidedBy: 'loop' | 'policy';
  /** Its `orchestrator_conversations_ended_total` series start at 0. */
  readonly initialized: boolean;
  /** The conversation failed: the sampler always keeps it, the ops failed ratio counts it. */
  readonly failed: boolean;
  /**
   * It ended without converging for a reason of the agents' (gave up or failed): the ops
   * unconverged ratio counts it. `queue_exhausted` and `aborted` are the caller's doing.
   */
  readonly unconverged: boolean;
  /** A conversation that went well: the sampler's default `keepReasons` leaves it out. */
  readonly unremarkable: boolean;
}

/** Every reason the library produces, in the order docs and label lists show them. */
export const END_REASONS: readonly EndReasonInfo[] = Object.freeze(
  (
    [
      ['converged', 'policy', true, false, false, true],
      ['consensus', 'policy', false, false, false, false],
      ['max_dispatches', 'policy', true, false, true, false],
      ['timeout', 'policy', true, false, true, false],
      ['stopped', 'policy', false, false, false, false],
      ['queue_exhausted', 'loop', true, false, false, true],
      ['aborted', 'loop', true, false, false, false],
      ['deadline', 'loop', true, true, true, false],
      ['error', 'loop', true, true, true, false],
      ['queue_overflow', 'loop', true, true, true, false],
      ['token_budget', 'policy', false, false, true, false],
    ] as const
  ).map(([reason, decidedBy, initialized, failed, unconverged, unremarkable]) =>
    Object.freeze({ reason, decidedBy, initialized, failed, unconverged, unremarkable }),
  ),
);

/** The reasons of the table's rows that `select` picks, in table order. */
export function endReasons(select: (info: EndReasonInfo) => boolean): string[] {
  return END_REASONS.filter(select).map((info) => info.reason);
}
