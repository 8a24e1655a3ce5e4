/**
 * `suspend(payload)`: what a responder returns to make the conversation wait for a person. A leaf
 * module (it imports nothing), so that the message types can name it without an import cycle.
 */

const SUSPEND = Symbol('conversation-orchestrator.suspend');

/** What `suspend(payload)` returns; a responder returns it instead of a message. */
export interface Suspend {
  /** Marks the value as a suspension (a symbol key: no message has it). */
  readonly [SUSPEND]: true;
  /** What to tell whoever will resume the conversation (a question for a person). */
  readonly payload: unknown;
}

/**
 * Returned by a responder instead of a message: the conversation waits. That dispatch completes
 * with no output (counted, decided, observed); unless its decision terminates, the conversation
 * is committed as suspended whatever the `durability`, and `run()`/`resume()` resolve with
 * `result.suspended = { responder, payload }`. Go on with `orchestrator.resume(id, { input })`.
 * @example respond: () => suspend({ question: 'Approve a trade of 1,000 shares?' })
 */
export function suspend(payload?: unknown): Suspend {
  return Object.freeze({ [SUSPEND]: true as const, payload });
}

/** Whether a responder's answer is a suspension. */
export function isSuspend(value: unknown): value is Suspend {
  return typeof value === 'object' && value !== null && SUSPEND in value;
}
