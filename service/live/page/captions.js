// @ts-check
// The lines under the chart: how many lines it draws, of which orchestrator, and their tokens.
import { LINE_COLORS } from './constants.js';
import { $ } from './dom.js';
import { plural, tokenText } from './format.js';
import { state } from './state.js';

/** @typedef {import('./state.js').Conversation} Conversation */

/** The caption: every number in it is counted from the lines just drawn. */
export function renderLines(
  /** @type {Conversation[]} */ visible,
  /** @type {number} */ inFlightDrawn,
  /** @type {number} */ inFlightKnown,
  /** @type {number} */ finishedDrawn,
) {
  const el = $('lines');
  el.dataset.total = String(visible.length);
  el.dataset.inFlight = String(inFlightDrawn);
  el.dataset.finished = String(finishedDrawn);
  if (visible.length === 0) {
    el.replaceChildren('no conversations yet');
    return;
  }
  /** @type {HTMLElement[]} */
  const parts = [];
  // Names are data, never keys: an orchestrator may be called `fx-desks` or `a.b:c`, which no
  // dataset key or selector built from it would survive. Each count is an element of its own
  // whose attributes hold the name and the count as values.
  state.orchestrators.forEach((o, i) => {
    const n = visible.filter((c) => c.orchestrator === o).length;
    const key = document.createElement('span');
    key.className = `line line-${i % LINE_COLORS.length}`;
    const count = document.createElement('span');
    count.className = 'line-count';
    count.dataset.orchestrator = o;
    count.dataset.lines = String(n);
    count.textContent = `${o}: ${n} ${n === 1 ? 'line' : 'lines'}`;
    parts.push(key, count);
  });
  const cut = inFlightKnown > inFlightDrawn ? ` of ${inFlightKnown}` : '';
  el.replaceChildren(
    `${plural(visible.length, 'line')} drawn: ${inFlightDrawn}${cut} in flight (solid), ` +
      `${finishedDrawn} finished (faded, the newest). By orchestrator:`,
    ...parts,
  );
}

/** Tokens per finished conversation drawn: the median and the most, from the end messages. */
export function renderTokens(/** @type {Conversation[]} */ finished) {
  const el = $('tokens');
  const counts = finished.flatMap((c) => (c.tokens === undefined ? [] : [c.tokens]));
  counts.sort((a, b) => a - b);
  el.dataset.conversations = String(counts.length);
  el.dataset.median = counts.length === 0 ? '' : String(counts[(counts.length - 1) >> 1]);
  el.dataset.max = counts.length === 0 ? '' : String(counts[counts.length - 1]);
  el.textContent =
    counts.length === 0
      ? ''
      : `Tokens per finished conversation drawn (input + output, ${plural(counts.length, 'conversation')}): ` +
        `median ${tokenText(counts[(counts.length - 1) >> 1] ?? 0)}, most ${tokenText(counts[counts.length - 1] ?? 0)}.`;
}
