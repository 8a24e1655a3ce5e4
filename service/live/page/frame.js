// @ts-check
// Drawing at most once per animation frame: a burst of updates costs one redraw.
import { state } from './state.js';

let frame = 0;
/** @type {() => void} */
let draw = () => {};

/** What each frame runs (render.js's `render`, set once by app.js). */
export function onFrame(/** @type {() => void} */ render) {
  draw = render;
}

/** Marks the picture changed and asks for a frame, unless one is already asked for. */
export function schedule() {
  state.dirty = true;
  if (frame === 0) {
    frame = requestAnimationFrame(() => {
      frame = 0;
      draw();
    });
  }
}
