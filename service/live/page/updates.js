// @ts-check
// The state, updated per message: each handler takes what the service sent (JSON of any shape)
// and keeps only what is sane and within the page's bounds.
import {
  FLOOR,
  MAX_FINISHED,
  MAX_IN_FLIGHT,
  MAX_NAME,
  MAX_ORCHESTRATORS,
  MAX_POINTS,
  MAX_REASONS,
  MAX_RECENT,
  MAX_RESUMED,
  TRACE_ID,
} from './constants.js';
import { $, filterSelect } from './dom.js';
import { markOf } from './format.js';
import { forgetRecentItems } from './recent.js';
import { state } from './state.js';
import { traceTemplate } from './traces.js';

/** @typedef {import('./state.js').Conversation} Conversation */
/** @typedef {import('./state.js').Counts} Counts */

/** The conversation a message is about, or undefined for a message that names none sanely. */
function conversation(/** @type {any} */ m) {
  const id = m.conversationId;
  if (typeof id !== 'string' || id.length > MAX_NAME || typeof m.orchestrator !== 'string') return;
  let c = state.conversations.get(id);
  if (c === undefined) {
    let inFlight = 0;
    let oldest;
    for (const [key, other] of state.conversations) {
      if (other.reason !== undefined) continue;
      inFlight++;
      oldest ??= key;
    }
    if (inFlight >= MAX_IN_FLIGHT && oldest !== undefined) state.conversations.delete(oldest);
    c = {
      orchestrator: m.orchestrator.slice(0, MAX_NAME),
      spreads: [],
      seen: performance.now(),
    };
    state.conversations.set(id, c);
  }
  return c;
}

/**
 * The point a message adds (index, spread), or undefined when its numbers are not sane.
 * @returns {[number, number] | undefined}
 */
function point(/** @type {any} */ m) {
  const n = m.dispatchCount;
  if (!Number.isInteger(n) || n < 1 || typeof m.spread !== 'number' || Number.isNaN(m.spread)) {
    return undefined;
  }
  return [Math.min(n, state.maxDispatches) - 1, Math.min(Math.max(m.spread, FLOOR), 1e12)];
}

/** Marks a conversation resumed after a restart when the message says so. */
function markResumed(/** @type {any} */ m, /** @type {Conversation} */ c) {
  if (m.resumed !== true || c.resumed === true) return;
  c.resumed = true;
  if (state.resumedIds.size < MAX_RESUMED) state.resumedIds.add(m.conversationId);
  state.version++;
}

export function onDispatch(/** @type {any} */ m) {
  const p = point(m);
  const c = p === undefined ? undefined : conversation(m);
  if (c === undefined || p === undefined || c.reason !== undefined) return;
  markResumed(m, c);
  c.spreads[p[0]] = p[1];
  c.seen = performance.now();
  noteWorker(c, m.worker);
}

/** Fleet mode: the workers that ran a conversation's segments, in order (a few at most). */
function noteWorker(/** @type {Conversation} */ c, /** @type {unknown} */ worker) {
  if (typeof worker !== 'string' || !/^[\w.-]{1,32}$/.test(worker)) return;
  c.workers ??= [];
  if (c.workers[c.workers.length - 1] !== worker && c.workers.length < 8) c.workers.push(worker);
}

export function onEnd(/** @type {any} */ m) {
  const c = conversation(m);
  if (c === undefined || c.reason !== undefined) return;
  markResumed(m, c);
  const reason = typeof m.reason === 'string' ? m.reason.slice(0, MAX_NAME) : 'other';
  c.reason = reason;
  const p = point(m);
  if (p !== undefined && c.spreads[p[0]] === undefined) c.spreads[p[0]] = p[1];
  if (typeof m.traceId === 'string' && TRACE_ID.test(m.traceId)) c.traceId = m.traceId;
  noteWorker(c, m.worker);
  const dispatchCount =
    Number.isInteger(m.dispatchCount) && m.dispatchCount >= 0 ? m.dispatchCount : 0;
  const elapsedMs = Number.isFinite(m.elapsedMs) && m.elapsedMs >= 0 ? m.elapsedMs : 0;
  c.dispatchCount = dispatchCount;
  c.elapsedMs = elapsedMs;
  const tokens = tokensOf(m.tokens);
  if (tokens !== undefined) c.tokens = tokens;
  state.finished.push(m.conversationId);
  while (state.finished.length > MAX_FINISHED) {
    state.conversations.delete(/** @type {string} */ (state.finished.shift()));
  }
  // Counted for the orchestrators the service named only (any other is never shown).
  if (!state.orchestrators.includes(c.orchestrator)) return;
  state.endedHere++;
  state.version++;
  const mark = markOf(reason);
  count(state.counts, c.orchestrator, mark, 1);
  if (state.serviceCounts !== undefined) count(state.serviceCounts, c.orchestrator, mark, 1);
  if (reason !== 'converged' || (state.slowMs > 0 && elapsedMs > state.slowMs)) {
    state.recent.unshift({
      id: m.conversationId,
      orchestrator: c.orchestrator,
      reason,
      dispatchCount,
      elapsedMs,
      ...(c.traceId === undefined ? {} : { traceId: c.traceId }),
      ...(c.tokens === undefined ? {} : { tokens: c.tokens }),
    });
    state.recent.length = Math.min(state.recent.length, MAX_RECENT);
  }
}

/**
 * Each run of spreads in a list (an `updates` frame's dispatches, a history's conversations):
 * `{conversationId, orchestrator, fromDispatch, spreads}`, at most MAX_IN_FLIGHT of them, each
 * sane one handed with its conversation (still in flight) and its sane points, within the page's
 * bounds. Whatever the list holds, the page keeps them.
 */
