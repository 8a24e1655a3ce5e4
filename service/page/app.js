// The live convergence page: reads /ws (it never sends), keeps a bounded picture of the
// conversations, and draws it at most once per animation frame, so a burst of thousands of
// updates per second costs one cheap state update each and one redraw per frame.
import uPlot from '/vendor/uPlot.esm.js';

/** Finished conversations kept on screen (the newest); older ones leave the chart. */
const MAX_FINISHED = 40;
/** Series slots of the chart: conversations in flight first, then the newest finished. */
const SLOTS = 64;
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
  /** @type {Map<string, {orchestrator: string, spreads: number[], reason?: string, seen: number}>} */
  conversations: new Map(),
  /** Ids of finished conversations, oldest first. */
  finished: /** @type {string[]} */ ([]),
  /** @type {Map<string, Map<string, number>>} ending counts by orchestrator, then reason */
  counts: new Map(),
  dirty: true,
};

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
    c = { orchestrator: m.orchestrator, spreads: [], seen: performance.now() };
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

function onDispatch(/** @type {any} */ m) {
  const p = point(m);
  const c = p === undefined ? undefined : conversation(m);
  if (c === undefined || p === undefined || c.reason !== undefined) return;
  c.spreads[p[0]] = p[1];
  c.seen = performance.now();
}

function onEnd(/** @type {any} */ m) {
  const c = conversation(m);
  if (c === undefined || c.reason !== undefined) return;
  c.reason = typeof m.reason === 'string' ? m.reason : 'other';
  const p = point(m);
  if (p !== undefined && c.spreads[p[0]] === undefined) c.spreads[p[0]] = p[1];
  state.finished.push(m.conversationId);
  while (state.finished.length > MAX_FINISHED) {
    state.conversations.delete(/** @type {string} */ (state.finished.shift()));
  }
  // Counted for the orchestrators the service named only (any other is never shown).
  if (!state.orchestrators.includes(c.orchestrator)) return;
  const byReason = state.counts.get(c.orchestrator) ?? new Map();
  const reason = REASONS.includes(c.reason) ? c.reason : 'other';
  byReason.set(reason, (byReason.get(reason) ?? 0) + 1);
  state.counts.set(c.orchestrator, byReason);
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
  if (m.type === 'dispatch') onDispatch(m);
  else if (m.type === 'end') onEnd(m);
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
let slotted =
  /** @type {({orchestrator: string, spreads: number[], reason?: string} | undefined)[]} */ ([]);
let chart = /** @type {uPlot | undefined} */ (undefined);
let frame = 0;

function schedule() {
  state.dirty = true;
  if (frame === 0) frame = requestAnimationFrame(render);
}

function lineColor(/** @type {string} */ orchestrator, /** @type {boolean} */ finished) {
  const i = state.orchestrators.indexOf(orchestrator);
  const color = LINE_COLORS[Math.max(i, 0) % LINE_COLORS.length];
  return finished ? `${color}59` : color;
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
      width: 1.5,
      points: { show: false },
      spanGaps: true,
    });
  }
  return new uPlot(
    {
      width: el.clientWidth,
      height: 420,
      legend: { show: false },
      cursor: { show: false },
      scales: {
        x: { time: false },
        y: {
          distr: 3,
          range: (_u, min, max) => {
            const low = Math.min(min ?? state.tolerance, state.tolerance / 10);
            const high = Math.max(max ?? 10, state.tolerance * 100);
            return uPlot.rangeLog(low, high, 10, true);
          },
        },
      },
      axes: [
        { label: 'dispatch', stroke: '#59636e' },
        { label: 'spread (highest − lowest quote)', stroke: '#59636e', size: 70 },
      ],
      series,
      hooks: { drawClear: [drawBand], draw: [drawMarks] },
    },
    [[1], ...Array.from({ length: SLOTS }, () => [null])],
    el,
  );
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

/** A mark at the last point of every finished line, shaped and coloured by how it ended. */
function drawMarks(/** @type {uPlot} */ u) {
  const { ctx } = u;
  const r = 4 * devicePixelRatio;
  ctx.save();
  for (let si = 1; si < slotted.length; si++) {
    const c = slotted[si];
    if (c?.reason === undefined || c.spreads.length === 0) continue;
    const last = c.spreads.length;
    const x = u.valToPos(last, 'x', true);
    const y = u.valToPos(c.spreads[last - 1] ?? FLOOR, 'y', true);
    const reason = REASONS.includes(c.reason) ? c.reason : 'other';
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
  }
  ctx.restore();
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
    if (c.reason === undefined && now - c.seen > STALE_MS) state.conversations.delete(id);
    else if (shown(c.orchestrator)) (c.reason === undefined ? inFlight : done).push(c);
  }
  const visible = [...inFlight, ...done.reverse()].slice(0, SLOTS);
  slotted = [undefined, ...visible];
  let width = 10;
  for (const c of visible) width = Math.max(width, c.spreads.length);
  const x = Array.from({ length: width }, (_, i) => i + 1);
  const data = [x];
  for (let si = 1; si <= SLOTS; si++) {
    const c = slotted[si];
    data.push(Array.from(x, (_, i) => c?.spreads[i] ?? null));
  }
  chart ??= createChart();
  chart.setData(/** @type {uPlot.AlignedData} */ (data));
  renderLines(visible, inFlight.length);
  renderCounts();
}

function renderLines(
  /** @type {{orchestrator: string}[]} */ visible,
  /** @type {number} */ inFlight,
) {
  const el = $('lines');
  const parts = [];
  el.dataset.total = String(visible.length);
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
    count.textContent = `${o} ${n}  `;
    parts.push(key, count);
  });
  el.replaceChildren(
    visible.length === 0
      ? 'no conversations yet'
      : `${visible.length} conversations on screen (${inFlight} in flight, the newest ${MAX_FINISHED} finished, faded): `,
    ...(visible.length === 0 ? [] : parts),
  );
}

function renderCounts() {
  const rows = [];
  const total = new Map();
  const names = state.orchestrators.filter((o) => state.filter === '*' || state.filter === o);
  for (const o of names) {
    const byReason = state.counts.get(o) ?? new Map();
    for (const [r, n] of byReason) total.set(r, (total.get(r) ?? 0) + n);
    rows.push(countRow(o, byReason, ''));
  }
  if (names.length > 1) rows.push(countRow('all', total, 'total'));
  /** @type {HTMLElement} */ ($('counts').querySelector('tbody')).replaceChildren(...rows);
}

function countRow(
  /** @type {string} */ name,
  /** @type {Map<string, number>} */ byReason,
  /** @type {string} */ cls,
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
    td.textContent = String(byReason.get(reason) ?? 0);
    tr.append(td);
  }
  const share = document.createElement('td');
  share.dataset.reason = 'share';
  share.dataset.ended = String(ended);
  const converged = byReason.get('converged') ?? 0;
  share.textContent = ended === 0 ? '–' : `${((100 * converged) / ended).toFixed(1)}%`;
  tr.append(share);
  return tr;
}

filterSelect.addEventListener('change', () => {
  state.filter = filterSelect.value;
  schedule();
});
window.addEventListener('resize', () => {
  chart?.setSize({ width: $('chart').clientWidth, height: 420 });
});
schedule();
connect();
