// @ts-check
// The panel under the chart: the conversation the pointer is on, or the one a click kept.
import { $ } from './dom.js';
import { endingText, plural, spreadText, tokenText } from './format.js';
import { idOf } from './state.js';
import { traceAnchor, traceLink } from './traces.js';

/** @typedef {import('./state.js').Conversation} Conversation */

export const pointer = {
  /** The conversation the panel shows. */
  hovered: /** @type {Conversation | undefined} */ (undefined),
  /** Whether a click keeps it there. */
  pinned: false,
  /** What the panel last said (it is rebuilt only when that changes: its link stays clickable). */
  shown: '',
};

/** The panel under the chart: the conversation the pointer is on (or a click kept). */
export function renderHovered() {
  const el = $('hovered');
  const c = pointer.hovered;
  if (c === undefined) return;
  const id = idOf(c) ?? '';
  const last = c.spreads[c.spreads.length - 1];
  const dispatches = c.reason === undefined ? c.spreads.length : (c.dispatchCount ?? 0);
  const link = traceLink(c.traceId);
  const what =
    c.reason === undefined
      ? `in flight: ${plural(dispatches, 'dispatch')} so far`
      : `${endingText(c.reason)} after ${((c.elapsedMs ?? 0) / 1000).toFixed(1)} s: ${plural(dispatches, 'dispatch')}`;
  const spread = last === undefined ? '' : `, spread ${spreadText(last)}`;
  const tokens =
    c.tokens !== undefined
      ? `, ${tokenText(c.tokens)} tokens`
      : c.reason === undefined
        ? ' (tokens when it ends)'
        : '';
  // Fleet mode: the worker processes that ran its segments (two after a crash or a handoff).
  const ran = c.workers === undefined ? '' : `, ran on ${c.workers.join(' then ')}`;
  const text = `${what}${spread}${tokens}${ran}`;
  const key = `${id}\n${text}\n${link ?? ''}\n${pointer.pinned}`;
  if (key === pointer.shown) return;
  pointer.shown = key;
  el.dataset.conversationId = id;
  el.dataset.orchestrator = c.orchestrator;
  el.dataset.state = c.reason ?? 'in_flight';
  el.dataset.dispatches = String(dispatches);
  el.dataset.workers = c.workers === undefined ? '' : c.workers.join(',');
  el.dataset.pinned = String(pointer.pinned);
  const name = document.createElement('strong');
  name.textContent = `${c.orchestrator} · ${id}`;
  /** @type {(string | Node)[]} */
  const parts = [name, ` · ${text}`];
  if (link !== undefined) parts.push(' · ', traceAnchor(link));
  if (pointer.pinned) parts.push(' (kept: click elsewhere on the chart to let go)');
  el.replaceChildren(...parts);
}
