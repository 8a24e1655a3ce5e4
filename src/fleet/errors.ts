/** Errors of the fleet (the conversation errors themselves are the core's). */

import { OrchestratorError } from '../core/spi/errors.ts';

/** A job names an orchestrator this worker does not run: failed at once, never retried. */
export class UnknownOrchestratorError extends OrchestratorError {
  /** The class's name, for logs. */
  override readonly name = 'UnknownOrchestratorError';
  override readonly code: string = 'ERR_UNKNOWN_ORCHESTRATOR';
  /** The name the job carried. */
  readonly orchestrator: string;
  constructor(orchestrator: string, known: readonly string[]) {
    super(
      `No orchestrator named ${JSON.stringify(orchestrator)} runs on this worker (it runs ${
        known.length === 0 ? 'none' : known.map((k) => JSON.stringify(k)).join(', ')
      }); every worker of a queue must run the same orchestrators`,
    );
    this.orchestrator = orchestrator;
  }
}
