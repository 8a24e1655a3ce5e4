/**
 * What replay runs a recording against: one termination policy for every conversation, or one per
 * orchestrator by name, and how a value is told to be either (the CLI's module loader asks too).
 */

import type { TerminationPolicy } from '../core/spi/policy.ts';

/**
 * A candidate per orchestrator, by the orchestrator's name: a recording of several orchestrators
 * (each with its own policy) replays each conversation against its orchestrator's candidate.
 */
export type CandidatesByOrchestrator<R = unknown> = Readonly<
  Record<string, TerminationPolicy<R, undefined>>
>;

/** What replay runs: one candidate for every conversation, or one per orchestrator. */
export type Candidate<R = unknown> = TerminationPolicy<R, undefined> | CandidatesByOrchestrator<R>;

/** Whether a value is a candidate per orchestrator: a plain object of termination policies, at least one. */
export function isCandidatesByOrchestrator(value: unknown): value is CandidatesByOrchestrator {
  if (typeof value !== 'object' || value === null || isTerminationPolicy(value)) return false;
  const values = Object.values(value);
  return values.length > 0 && values.every(isTerminationPolicy);
}

/** The candidate's name: the policy's, or `orchestrator: name` for each orchestrator. */
export function candidateName(candidate: Candidate<never>): string {
  if (isTerminationPolicy(candidate)) return candidate.name;
  return Object.entries(candidate)
    .map(([orchestrator, policy]) => `${orchestrator}: ${policy.name}`)
    .join(', ');
}

/** Whether a value is a termination policy (`{ name, start() }`), as replay and the CLI need one. */
export function isTerminationPolicy(value: unknown): value is TerminationPolicy<unknown, unknown> {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as { name?: unknown }).name === 'string' &&
    typeof (value as { start?: unknown }).start === 'function'
  );
}
