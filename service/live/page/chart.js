// @ts-check
// The chart: one uPlot line per conversation over the tolerance band, a mark where each ended,
// and the pointer's reading of it (the line or mark under it, held still while it is on it).
import uPlot from '/vendor/uPlot.esm.js';
import {
  CHART_HEIGHT,
  FINISHED_WIDTH,
  FLOOR,
  HOVER_PX,
  IN_FLIGHT_WIDTH,
  LINE_COLORS,
  MARK_COLORS,
  MARK_RADIUS,
  MARK_ROOM,
  PLOT_PADDING,
  SLOTS,
} from './constants.js';
import { $ } from './dom.js';
import { markOf } from './format.js';
import { schedule } from './frame.js';
import { pointer, renderHovered } from './hovered.js';
import { idOf, state } from './state.js';
import { traceLink } from './traces.js';

/** @typedef {import('./state.js').Conversation} Conversation */
/**
 * An end mark as drawn, in CSS pixels of the plotting area.
 * @typedef {{x: number, y: number, reason: string, id: string, traceId?: string, c: Conversation}} Mark
 */

/** The conversation drawn in each series slot (index 0 is uPlot's x series). */
let slotted = /** @type {(Conversation | undefined)[]} */ ([]);
let chart = /** @type {uPlot | undefined} */ (undefined);
/**
 * The end marks as drawn in the last frame, in CSS pixels of the plotting area (uPlot's `over`
 * element): for clicks, and for the tests on `#chart[data-marks]`.
 * @type {Mark[]}
 */
let marks = [];

/** A line's colour: its orchestrator's, faded once it finished. */
export function lineColor(/** @type {string} */ orchestrator, /** @type {boolean} */ finished) {
  const i = state.orchestrators.indexOf(orchestrator);
  // The index is within the list: a remainder of its length.
  const color = /** @type {string} */ (LINE_COLORS[Math.max(i, 0) % LINE_COLORS.length]);
  return finished ? `${color}4d` : color;
}

/**
 * The plotting area's size in CSS pixels (before the first layout: what it will about be).
 * @returns {[number, number]}
 */
function plotSize(/** @type {uPlot} */ u) {
  if (u.bbox !== undefined && u.bbox.width > 0)
    return [u.bbox.width / devicePixelRatio, u.bbox.height / devicePixelRatio];
  return [
    $('chart').clientWidth - 70 - PLOT_PADDING - MARK_RADIUS,
    CHART_HEIGHT - 50 - PLOT_PADDING,
  ];
}

/**
 * [low, high] widened by MARK_ROOM pixels each side of a `pixels`-long axis (in `scale` units).
 * @returns {[number, number]}
 */
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
  /** @type {uPlot.Series[]} */
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
            widened(min ?? 1, Math.max(max ?? 10, (min ?? 1) + 1), plotSize(u)[0]),
        },
        y: {
          distr: 3,
          // Likewise on the log scale: the lowest and the highest spread, MARK_ROOM inside.
          range: (u, min, max) => {
            const low = Math.min(min ?? state.tolerance, state.tolerance / 10);
            const high = Math.max(max ?? 10, state.tolerance * 100);
            const [a, b] = widened(Math.log10(low), Math.log10(high), plotSize(u)[1]);
            return [10 ** a, 10 ** b];
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
    pointer.pinned = c !== undefined;
    if (c !== undefined) pointer.hovered = c;
    renderHovered();
  });
  u.over.addEventListener('mousemove', (event) => {
    const mark = markAt(event.offsetX, event.offsetY);
    u.over.style.cursor = traceLink(mark?.traceId) === undefined ? '' : 'pointer';
    if (pointer.pinned) return;
    const c = mark?.c ?? lineAt(event.offsetX, event.offsetY);
    if (c !== undefined && c !== pointer.hovered) {
      pointer.hovered = c;
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

/** Whether the chart holds still (the pointer is on it): it and its caption are not redrawn. */
export function chartHeld() {
  return state.held && chart !== undefined;
}

/** The chart follows the width of its element. */
export function resizeChart() {
  chart?.setSize({ width: $('chart').clientWidth, height: CHART_HEIGHT });
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

/**
 * A mark at the last point of every finished line, shaped and coloured by how it ended; a ring
 * at the newest point of every line in flight (where it is now).
 */
function drawMarks(/** @type {uPlot} */ u) {
  const { ctx } = u;
  const r = MARK_RADIUS * devicePixelRatio;
  /** @type {Mark[]} */
  const drawn = [];
  /** @type {[number, number, string | undefined][]} */
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
    const reason = markOf(c.reason);
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

/**
 * Draws these lines (finished first, so that those in flight lie on top), creating the chart on
 * the first frame.
 */
export function drawLines(/** @type {Conversation[]} */ visible) {
  slotted = [undefined, ...visible];
  let width = 10;
  for (const c of visible) width = Math.max(width, c.spreads.length);
  const x = Array.from({ length: width }, (_, i) => i + 1);
  /** @type {(number | null)[][]} */
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
}
