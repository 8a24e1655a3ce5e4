// The live convergence page: reads /ws (it never sends), keeps a bounded picture of the
// conversations, and draws it at most once per animation frame, so a burst of thousands of
// updates per second costs one cheap state update each and one redraw per frame.
import uPlot from '/vendor/uPlot.esm.js';

/** Finished conversations kept (the newest); older ones leave the chart. */
const MAX_FINISHED = 40;
/** Series slots of the chart: conversations in flight, then the newest finished. */
const SLOTS = 64;
/** Slots kept for finished lines however many are in flight, so endings always show. */
const FINISHED_SLOTS = 24;
/** Entries of the "recent slow or failed" list. */
const MAX_RECENT = 8;
/** A converged conversation slower than this is listed as slow, unless the service says. */
const SLOW_MS = 1_000;
/** Most distinct reasons taken per orchestrator from the service's totals. */
const MAX_REASONS = 32;
/** Mark radius and the room kept around the plot so that no mark is cut off, CSS pixels. */
const MARK_RADIUS = 4;
const PLOT_PADDING = 12;
/** Room inside the plotting area, CSS pixels, so that a mark at its edge lies wholly inside. */
const MARK_ROOM = MARK_RADIUS + 3;
/** How near the pointer a line must pass to be the one hovered, CSS pixels. */
const HOVER_PX = 6;
/** Line widths: a conversation in flight stands out from the finished ones, drawn thin. */
const IN_FLIGHT_WIDTH = 2.5;
const FINISHED_WIDTH = 1;
const CHART_HEIGHT = 380;
/** A trace id as W3C trace context writes it (all zeros is invalid). */
const TRACE_ID = /^(?!0{32})[0-9a-f]{32}$/;
const TRACE_PLACEHOLDER = '{traceId}';
/** An in-flight conversation not heard of for this long lost its end (a dropped update). */
const STALE_MS = 30_000;
// Bounds on what a message can make the page hold or draw, whatever the socket says: the page
// must not hang on a hostile or broken service (a dispatch count of 2**30, a million ids).
/** Most points of one line (a larger maxDispatches from the service is taken as this). */
const MAX_POINTS = 10_000;
/** Most conversations in flight kept; past it the oldest is forgotten. */
const MAX_IN_FLIGHT = 1_000;
/** Most orchestrators taken from the hello message, and the longest name or id kept. */
const MAX_ORCHESTRATORS = 32;
const MAX_NAME = 200;
const REASONS = ['converged', 'max_dispatches', 'timeout', 'error', 'aborted'];
const MARK_COLORS = {
  converged: '#1a7f37',
  max_dispatches: '#9a6700',
  timeout: '#8250df',
  error: '#cf222e',
  aborted: '#59636e',
  other: '#1f2328',
};
/** Line colours by orchestrator (in the order the service lists them). */
const LINE_COLORS = ['#0969da', '#bf3989', '#0a7c86', '#953800'];
/** Spreads are drawn on a log scale; a spread of 0 sits at this floor. */
const FLOOR = 1e-6;

