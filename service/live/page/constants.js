// @ts-check
// The live page's bounds, sizes and colours: what a message can make the page hold or draw, and
// how the chart looks.

/** Finished conversations kept (the newest); older ones leave the chart. */
export const MAX_FINISHED = 40;
/** Series slots of the chart: conversations in flight, then the newest finished. */
export const SLOTS = 64;
/** Slots kept for finished lines however many are in flight, so endings always show. */
export const FINISHED_SLOTS = 24;
/** Entries of the "recent slow or failed" list. */
export const MAX_RECENT = 8;
/** A converged conversation slower than this is listed as slow, unless the service says. */
export const SLOW_MS = 1_000;
/** Most distinct reasons taken per orchestrator from the service's totals. */
export const MAX_REASONS = 32;
/** Mark radius and the room kept around the plot so that no mark is cut off, CSS pixels. */
export const MARK_RADIUS = 4;
export const PLOT_PADDING = 12;
/** Room inside the plotting area, CSS pixels, so that a mark at its edge lies wholly inside. */
export const MARK_ROOM = MARK_RADIUS + 3;
/** How near the pointer a line must pass to be the one hovered, CSS pixels. */
export const HOVER_PX = 6;
/** Line widths: a conversation in flight stands out from the finished ones, drawn thin. */
export const IN_FLIGHT_WIDTH = 2.5;
export const FINISHED_WIDTH = 1;
export const CHART_HEIGHT = 380;
/** A trace id as W3C trace context writes it (all zeros is invalid). */
export const TRACE_ID = /^(?!0{32})[0-9a-f]{32}$/;
export const TRACE_PLACEHOLDER = '{traceId}';
/** An in-flight conversation not heard of for this long lost its end (a dropped update). */
export const STALE_MS = 30_000;
// Bounds on what a message can make the page hold or draw, whatever the socket says: the page
// must not hang on a hostile or broken service (a dispatch count of 2**30, a million ids).
/** Most points of one line (a larger maxDispatches from the service is taken as this). */
export const MAX_POINTS = 10_000;
/** Most conversations in flight kept; past it the oldest is forgotten. */
export const MAX_IN_FLIGHT = 1_000;
/** Most orchestrators taken from the hello message, and the longest name or id kept. */
export const MAX_ORCHESTRATORS = 32;
export const MAX_NAME = 200;
/** Most resumed conversations remembered, and most waiting conversations listed. */
export const MAX_RESUMED = 100_000;
export const MAX_WAITING = 100;
/** The endings the page has a column and a mark for; any other reason is shown as `other`. */
export const REASONS = ['converged', 'max_dispatches', 'timeout', 'error', 'aborted'];
export const MARK_COLORS = {
  converged: '#1a7f37',
  max_dispatches: '#9a6700',
  timeout: '#8250df',
  error: '#cf222e',
  aborted: '#59636e',
  other: '#1f2328',
};
/** Line colours by orchestrator (in the order the service lists them). */
export const LINE_COLORS = ['#0969da', '#bf3989', '#0a7c86', '#953800'];
/** Spreads are drawn on a log scale; a spread of 0 sits at this floor. */
export const FLOOR = 1e-6;
