// @ts-check
// The list of recent slow or failed conversations, each linked to its trace when it can be, held
// still while the pointer or the keyboard's focus is on it.
import { $ } from './dom.js';
import { endingText, markOf, plural, tokenText } from './format.js';
import { schedule } from './frame.js';
import { shown, state } from './state.js';
import { traceAnchor, traceLink } from './traces.js';

/** @typedef {import('./state.js').Recent} Recent */

/**
 * The list's entries by conversation id, each made once: a link a person points at stays.
 * @type {Map<string, HTMLLIElement>}
 */
const recentItems = new Map();
const noneYet = Object.assign(document.createElement('li'), { textContent: 'none yet' });

/** The entries are made anew at the next render (their links follow a new trace template). */
export function forgetRecentItems() {
  recentItems.clear();
}

/**
 * The list holds still while the pointer is on it or the keyboard's focus is on a link in it: a
 * new entry would push the others down, and the oldest out (taking the focus with it).
 */
export function holdRecentWhileRead() {
  const listHolders = { pointer: false, focus: false };
  for (const [kind, holder, on] of /** @type {const} */ ([
    ['mouseenter', 'pointer', true],
    ['mouseleave', 'pointer', false],
    ['focusin', 'focus', true],
    ['focusout', 'focus', false],
  ])) {
    $('recent').addEventListener(kind, (event) => {
      // Only the keyboard's focus holds it: a link clicked keeps the focus, but the pointer left.
      const target = /** @type {Element} */ (event.target);
      listHolders[holder] = on && (holder === 'pointer' || target.matches(':focus-visible'));
      state.listHeld = listHolders.pointer || listHolders.focus;
      $('recent').dataset.held = String(state.listHeld);
      if (!state.listHeld) schedule();
    });
  }
}

/**
 * The recent slow or failed conversations, each linked to its trace when it can be. Entries
 * already shown keep their nodes: a new one is inserted, the oldest removed, nothing else moves.
 */
export function renderRecent() {
  const list = $('recent');
  const entries = state.recent.filter((r) => shown(r.orchestrator));
  for (const id of recentItems.keys())
    if (!state.recent.some((r) => r.id === id)) recentItems.delete(id);
  const items =
    entries.length === 0
      ? [noneYet]
      : entries.map((r) => {
          let li = recentItems.get(r.id);
          if (li === undefined) {
            li = recentItem(r);
            recentItems.set(r.id, li);
          }
          return li;
        });
  items.forEach((item, i) => {
    const at = list.children[i];
    if (at !== item) list.insertBefore(item, at ?? null);
  });
  while (list.children.length > items.length) list.lastElementChild?.remove();
}

function recentItem(/** @type {Recent} */ r) {
  const li = document.createElement('li');
  li.dataset.conversationId = r.id;
  li.dataset.reason = r.reason;
  const mark = document.createElement('span');
  mark.className = `mark ${markOf(r.reason)}`;
  const what =
    r.reason === 'converged'
      ? `converged slowly: ${(r.elapsedMs / 1000).toFixed(1)} s`
      : `${endingText(r.reason)} after ${(r.elapsedMs / 1000).toFixed(1)} s`;
  const text = document.createElement('span');
  const tokens = r.tokens === undefined ? '' : `, ${tokenText(r.tokens)} tokens`;
  text.textContent = `${r.orchestrator} · ${what}, ${plural(r.dispatchCount, 'dispatch')}${tokens}`;
  if (r.tokens !== undefined) li.dataset.tokens = String(r.tokens);
  li.append(mark, text);
  const link = traceLink(r.traceId);
  if (link !== undefined) li.append(' · ', traceAnchor(link));
  return li;
}
