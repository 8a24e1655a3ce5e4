// @ts-check
// Numbers and endings as a person reads them.
import { FLOOR, REASONS } from './constants.js';

/** 12,345 → "12.3k", as a person reads a token count. */
export function tokenText(/** @type {number} */ n) {
  if (n < 1000) return `${n}`;
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}

/** How a conversation ended, as a person says it. */
export const endingText = (/** @type {string} */ reason) => reason.replaceAll('_', ' ');

/** 0.0123 → "0.0123", 12.34 → "12.3": a spread to three significant digits. */
export const spreadText = (/** @type {number} */ v) =>
  v <= FLOOR ? '0' : String(Number(v.toPrecision(3)));

/** "1 dispatch", "2 dispatches", "3 lines". */
export const plural = (/** @type {number} */ n, /** @type {string} */ word) =>
  `${n} ${word}${n === 1 ? '' : word.endsWith('h') ? 'es' : 's'}`;

/** The column and mark of an ending: its reason when the page has one for it, else `other`. */
export const markOf = (/** @type {string} */ reason) =>
  REASONS.includes(reason) ? reason : 'other';