function eachRun(
  /** @type {unknown} */ list,
  /** @type {(run: any, c: Conversation, points: [number, number][]) => void} */ visit,
) {
  if (!Array.isArray(list)) return;
  for (const run of list.slice(0, MAX_IN_FLIGHT)) {
    if (run === null || typeof run !== 'object' || !Array.isArray(run.spreads)) continue;
    const from = run.fromDispatch;
    if (!Number.isInteger(from) || from < 1 || from > state.maxDispatches) continue;
    const c = conversation(run);
    if (c === undefined || c.reason !== undefined) continue;
    markResumed(run, c);
    const n = Math.min(run.spreads.length, state.maxDispatches - from + 1);
    /** @type {[number, number][]} */
    const points = [];
    for (let i = 0; i < n; i++) {
      const p = point({ dispatchCount: from + i, spread: run.spreads[i] });
      if (p !== undefined) points.push(p);
    }
    visit(run, c, points);
  }
}

/**
 * One interval's updates (the service sends one frame per interval, not one per dispatch): each
 * conversation's dispatches since the last frame, then the conversations that ended. Whatever
 * the frame holds, the page keeps its bounds.
 */
export function onUpdates(/** @type {any} */ m) {
  eachRun(m.dispatches, (d, c, points) => {
    noteWorker(c, d.worker);
    for (const [i, spread] of points) c.spreads[i] = spread;
    c.seen = performance.now();
  });
  if (Array.isArray(m.ends)) {
    for (const e of m.ends.slice(0, MAX_IN_FLIGHT))
      if (e !== null && typeof e === 'object') onEnd(e);
  }
}

/** Input plus output tokens of an end message, when both are sane counts. */
function tokensOf(/** @type {any} */ t) {
  if (t === null || typeof t !== 'object') return undefined;
  const { input, output } = t;
  if (!Number.isSafeInteger(input) || !Number.isSafeInteger(output) || input < 0 || output < 0)
    return undefined;
  return input + output;
}

function count(
  /** @type {Counts} */ counts,
  /** @type {string} */ orchestrator,
  /** @type {string} */ reason,
  /** @type {number} */ n,
) {
  const byReason = counts.get(orchestrator) ?? new Map();
  byReason.set(reason, (byReason.get(reason) ?? 0) + n);
  counts.set(orchestrator, byReason);
}

/**
 * The conversations in flight when the page connected, with their recent spreads, and the
 * endings since the service started. Whatever the message holds, the page keeps its bounds.
 */
export function onHistory(/** @type {any} */ m) {
  // What a frame since brought stays: the history fills only the points not yet known.
  eachRun(m.conversations, (_h, c, points) => {
    for (const [i, spread] of points) if (c.spreads[i] === undefined) c.spreads[i] = spread;
  });
  if (Number.isSafeInteger(m.resumedEnded) && m.resumedEnded >= 0) {
    state.resumedEnded = m.resumedEnded;
  }
  if (m.totals !== null && typeof m.totals === 'object') {
    /** @type {Counts} */
    const totals = new Map();
    for (const o of state.orchestrators) {
      const byReason = m.totals[o];
      if (byReason === null || typeof byReason !== 'object') continue;
      for (const [reason, n] of Object.entries(byReason).slice(0, MAX_REASONS)) {
        if (!Number.isSafeInteger(n) || n < 0) continue;
        count(totals, o, markOf(reason), n);
      }
    }
    state.serviceCounts = totals;
    state.version++;
    const since = new Date(typeof m.since === 'string' ? m.since : Number.NaN);
    state.serviceSince = Number.isNaN(since.getTime()) ? '' : since.toLocaleTimeString();
  }
}

/** What the service says first: its orchestrators, the tolerance band, its limits and rules. */
export function onHello(/** @type {any} */ m) {
  if (Array.isArray(m.orchestrators)) {
    state.orchestrators = [
      ...new Set(
        m.orchestrators
          .slice(0, MAX_ORCHESTRATORS)
          .map((/** @type {unknown} */ o) => String(o).slice(0, MAX_NAME)),
      ),
    ];
  }
  if (typeof m.tolerance === 'number' && m.tolerance > 0 && m.tolerance < Infinity) {
    state.tolerance = m.tolerance;
  }
  if (Number.isInteger(m.maxDispatches) && m.maxDispatches > 0) {
    state.maxDispatches = Math.min(m.maxDispatches, MAX_POINTS);
  }
  state.traceUrl = traceTemplate(m.traceUrl);
  // The service's slow rule, so that every conversation listed as slow has its trace kept.
  if (Number.isFinite(m.slowMs) && m.slowMs >= 0 && m.slowMs <= 86_400_000) state.slowMs = m.slowMs;
  $('recent-note').textContent =
    state.slowMs > 0
      ? `not converged, or converged after more than ${state.slowMs / 1000} s; newest first (the list holds still while the pointer or the focus is on it)`
      : 'not converged; newest first (the list holds still while the pointer or the focus is on it)';
  $('trace-hint').hidden = state.traceUrl === undefined;
  $('trace-off').hidden = state.traceUrl !== undefined;
  // The list's links follow the template: its entries are made anew.
  forgetRecentItems();
  state.version++;
  // Totals since the service started come with the history; until then they are unknown.
  state.serviceCounts = undefined;
  const options = ['*', ...state.orchestrators];
  const shown = [...filterSelect.options].map((o) => o.value);
  if (shown.join() !== options.join()) {
    filterSelect.replaceChildren(
      ...options.map((value) => new Option(value === '*' ? 'all' : value, value)),
    );
    filterSelect.value = options.includes(state.filter) ? state.filter : '*';
    state.filter = filterSelect.value;
  }
}
