/**
 * The contexts responders and the turn policy get: one per responder per conversation (made on its
 * first invocation) and one for the turn policy, so a report is always counted for whoever made it,
 * even a late one. Both members are getters that make what they hand out on first use: a
 * responder that never reads `signal` or `reportUsage` costs no AbortController and no closure,
 * and both still work destructured (`respond(m, s, { signal, reportUsage })`).
 */
import type { TurnContext } from '../spi/policy.ts';
import type { ResponderContext, Usage } from '../spi/types.ts';

/** What a context needs from its run. */
export interface ContextHost {
  /** The signal that aborts when the run is aborted or a deadline passes (made on first use). */
  responderSignal(): AbortSignal;
  /** Checks and counts one report of responder `index` (-1: the turn policy). */
  reportUsage(index: number, usage: unknown, dispatchNumber: number): void;
  /** The conversation's id (the prefix of idempotency keys). */
  readonly conversationId: string;
}

export class InvocationContext implements ResponderContext, TurnContext {
  /** 1-based number of the dispatch the invocation in progress would be. */
  dispatchNumber = 0;
  /** Which invocation of the conversation is in progress: 1, 2, 3 … (kept across resumes). */
  invocation = 0;
  /** 1, or more when the invocation runs again after a crash. */
  attempt = 1;
  readonly #host: ContextHost;
  readonly #index: number;
  #report: ((usage: Usage) => void) | undefined;

  /** `index`: the responder's, or -1 for the turn policy. */
  constructor(host: ContextHost, index: number) {
    this.#host = host;
    this.#index = index;
  }

  get signal(): AbortSignal {
    return this.#host.responderSignal();
  }

  /** Made on read: `{conversationId}:{invocation}`. */
  get idempotencyKey(): string {
    return `${this.#host.conversationId}:${this.invocation}`;
  }

  get reportUsage(): (usage: Usage) => void {
    if (this.#report === undefined) {
      const host = this.#host;
      const index = this.#index;
      this.#report = (usage: Usage) => host.reportUsage(index, usage, this.dispatchNumber);
    }
    return this.#report;
  }
}
