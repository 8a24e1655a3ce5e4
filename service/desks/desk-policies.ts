/**
 * The demo's termination policies, in one place: the service's desks (service/market.ts) end
 * their conversations with these, and the replay walkthrough (docs/replay.md,
 * examples/record-replay/candidates.ts) replays its recordings against the same ones, so a
 * baseline replay changes nothing. They read only the book's `spread`, which is what the service
 * records (`record: (state) => ({ spread: state.projection.spread })`).
 */
import {
  anyOf,
  converged,
  maxDispatches,
  type TerminationPolicy,
  timeout,
} from '../../src/index.ts';

/** A conversation that has not converged after this many dispatches is stopped. */
export const MAX_DISPATCHES = 400;

/**
 * A conversation still running after this many milliseconds is stopped: above the slowest
 * `lagging` market (about 11 s), so that those converge, late, rather than time out.
 */
export const TIMEOUT_MS = 15_000;

/** What the policies read of the state: the book's spread (the live book, or the recorded one). */
export interface Spread {
  /** The spread between the highest and the lowest quote. */
  readonly spread: number;
}

/**
 * A desks conversation's policy: converged once the spread has stayed within `tolerance` for
 * `desks` consecutive dispatches (every desk quoted within it once, round robin), or
 * `MAX_DISPATCHES`, or `TIMEOUT_MS`.
 */
export function deskTermination<S extends Spread = Spread, C = undefined>(
  desks: number,
  tolerance: number,
): TerminationPolicy<S, C> {
  return anyOf<S, C>(
    converged<S, C>({
      measure: (s) => s.projection.spread,
      tolerance,
      consecutive: desks,
    }),
    maxDispatches<S, C>(MAX_DISPATCHES),
    timeout<S, C>(TIMEOUT_MS),
  );
}

/** The service's orchestrators, in order: the i-th runs `--desks` + i desks (at most 8). */
export const DESK_ORCHESTRATORS = ['fx_desks', 'rates_desks'] as const;

/**
 * Each orchestrator's policy, as the service builds it with `--desks desks` and
 * `--tolerance tolerance` (3 and 0.05 by default): the candidate for replaying a recording of
 * the service that changes nothing.
 */
export function deskPolicies(
  desks: number,
  tolerance: number,
): Record<(typeof DESK_ORCHESTRATORS)[number], TerminationPolicy<Spread, undefined>> {
  return {
    fx_desks: deskTermination(Math.min(desks, 8), tolerance),
    rates_desks: deskTermination(Math.min(desks + 1, 8), tolerance),
  };
}
