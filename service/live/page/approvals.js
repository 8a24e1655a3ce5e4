// @ts-check
// Conversations waiting for a person's approval: listed with how long each has waited, and
// Approve / Reject buttons that ask the service to resume it.
import { MAX_NAME, MAX_WAITING } from './constants.js';
import { renderResumed } from './counts.js';
import { $ } from './dom.js';
import { shown } from './state.js';

/**
 * A waiting conversation as the list shows it, with its node (kept while listed, so a button
 * under the pointer is never replaced).
 * @typedef {{orchestrator: string, suspendedAt: number, text: string, li?: HTMLLIElement}} Waiting
 */

/** Conversations waiting for approval, by id. @type {Map<string, Waiting>} */
const waiting = new Map();
const clock = {
  /** The service's clock minus the page's (ms), from the approvals message. */
  offset: 0,
  /** Unanswered past this long (ms), the service rejects a waiting conversation. */
  timeoutMs: 0,
};

/** The whole list, sent on connect: it replaces the one shown. */
export function onApprovals(/** @type {any} */ m) {
  for (const id of [...waiting.keys()]) removeWaiting(id);
  if (Number.isFinite(m.now)) clock.offset = m.now - Date.now();
  if (Number.isFinite(m.timeoutMs) && m.timeoutMs > 0) clock.timeoutMs = m.timeoutMs;
  if (Array.isArray(m.waiting)) for (const w of m.waiting.slice(0, MAX_WAITING)) addWaiting(w);
  renderWaiting();
}

/** One more conversation waiting, when the message names it sanely (at most MAX_WAITING). */
export function addWaiting(/** @type {any} */ w) {
  if (w === null || typeof w !== 'object') return;
  const id = w.conversationId;
  if (typeof id !== 'string' || id.length > MAX_NAME || typeof w.orchestrator !== 'string') return;
  if (!Number.isFinite(w.suspendedAt) || waiting.size >= MAX_WAITING) return;
  const r = w.request;
  const text =
    r !== null && typeof r === 'object' && typeof r.desk === 'string' && Number.isFinite(r.move)
      ? `${r.desk.slice(0, MAX_NAME)} would move its quote ${(100 * r.move).toFixed(1)}%`
      : 'a quote past the risk limit';
  waiting.set(id, {
    orchestrator: w.orchestrator.slice(0, MAX_NAME),
    suspendedAt: w.suspendedAt,
    text,
  });
  renderWaiting();
}

/** A conversation decided (here or elsewhere) leaves the list. */
export function removeWaiting(/** @type {unknown} */ id) {
  if (typeof id !== 'string') return;
  const w = waiting.get(id);
  if (w === undefined) return;
  w.li?.remove();
  waiting.delete(id);
  renderWaiting();
}

/** Asks the service to resume a waiting conversation with a person's decision. */
async function decide(
  /** @type {string} */ id,
  /** @type {string} */ decision,
  /** @type {HTMLElement} */ status,
) {
  status.textContent = `${decision === 'approve' ? 'approving' : 'rejecting'}…`;
  try {
    const res = await fetch(`/conversations/${encodeURIComponent(id)}/resume`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ decision }),
    });
    if (res.ok) removeWaiting(id);
    else {
      /** @type {{error?: unknown}} */
      const body = await res.json().catch(() => ({}));
      status.textContent = `${res.status}: ${String(body?.error ?? '').slice(0, 200)}`;
    }
  } catch (error) {
    status.textContent = `failed: ${String(error).slice(0, 200)}`;
  }
}

/** The list, each entry's wait (redrawn every second), and the note on the timeout. */
export function renderWaiting() {
  const list = $('approvals');
  const listed = [...waiting.entries()].filter(([, w]) => shown(w.orchestrator));
  $('approvals-count').textContent = String(listed.length);
  const none = list.querySelector('li.none');
  if (listed.length === 0 && none === null) {
    const li = document.createElement('li');
    li.className = 'none';
    li.textContent = 'none';
    list.append(li);
  } else if (listed.length > 0) none?.remove();
  const now = Date.now() + clock.offset;
  for (const [id, w] of waiting) {
    if (w.li === undefined) {
      const li = document.createElement('li');
      li.dataset.id = id;
      const what = document.createElement('span');
      what.textContent = `${w.orchestrator} · ${id.slice(0, 8)}… · ${w.text} · `;
      const waited = document.createElement('span');
      waited.className = 'waited';
      const approve = document.createElement('button');
      approve.type = 'button';
      approve.textContent = 'Approve';
      const reject = document.createElement('button');
      reject.type = 'button';
      reject.textContent = 'Reject';
      const status = document.createElement('span');
      status.className = 'status';
      approve.addEventListener('click', () => void decide(id, 'approve', status));
      reject.addEventListener('click', () => void decide(id, 'reject', status));
      li.append(what, waited, ' ', approve, ' ', reject, ' ', status);
      list.append(li);
      w.li = li;
    }
    w.li.hidden = !shown(w.orchestrator);
    const s = Math.max(0, Math.round((now - w.suspendedAt) / 1000));
    /** @type {HTMLElement} */ (w.li.querySelector('.waited')).textContent =
      `waiting ${s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`}`;
  }
  $('approvals-note').textContent =
    clock.timeoutMs > 0
      ? `A risk desk asks before a quote that moves its price more than 3%. Unanswered for ${Math.round(clock.timeoutMs / 1000)} s, a conversation is rejected.`
      : 'A risk desk asks before a quote that moves its price more than 3%.';
  renderResumed();
}
