// @ts-check
// Links to a trace UI, from the template the service's hello names.
import { TRACE_ID, TRACE_PLACEHOLDER } from './constants.js';
import { state } from './state.js';

/** The template with `{traceId}` once, http(s) once filled in; anything else: no links. */
export function traceTemplate(/** @type {unknown} */ value) {
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
export function traceLink(/** @type {string | undefined} */ traceId) {
  if (state.traceUrl === undefined || traceId === undefined || !TRACE_ID.test(traceId)) return;
  return state.traceUrl.replace(TRACE_PLACEHOLDER, traceId);
}

/** A link that opens the trace in a new tab, without telling it where it came from. */
export function traceAnchor(/** @type {string} */ link) {
  const a = document.createElement('a');
  a.href = link;
  a.target = '_blank';
  a.rel = 'noopener noreferrer';
  a.textContent = 'trace';
  return a;
}
