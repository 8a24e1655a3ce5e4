// @ts-check
// One frame: the picture drawn from the state, each part only when what it shows changed.
import { renderLines, renderTokens } from './captions.js';
import { chartHeld, drawLines } from './chart.js';
import { FINISHED_SLOTS, SLOTS, STALE_MS } from './constants.js';
import { renderCounts, renderResumed } from './counts.js';
import { renderHovered } from './hovered.js';
import { renderRecent } from './recent.js';
import { setId, shown, state } from './state.js';

/** @typedef {import('./state.js').Conversation} Conversation */

/** `state.version` as the tables, and as the list, last showed it. */
let countsShown = -1;
let recentShown = -1;

export function render() {
  if (!state.dirty) return;
  state.dirty = false;
  const now = performance.now();
  /** @type {Conversation[]} */
  const inFlight = [];
  /** @type {Conversation[]} */
  const done = [];
  for (const [id, c] of state.conversations) {
    if (c.reason === undefined && now - c.seen > STALE_MS) {
      state.conversations.delete(id);
      continue;
    }
    setId(c, id);
    if (shown(c.orchestrator)) (c.reason === undefined ? inFlight : done).push(c);
  }
  // The tables and the list change only when an ending (or the filter) changes them, and keep
  // their nodes: a link under the pointer stays the same link.
  if (countsShown !== state.version) {
    countsShown = state.version;
    renderCounts();
    renderResumed();
  }
  if (recentShown !== state.version && !state.listHeld) {
    recentShown = state.version;
    renderRecent();
  }
  // Held: the chart and its caption stay as they are until the pointer leaves.
  if (chartHeld()) return;
  done.reverse(); // newest first
  // Finished lines keep their slots however many are in flight; in flight take the rest.
  const inFlightDrawn = inFlight.slice(0, SLOTS - Math.min(done.length, FINISHED_SLOTS));
  const doneDrawn = done.slice(0, SLOTS - inFlightDrawn.length);
  // Finished first: uPlot draws the slots in order, so the lines in flight lie on top.
  const visible = [...doneDrawn, ...inFlightDrawn];
  drawLines(visible);
  renderLines(visible, inFlightDrawn.length, inFlight.length, doneDrawn.length);
  renderTokens(doneDrawn);
  renderHovered();
}
