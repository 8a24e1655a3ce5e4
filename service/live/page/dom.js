// @ts-check
// The page's elements, by id (index.html has each one).

/** The element with this id. */
export const $ = (/** @type {string} */ id) =>
  /** @type {HTMLElement} */ (document.getElementById(id));
export const filterSelect = /** @type {HTMLSelectElement} */ ($('filter'));
