// @ts-check
// What the page knows: a bounded picture of the conversations, the endings counted, the list of
// slow or failed ones, and whether the chart or the list holds still. Updated per message
// (updates.js), drawn once per frame (render.js).
import { SLOW_MS } from './constants.js';

/**
 * A conversation the page draws: its spreads by dispatch (index 0 is dispatch 1), and once it
 * ended, how.
 * @typedef {{orchestrator: string, spreads: number[], reason?: string, seen: number, resumed?: boolean,
 *   traceId?: string, dispatchCount?: number, elapsedMs?: number, tokens?: number,
 *   workers?: string[]}} Conversation
 */
/**
 * An entry of the list of recent slow or failed conversations.
 * @typedef {{id: string, orchestrator: string, reason: string, dispatchCount: number,
 *   elapsedMs: number, traceId?: string, tokens?: number}} Recent
 */
/** Ending counts by orchestrator, then by reason. @typedef {Map<string, Map<string, number>>} Counts */

export const state = {
  orchestrators: /** @type {string[]} */ ([]),
  tolerance: 0.05,
  maxDispatches: 400,
  filter: '*',
  /** Converged slower than this is slow (the service's sampler keeps those traces); 0: never. */
  slowMs: SLOW_MS,
  /** The trace UI's URL template (validated), or undefined: no links. */
  traceUrl: /** @type {string | undefined} */ (undefined),
  /** @type {Map<string, Conversation>} */
  conversations: new Map(),
  /** Ids of finished conversations, oldest first. */
  finished: /** @type {string[]} */ ([]),
  /** @type {Counts} ending counts since this page opened */
  counts: new Map(),
  /** @type {Counts | undefined} since the service started */
  serviceCounts: undefined,
  /** When the service started, as it said. */
  serviceSince: '',
  /** Endings since this page opened, of every orchestrator (for the caption). */
  endedHere: 0,
  /** @type {Recent[]} slow or failed conversations, newest first */
  recent: [],
  /** Bumped whenever the endings tables or the list would read differently. */
  version: 0,
  /** The pointer is on the chart: it holds still (the state goes on) so a line can be read. */
  held: false,
  /** The pointer is on the list: it holds still so that a link can be clicked. */
  listHeld: false,
  dirty: true,
  /** Ids of conversations seen resumed after a restart of the service (bounded). */
  resumedIds: /** @type {Set<string>} */ (new Set()),
  /** Resumed conversations that had ended before the page connected (the history says). */
  resumedEnded: 0,
};

/** Whether the orchestrator filter lets `orchestrator`'s conversations show. */
export const shown = (/** @type {string} */ orchestrator) =>
  state.filter === '*' || state.filter === orchestrator;

/** A conversation's id (kept out of the object to keep it small), set as each frame reads them. */
const ids = /** @type {WeakMap<Conversation, string>} */ (new WeakMap());
export function idOf(/** @type {Conversation} */ c) {
  return ids.get(c);
}
export function setId(/** @type {Conversation} */ c, /** @type {string} */ id) {
  ids.set(c, id);
}