const state = {
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
  /** @type {Map<string, Map<string, number>>} ending counts since this page opened */
  counts: new Map(),
  /** @type {Map<string, Map<string, number>> | undefined} since the service started */
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

/** Most resumed conversations remembered, and most waiting conversations listed. */
const MAX_RESUMED = 100_000;
const MAX_WAITING = 100;
/**
 * Conversations waiting for approval: id → what the list shows, with its node (kept while
 * listed, so a button under the pointer is never replaced).
 * @type {Map<string, {orchestrator: string, suspendedAt: number, text: string, li?: HTMLLIElement}>}
 */
const waiting = new Map();
/** The service's clock minus the page's (ms), from the approvals message. */
let clockOffset = 0;
/** Unanswered past this long (ms), the service rejects a waiting conversation. */
let approvalTimeoutMs = 0;

/**
 * @typedef {{orchestrator: string, spreads: number[], reason?: string, seen: number, resumed?: boolean,
 *   traceId?: string, dispatchCount?: number, elapsedMs?: number, tokens?: number}} Conversation
 * @typedef {{id: string, orchestrator: string, reason: string, dispatchCount: number,
 *   elapsedMs: number, traceId?: string, tokens?: number}} Recent
 */

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
const filterSelect = /** @type {HTMLSelectElement} */ ($('filter'));
const connection = $('connection');

// --- the state, updated per message -------------------------------------------------------

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

/** The point a message adds (index, spread), or undefined when its numbers are not sane. */
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

function onDispatch(/** @type {any} */ m) {
  const p = point(m);
  const c = p === undefined ? undefined : conversation(m);
  if (c === undefined || p === undefined || c.reason !== undefined) return;
  markResumed(m, c);
  c.spreads[p[0]] = p[1];
  c.seen = performance.now();
  noteWorker(c, m.worker);
}

/** Fleet mode: the workers that ran a conversation's segments, in order (a few at most). */
function noteWorker(/** @type {any} */ c, /** @type {unknown} */ worker) {
  if (typeof worker !== 'string' || !/^[\w.-]{1,32}$/.test(worker)) return;
  c.workers ??= [];
  if (c.workers[c.workers.length - 1] !== worker && c.workers.length < 8) c.workers.push(worker);
}

function onEnd(/** @type {any} */ m) {
  const c = conversation(m);
  if (c === undefined || c.reason !== undefined) return;
  markResumed(m, c);
  c.reason = typeof m.reason === 'string' ? m.reason.slice(0, MAX_NAME) : 'other';
  const p = point(m);
  if (p !== undefined && c.spreads[p[0]] === undefined) c.spreads[p[0]] = p[1];
  if (typeof m.traceId === 'string' && TRACE_ID.test(m.traceId)) c.traceId = m.traceId;
  noteWorker(c, m.worker);
  c.dispatchCount = Number.isInteger(m.dispatchCount) && m.dispatchCount >= 0 ? m.dispatchCount : 0;
  c.elapsedMs = Number.isFinite(m.elapsedMs) && m.elapsedMs >= 0 ? m.elapsedMs : 0;
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
  const reason = REASONS.includes(c.reason) ? c.reason : 'other';
  count(state.counts, c.orchestrator, reason, 1);
  if (state.serviceCounts !== undefined) count(state.serviceCounts, c.orchestrator, reason, 1);
  if (c.reason !== 'converged' || (state.slowMs > 0 && c.elapsedMs > state.slowMs)) {
    state.recent.unshift({
      id: m.conversationId,
      orchestrator: c.orchestrator,
      reason: c.reason,
      dispatchCount: c.dispatchCount,
      elapsedMs: c.elapsedMs,
      ...(c.traceId === undefined ? {} : { traceId: c.traceId }),
      ...(c.tokens === undefined ? {} : { tokens: c.tokens }),
    });
    state.recent.length = Math.min(state.recent.length, MAX_RECENT);
  }
}

/**
 * One interval's updates (the service sends one frame per interval, not one per dispatch): each
 * conversation's dispatches since the last frame, then the conversations that ended. Whatever
 * the frame holds, the page keeps its bounds.
 */
function onUpdates(/** @type {any} */ m) {
  if (Array.isArray(m.dispatches)) {
    for (const d of m.dispatches.slice(0, MAX_IN_FLIGHT)) {
      if (d === null || typeof d !== 'object' || !Array.isArray(d.spreads)) continue;
      const from = d.fromDispatch;
      if (!Number.isInteger(from) || from < 1 || from > state.maxDispatches) continue;
      const c = conversation(d);
      if (c === undefined || c.reason !== undefined) continue;
      markResumed(d, c);
      noteWorker(c, d.worker);
      const n = Math.min(d.spreads.length, state.maxDispatches - from + 1);
      for (let i = 0; i < n; i++) {
        const p = point({ dispatchCount: from + i, spread: d.spreads[i] });
        if (p !== undefined) c.spreads[p[0]] = p[1];
      }
      c.seen = performance.now();
    }
  }
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

/** 12,345 → "12.3k", as a person reads a token count. */
function tokenText(/** @type {number} */ n) {
  if (n < 1000) return `${n}`;
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}

function count(
  /** @type {Map<string, Map<string, number>>} */ counts,
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
function onHistory(/** @type {any} */ m) {
  if (Array.isArray(m.conversations)) {
    for (const h of m.conversations.slice(0, MAX_IN_FLIGHT)) {
      if (h === null || typeof h !== 'object' || !Array.isArray(h.spreads)) continue;
      const from = h.fromDispatch;
      if (!Number.isInteger(from) || from < 1 || from > state.maxDispatches) continue;
      const c = conversation(h);
      if (c === undefined || c.reason !== undefined) continue;
      markResumed(h, c);
      const n = Math.min(h.spreads.length, state.maxDispatches - from + 1);
      for (let i = 0; i < n; i++) {
        const p = point({ dispatchCount: from + i, spread: h.spreads[i] });
        if (p !== undefined && c.spreads[p[0]] === undefined) c.spreads[p[0]] = p[1];
      }
    }
  }
  if (Number.isSafeInteger(m.resumedEnded) && m.resumedEnded >= 0) {
    state.resumedEnded = m.resumedEnded;
  }
  if (m.totals !== null && typeof m.totals === 'object') {
    /** @type {Map<string, Map<string, number>>} */
    const totals = new Map();
    for (const o of state.orchestrators) {
      const byReason = m.totals[o];
      if (byReason === null || typeof byReason !== 'object') continue;
      for (const [reason, n] of Object.entries(byReason).slice(0, MAX_REASONS)) {
        if (!Number.isSafeInteger(n) || n < 0) continue;
        count(totals, o, REASONS.includes(reason) ? reason : 'other', n);
      }
    }
    state.serviceCounts = totals;
    state.version++;
    const since = new Date(typeof m.since === 'string' ? m.since : Number.NaN);
    state.serviceSince = Number.isNaN(since.getTime()) ? '' : since.toLocaleTimeString();
  }
}

/** The template with `{traceId}` once, http(s) once filled in; anything else: no links. */
function traceTemplate(/** @type {unknown} */ value) {
  if (typeof value !== 'string' || value.length > 2000) return undefined;
  if (value.split(TRACE_PLACEHOLDER).length !== 2) return undefined;
  try {
    const url = new URL(value.replace(TRACE_PLACEHOLDER, '0123456789abcdef0123456789abcdef'));
    return url.protocol === 'http:' || url.protocol === 'https:' ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The trace's URL, or undefined without a template or a valid id. */
function traceLink(/** @type {string | undefined} */ traceId) {
  if (state.traceUrl === undefined || traceId === undefined || !TRACE_ID.test(traceId)) return;
  return state.traceUrl.replace(TRACE_PLACEHOLDER, traceId);
}

function onHello(/** @type {any} */ m) {
  if (Array.isArray(m.orchestrators)) {
    state.orchestrators = [
      ...new Set(
        m.orchestrators.slice(0, MAX_ORCHESTRATORS).map((o) => String(o).slice(0, MAX_NAME)),
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
  recentItems.clear();
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

function receive(/** @type {MessageEvent} */ event) {
  let m;
  try {
    m = JSON.parse(event.data);
  } catch {
    return;
  }
  if (m === null || typeof m !== 'object') return;
  if (m.type === 'updates') onUpdates(m);
  else if (m.type === 'dispatch') onDispatch(m);
  else if (m.type === 'end') onEnd(m);
  else if (m.type === 'history') onHistory(m);
  else if (m.type === 'approvals') onApprovals(m);
  else if (m.type === 'approval') addWaiting(m);
  else if (m.type === 'decided') removeWaiting(m.conversationId);
  else if (m.type === 'hello') {
    onHello(m);
    setConnection('live', 'live');
    attempt = 0;
  }
  schedule();
}

// --- the connection, with backoff -----------------------------------------------------------

let attempt = 0;
let retry = 0;

function setConnection(/** @type {string} */ kind, /** @type {string} */ text) {
  connection.dataset.state = kind;
  connection.textContent = text;
}

function connect() {
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(`${scheme}//${location.host}/ws`);
  ws.addEventListener('message', receive);
  ws.addEventListener('close', (event) => {
    // Whatever was in flight will never end on this connection.
    for (const [id, c] of state.conversations) {
      if (c.reason === undefined) state.conversations.delete(id);
    }
    schedule();
    const delay = Math.min(10_000, 500 * 2 ** attempt) * (0.75 + Math.random() * 0.5);
    attempt++;
    const why = event.reason ? ` (${event.reason})` : '';
    setConnection(
      'reconnecting',
      `disconnected${why}; reconnecting in ${(delay / 1000).toFixed(1)} s`,
    );
    clearTimeout(retry);
    retry = window.setTimeout(() => {
      setConnection('connecting', 'connecting…');
      connect();
    }, delay);
  });
}

// --- drawing, once per animation frame ------------------------------------------------------

/** The conversation drawn in each series slot (index 0 is uPlot's x series). */
let slotted = /** @type {(Conversation | undefined)[]} */ ([]);
let chart = /** @type {uPlot | undefined} */ (undefined);
let frame = 0;
/**
 * The end marks as drawn in the last frame, in CSS pixels of the plotting area (uPlot's `over`
 * element): for clicks, and for the tests on `#chart[data-marks]`.
 * @type {{x: number, y: number, reason: string, id: string, traceId?: string, c: Conversation}[]}
 */
let marks = [];
/** The conversation the panel under the chart shows, and whether a click keeps it there. */
let hovered = /** @type {Conversation | undefined} */ (undefined);
let pinned = false;
/** What the panel last said (it is rebuilt only when that changes: its link stays clickable). */
let hoveredShown = '';
/** `state.version` as the tables, and as the list, last showed it. */
let countsShown = -1;
let recentShown = -1;

function schedule() {
  state.dirty = true;
  if (frame === 0) frame = requestAnimationFrame(render);
}

function lineColor(/** @type {string} */ orchestrator, /** @type {boolean} */ finished) {
  const i = state.orchestrators.indexOf(orchestrator);
  const color = LINE_COLORS[Math.max(i, 0) % LINE_COLORS.length];
  return finished ? `${color}4d` : color;
}

/** The plotting area's size in CSS pixels (before the first layout: what it will about be). */
function plotSize(/** @type {uPlot} */ u) {
  if (u.bbox !== undefined && u.bbox.width > 0)
    return [u.bbox.width / devicePixelRatio, u.bbox.height / devicePixelRatio];
  return [
    $('chart').clientWidth - 70 - PLOT_PADDING - MARK_RADIUS,
    CHART_HEIGHT - 50 - PLOT_PADDING,
  ];
}

/** [low, high] widened by MARK_ROOM pixels each side of a `pixels`-long axis (in `scale` units). */
function widened(
  /** @type {number} */ low,
  /** @type {number} */ high,
  /** @type {number} */ pixels,
) {
  const pad = ((high - low) * MARK_ROOM) / Math.max(pixels - 2 * MARK_ROOM, MARK_ROOM);
  return [low - pad, high + pad];
}

function createChart() {
  const el = $('chart');
  const series = [{}];
  for (let i = 1; i <= SLOTS; i++) {
    series.push({
      stroke: (/** @type {uPlot} */ _u, /** @type {number} */ si) => {
        const c = slotted[si];
        return c === undefined ? 'transparent' : lineColor(c.orchestrator, c.reason !== undefined);
      },
      width: FINISHED_WIDTH,
      points: { show: false },
      spanGaps: true,
    });
  }
  const u = new uPlot(
    {
      width: el.clientWidth,
      height: CHART_HEIGHT,
      // Room outside the plot for the axes' last labels; marks get theirs inside (the ranges).
      padding: [PLOT_PADDING, PLOT_PADDING + MARK_RADIUS, 0, 0],
      legend: { show: false },
      cursor: { show: false },
      scales: {
        // Dispatch 1 and the last dispatch sit MARK_ROOM pixels inside the plot, so that a mark
        // there is whole and clear of the axis.
        x: {
          time: false,
          range: (u, min, max) =>
            /** @type {uPlot.Range.MinMax} */ (
              widened(min ?? 1, Math.max(max ?? 10, (min ?? 1) + 1), plotSize(u)[0])
            ),
        },
        y: {
          distr: 3,
          // Likewise on the log scale: the lowest and the highest spread, MARK_ROOM inside.
          range: (u, min, max) => {
            const low = Math.min(min ?? state.tolerance, state.tolerance / 10);
            const high = Math.max(max ?? 10, state.tolerance * 100);
            const [a, b] = widened(Math.log10(low), Math.log10(high), plotSize(u)[1]);
            return [10 ** /** @type {number} */ (a), 10 ** /** @type {number} */ (b)];
          },
        },
      },
      axes: [
        { label: 'dispatch (one desk quoting once)', stroke: '#59636e' },
        { label: 'spread (highest − lowest quote)', stroke: '#59636e', size: 70 },
      ],
      series,
      hooks: { drawClear: [drawBand], draw: [drawMarks] },
    },
    [[1], ...Array.from({ length: SLOTS }, () => [null])],
    el,
  );
  // While the pointer is on the chart it holds still (the page keeps counting): a line can be
  // read, and a mark clicked, before the next conversation moves it.
  u.over.addEventListener('mouseenter', () => hold(true));
  u.over.addEventListener('mouseleave', () => hold(false));
  u.over.addEventListener('click', (event) => {
    const mark = markAt(event.offsetX, event.offsetY);
    const link = traceLink(mark?.traceId);
    if (link !== undefined) window.open(link, '_blank', 'noopener,noreferrer');
    // A click on a line keeps it in the panel; a click elsewhere lets it go.
    const c = mark?.c ?? lineAt(event.offsetX, event.offsetY);
    pinned = c !== undefined;
    if (c !== undefined) hovered = c;
    renderHovered();
  });
  u.over.addEventListener('mousemove', (event) => {
    const mark = markAt(event.offsetX, event.offsetY);
    u.over.style.cursor = traceLink(mark?.traceId) === undefined ? '' : 'pointer';
    if (pinned) return;
    const c = mark?.c ?? lineAt(event.offsetX, event.offsetY);
    if (c !== undefined && c !== hovered) {
      hovered = c;
      renderHovered();
    }
  });
  return u;
}

function hold(/** @type {boolean} */ on) {
  state.held = on;
  $('chart').dataset.held = String(on);
  $('held').hidden = !on;
  if (!on) schedule();
}

// The list holds still too while the pointer is on it or the keyboard's focus is on a link in it:
// a new entry would push the others down, and the oldest out (taking the focus with it).
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

/** The end mark under the pointer (within a few pixels), the newest first. */
function markAt(/** @type {number} */ x, /** @type {number} */ y) {
  let best;
  let bestDistance = (MARK_RADIUS + 4) ** 2;
  for (const m of marks) {
    const d = (m.x - x) ** 2 + (m.y - y) ** 2;
    if (d <= bestDistance) {
      best = m;
      bestDistance = d;
    }
  }
  return best;
}

/** The conversation whose line passes nearest the pointer, within HOVER_PX; in flight first. */
function lineAt(/** @type {number} */ x, /** @type {number} */ y) {
  const u = chart;
  if (u === undefined) return undefined;
  // The points (spreads indexes) whose segments can pass within reach of x.
  const from = Math.max(Math.floor(u.posToVal(x - HOVER_PX, 'x')) - 2, 0);
  const to = Math.ceil(u.posToVal(x + HOVER_PX, 'x'));
  let best;
  let bestDistance = HOVER_PX;
  for (let si = slotted.length - 1; si >= 1; si--) {
    const c = slotted[si];
    if (c === undefined) continue;
    /** @type {[number, number] | undefined} */
    let previous;
    for (let i = from; i <= Math.min(to, c.spreads.length - 1); i++) {
      const v = c.spreads[i];
      if (v === undefined) continue;
      /** @type {[number, number]} */
      const p = [u.valToPos(i + 1, 'x'), u.valToPos(v, 'y')];
      const d =
        previous === undefined ? Math.hypot(p[0] - x, p[1] - y) : toSegment(previous, p, x, y);
      if (d < bestDistance) {
        best = c;
        bestDistance = d;
      }
      previous = p;
    }
  }
  return best;
}

/** Distance from (x, y) to the segment a-b. */
function toSegment(
  /** @type {[number, number]} */ [ax, ay],
  /** @type {[number, number]} */ [bx, by],
  /** @type {number} */ x,
  /** @type {number} */ y,
) {
  const dx = bx - ax;
  const dy = by - ay;
  const t = Math.max(0, Math.min(1, ((x - ax) * dx + (y - ay) * dy) / (dx * dx + dy * dy || 1)));
  return Math.hypot(ax + t * dx - x, ay + t * dy - y);
}

/** The tolerance band: spreads below it count as agreement. */
function drawBand(/** @type {uPlot} */ u) {
  const { ctx, bbox } = u;
  const top = Math.max(bbox.top, u.valToPos(state.tolerance, 'y', true));
  ctx.save();
  ctx.fillStyle = 'rgba(26, 127, 55, 0.12)';
  ctx.fillRect(bbox.left, top, bbox.width, bbox.top + bbox.height - top);
  ctx.strokeStyle = MARK_COLORS.converged;
  ctx.setLineDash([4, 4]);
  ctx.beginPath();
  ctx.moveTo(bbox.left, top);
  ctx.lineTo(bbox.left + bbox.width, top);
  ctx.stroke();
  ctx.restore();
}

/**
 * A mark at the last point of every finished line, shaped and coloured by how it ended; a ring
 * at the newest point of every line in flight (where it is now).
 */
/** A resumed conversation's mark: a hollow square where it resumed (its first point here). */
function drawResumed(
  /** @type {uPlot} */ u,
  /** @type {Conversation} */ c,
  /** @type {number} */ r,
) {
  const first = c.spreads.findIndex((v) => v !== undefined);
  if (first < 0) return;
  const x = u.valToPos(first + 1, 'x', true);
  const y = u.valToPos(/** @type {number} */ (c.spreads[first]), 'y', true);
  const { ctx } = u;
  ctx.beginPath();
  ctx.rect(x - r, y - r, 2 * r, 2 * r);
  ctx.fillStyle = '#ffffff';
  ctx.fill();
  ctx.strokeStyle = lineColor(c.orchestrator, false);
  ctx.lineWidth = 2 * devicePixelRatio;
  ctx.stroke();
}

function drawMarks(/** @type {uPlot} */ u) {
  const { ctx } = u;
  const r = MARK_RADIUS * devicePixelRatio;
  const drawn = [];
  const heads = [];
  ctx.save();
  // Oldest first, so the newest ending is on top (and found first by a click).
  for (let si = slotted.length - 1; si >= 1; si--) {
    const c = slotted[si];
    if (c === undefined || c.spreads.length === 0) continue;
    const last = c.spreads.length;
    const value = c.spreads[last - 1] ?? FLOOR;
    const x = u.valToPos(last, 'x', true);
    const y = u.valToPos(value, 'y', true);
    if (c.resumed === true) drawResumed(u, c, r);
    if (c.reason === undefined) {
      heads.push([u.valToPos(last, 'x'), u.valToPos(value, 'y'), idOf(c)]);
      ctx.beginPath();
      ctx.arc(x, y, r * 0.75, 0, 2 * Math.PI);
      ctx.fillStyle = '#ffffff';
      ctx.fill();
      ctx.strokeStyle = lineColor(c.orchestrator, false);
      ctx.lineWidth = 1.5 * devicePixelRatio;
      ctx.stroke();
      continue;
    }
    const reason = REASONS.includes(c.reason) ? c.reason : 'other';
    drawn.push({
      x: u.valToPos(last, 'x'),
      y: u.valToPos(value, 'y'),
      reason,
      id: /** @type {string} */ (idOf(c)),
      ...(c.traceId === undefined ? {} : { traceId: c.traceId }),
      c,
    });
    ctx.fillStyle = MARK_COLORS[/** @type {keyof typeof MARK_COLORS} */ (reason)];
    ctx.strokeStyle = ctx.fillStyle;
    ctx.lineWidth = 2 * devicePixelRatio;
    ctx.beginPath();
    if (reason === 'converged') ctx.arc(x, y, r, 0, 2 * Math.PI);
    else if (reason === 'max_dispatches') ctx.rect(x - r, y - r, 2 * r, 2 * r);
    else if (reason === 'timeout') {
      ctx.moveTo(x, y - r);
      ctx.lineTo(x + r, y + r);
      ctx.lineTo(x - r, y + r);
      ctx.closePath();
    } else if (reason === 'aborted') {
      ctx.moveTo(x, y - r);
      ctx.lineTo(x + r, y);
      ctx.lineTo(x, y + r);
      ctx.lineTo(x - r, y);
      ctx.closePath();
    } else {
      ctx.moveTo(x - r, y - r);
      ctx.lineTo(x + r, y + r);
      ctx.moveTo(x + r, y - r);
      ctx.lineTo(x - r, y + r);
      ctx.stroke();
      continue;
    }
    ctx.fill();
    // A white rim: early failures and timeouts end at nearly the same point, and each of a pile
    // of marks stays visible as one.
    ctx.strokeStyle = '#ffffff';
    ctx.lineWidth = devicePixelRatio;
    ctx.stroke();
  }
  ctx.restore();
  marks = drawn.reverse();
  const el = $('chart');
  el.dataset.marks = JSON.stringify(
    marks.map(({ x, y, reason, id, traceId }) => [x, y, reason, id, traceLink(traceId) ?? '']),
  );
  el.dataset.markRadius = String(MARK_RADIUS);
  // [x, y, conversationId] of the newest point of each line in flight, for the tests.
  el.dataset.heads = JSON.stringify(heads);
}

/** A conversation's id (kept out of the object to keep it small). */
const ids = new WeakMap();
function idOf(/** @type {Conversation} */ c) {
  return ids.get(c);
}

function render() {
  frame = 0;
  if (!state.dirty) return;
  state.dirty = false;
  const now = performance.now();
  const shown = (/** @type {string} */ o) => state.filter === '*' || state.filter === o;
  const inFlight = [];
  const done = [];
  for (const [id, c] of state.conversations) {
    if (c.reason === undefined && now - c.seen > STALE_MS) {
      state.conversations.delete(id);
      continue;
    }
    ids.set(c, id);
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
  if (state.held && chart !== undefined) return;
  done.reverse(); // newest first
  // Finished lines keep their slots however many are in flight; in flight take the rest.
  const inFlightDrawn = inFlight.slice(0, SLOTS - Math.min(done.length, FINISHED_SLOTS));
  const doneDrawn = done.slice(0, SLOTS - inFlightDrawn.length);
  // Finished first: uPlot draws the slots in order, so the lines in flight lie on top.
  const visible = [...doneDrawn, ...inFlightDrawn];
  slotted = [undefined, ...visible];
  let width = 10;
  for (const c of visible) width = Math.max(width, c.spreads.length);
  const x = Array.from({ length: width }, (_, i) => i + 1);
  const data = [x];
  chart ??= createChart();
  for (let si = 1; si <= SLOTS; si++) {
    const c = slotted[si];
    data.push(Array.from(x, (_, i) => c?.spreads[i] ?? null));
    // Read at every draw by uPlot: a line in flight is drawn thick, a finished one thin.
    /** @type {uPlot.Series} */ (chart.series[si]).width =
      c?.reason === undefined ? IN_FLIGHT_WIDTH : FINISHED_WIDTH;
  }
  chart.setData(/** @type {uPlot.AlignedData} */ (data));
  // Where each drawn line starts and ends (dispatch numbers), for the tests.
  $('chart').dataset.spans = JSON.stringify(
    visible.map((c) => [
      c.reason === undefined ? 1 : 0,
      c.spreads.findIndex((v) => v !== undefined) + 1,
      c.spreads.length,
    ]),
  );
  renderLines(visible, inFlightDrawn.length, inFlight.length, doneDrawn.length);
  renderTokens(doneDrawn);
  renderHovered();
}

/** How a conversation ended, as a person says it. */
const endingText = (/** @type {string} */ reason) => reason.replaceAll('_', ' ');

/** 0.0123 → "0.0123", 12.34 → "12.3": a spread to three significant digits. */
const spreadText = (/** @type {number} */ v) =>
  v <= FLOOR ? '0' : String(Number(v.toPrecision(3)));

/** The panel under the chart: the conversation the pointer is on (or a click kept). */
function renderHovered() {
  const el = $('hovered');
  const c = hovered;
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
  const key = `${id}\n${text}\n${link ?? ''}\n${pinned}`;
  if (key === hoveredShown) return;
  hoveredShown = key;
  el.dataset.conversationId = id;
  el.dataset.orchestrator = c.orchestrator;
  el.dataset.state = c.reason ?? 'in_flight';
  el.dataset.dispatches = String(dispatches);
  el.dataset.workers = c.workers === undefined ? '' : c.workers.join(',');
  el.dataset.pinned = String(pinned);
  const name = document.createElement('strong');
  name.textContent = `${c.orchestrator} · ${id}`;
  const parts = [name, ` · ${text}`];
  if (link !== undefined) {
    const a = document.createElement('a');
    a.href = link;
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    a.textContent = 'trace';
    parts.push(' · ', a);
  }
  if (pinned) parts.push(' (kept: click elsewhere on the chart to let go)');
  el.replaceChildren(...parts);
}

/** The caption: every number in it is counted from the lines just drawn. */
function renderLines(
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
function renderTokens(/** @type {Conversation[]} */ finished) {
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

const plural = (/** @type {number} */ n, /** @type {string} */ word) =>
  `${n} ${word}${n === 1 ? '' : word.endsWith('h') ? 'es' : 's'}`;

function renderCounts() {
  fillCounts($('counts-service'), state.serviceCounts);
  fillCounts($('counts'), state.counts);
  $('counts-service-since').textContent =
    state.serviceCounts === undefined
      ? '(not known yet)'
      : state.serviceSince === ''
        ? ''
        : `(at ${state.serviceSince})`;
}

function fillCounts(
  /** @type {HTMLElement} */ table,
  /** @type {Map<string, Map<string, number>> | undefined} */ counts,
) {
  const rows = [];
  const total = new Map();
  const names = state.orchestrators.filter((o) => state.filter === '*' || state.filter === o);
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

/** The list's entries by conversation id, each made once: a link a person points at stays. */
const recentItems = new Map();
const noneYet = Object.assign(document.createElement('li'), { textContent: 'none yet' });

/**
 * The recent slow or failed conversations, each linked to its trace when it can be. Entries
 * already shown keep their nodes: a new one is inserted, the oldest removed, nothing else moves.
 */
function renderRecent() {
  const list = $('recent');
  const entries = state.recent.filter(
    (r) => state.filter === '*' || state.filter === r.orchestrator,
  );
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
  const reason = REASONS.includes(r.reason) ? r.reason : 'other';
  const mark = document.createElement('span');
  mark.className = `mark ${reason}`;
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
  if (link !== undefined) {
    const a = document.createElement('a');
    a.href = link;
    a.target = '_blank';
    a.rel = 'noopener noreferrer';
    a.textContent = 'trace';
    li.append(' · ', a);
  }
  return li;
}

filterSelect.addEventListener('change', () => {
  state.filter = filterSelect.value;
  state.version++;
  schedule();
});
window.addEventListener('resize', () => {
  chart?.setSize({ width: $('chart').clientWidth, height: CHART_HEIGHT });
});
schedule();
connect();

// --- resumed conversations and approvals ----------------------------------------------------

function renderResumed() {
  const n = state.resumedEnded + state.resumedIds.size;
  $('resumed').textContent =
    n === 0
      ? 'no conversation resumed after a restart of the service'
      : `${n} conversation${n === 1 ? '' : 's'} resumed after a restart of the service (□ where each resumed)`;
}

function onApprovals(/** @type {any} */ m) {
  for (const id of [...waiting.keys()]) removeWaiting(id);
  if (Number.isFinite(m.now)) clockOffset = m.now - Date.now();
  if (Number.isFinite(m.timeoutMs) && m.timeoutMs > 0) approvalTimeoutMs = m.timeoutMs;
  if (Array.isArray(m.waiting)) for (const w of m.waiting.slice(0, MAX_WAITING)) addWaiting(w);
  renderWaiting();
}

function addWaiting(/** @type {any} */ w) {
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

function removeWaiting(/** @type {unknown} */ id) {
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
    else
      status.textContent = `${res.status}: ${((await res.json().catch(() => ({}))).error ?? '').slice(0, 200)}`;
  } catch (error) {
    status.textContent = `failed: ${String(error).slice(0, 200)}`;
  }
}

function renderWaiting() {
  const list = $('approvals');
  const shown = [...waiting.entries()].filter(
    ([, w]) => state.filter === '*' || state.filter === w.orchestrator,
  );
  $('approvals-count').textContent = String(shown.length);
  const none = list.querySelector('li.none');
  if (shown.length === 0 && none === null) {
    const li = document.createElement('li');
    li.className = 'none';
    li.textContent = 'none';
    list.append(li);
  } else if (shown.length > 0) none?.remove();
  const now = Date.now() + clockOffset;
  for (const [id, w] of waiting) {
    const visible = state.filter === '*' || state.filter === w.orchestrator;
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
    w.li.hidden = !visible;
    const s = Math.max(0, Math.round((now - w.suspendedAt) / 1000));
    /** @type {HTMLElement} */ (w.li.querySelector('.waited')).textContent =
      `waiting ${s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`}`;
  }
  $('approvals-note').textContent =
    approvalTimeoutMs > 0
      ? `A risk desk asks before a quote that moves its price more than 3%. Unanswered for ${Math.round(approvalTimeoutMs / 1000)} s, a conversation is rejected.`
      : 'A risk desk asks before a quote that moves its price more than 3%.';
  renderResumed();
}

setInterval(renderWaiting, 1000);
