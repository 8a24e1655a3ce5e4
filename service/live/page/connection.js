// @ts-check
// The connection to /ws, with backoff: the page only reads it (it never sends), and hands each
// message to its handler.
import { addWaiting, onApprovals, removeWaiting } from './approvals.js';
import { $ } from './dom.js';
import { schedule } from './frame.js';
import { state } from './state.js';
import { onDispatch, onEnd, onHello, onHistory, onUpdates } from './updates.js';

/** Reconnections since the last hello, for the backoff. */
let attempt = 0;
let retry = 0;

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

function setConnection(/** @type {string} */ kind, /** @type {string} */ text) {
  const connection = $('connection');
  connection.dataset.state = kind;
  connection.textContent = text;
}

/** Connects to the service's /ws, and again after each close (500 ms, doubling to 10 s). */
export function connect() {
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
