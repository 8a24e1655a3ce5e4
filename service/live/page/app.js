// @ts-check
// The live convergence page: reads /ws (it never sends), keeps a bounded picture of the
// conversations, and draws it at most once per animation frame, so a burst of thousands of
// updates per second costs one cheap state update each and one redraw per frame.
//
// The modules beside this one, by concern: connection.js (the socket and its backoff),
// updates.js (each message into the state), state.js (what the page knows), frame.js and
// render.js (the frame and what it draws), chart.js (the chart and the pointer on it),
// hovered.js, captions.js, counts.js, recent.js and approvals.js (the panels), format.js and
// traces.js (text and links), constants.js (bounds, sizes, colours), dom.js (the elements).
import { renderWaiting } from './approvals.js';
import { resizeChart } from './chart.js';
import { connect } from './connection.js';
import { filterSelect } from './dom.js';
import { onFrame, schedule } from './frame.js';
import { holdRecentWhileRead } from './recent.js';
import { render } from './render.js';
import { state } from './state.js';

onFrame(render);
holdRecentWhileRead();
filterSelect.addEventListener('change', () => {
  state.filter = filterSelect.value;
  state.version++;
  schedule();
});
window.addEventListener('resize', resizeChart);
schedule();
connect();
setInterval(renderWaiting, 1000);
