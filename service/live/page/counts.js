// @ts-check
// The endings tables (since the service started, since this page opened) and the line that
// counts the conversations resumed after a restart.
import { REASONS } from './constants.js';
import { $ } from './dom.js';
import { shown, state } from './state.js';

/** @typedef {import('./state.js').Counts} Counts */

export function renderCounts() {
  fillCounts($('counts-service'), state.serviceCounts);
  fillCounts($('counts'), state.counts);
  $('counts-service-since').textContent =
    state.serviceCounts === undefined
      ? '(not known yet)'
      : state.serviceSince === ''
        ? ''
        : `(at ${state.serviceSince})`;
}

function fillCounts(/** @type {HTMLElement} */ table, /** @type {Counts | undefined} */ counts) {
  const rows = [];
  /** @type {Map<string, number>} */
  const total = new Map();
  const names = state.orchestrators.filter(shown);
  for (const o of names) {
    const byReason = counts?.get(o) ?? new Map();
    for (const [r, n] of byReason) total.set(r, (total.get(r) ?? 0) + n);
    rows.push(countRow(o, byReason, '', counts === undefined));
  }
  if (names.length > 1) rows.push(countRow('all', total, 'total', counts === undefined));
  /** @type {HTMLElement} */ (table.querySelector('tbody')).replaceChildren(...rows);
}

function countRow(
  /** @type {string} */ name,
  /** @type {Map<string, number>} */ byReason,
  /** @type {string} */ cls,
  /** @type {boolean} */ unknown,
) {
  const tr = document.createElement('tr');
  tr.dataset.orchestrator = name;
  if (cls) tr.className = cls;
  const th = document.createElement('th');
  th.scope = 'row';
  th.textContent = name;
  tr.append(th);
  let ended = 0;
  for (const n of byReason.values()) ended += n;
  for (const reason of [...REASONS, 'other']) {
    const td = document.createElement('td');
    td.dataset.reason = reason;
    td.textContent = unknown ? '–' : String(byReason.get(reason) ?? 0);
    tr.append(td);
  }
  // The convergence SLO's share: aborts (a caller's doing) count neither way.
  const counted = ended - (byReason.get('aborted') ?? 0);
  const share = document.createElement('td');
  share.dataset.reason = 'share';
  share.dataset.ended = String(ended);
  share.dataset.counted = String(counted);
  const converged = byReason.get('converged') ?? 0;
  share.textContent = counted === 0 ? '–' : `${((100 * converged) / counted).toFixed(1)}%`;
  tr.append(share);
  return tr;
}

export function renderResumed() {
  const n = state.resumedEnded + state.resumedIds.size;
  $('resumed').textContent =
    n === 0
      ? 'no conversation resumed after a restart of the service'
      : `${n} conversation${n === 1 ? '' : 's'} resumed after a restart of the service (□ where each resumed)`;
}
