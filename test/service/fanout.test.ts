/**
 * The live feed leaves the dispatch path (issue 32): through the running service, many clients
 * watching, one of them never reading. The others keep receiving, the slow one is skipped
 * (counted) and then disconnected, and a client gets one frame per interval however many
 * dispatches there are. Speed itself is bench/fanout.ts's row, not a test.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { FRAME_INTERVAL_MS, SLOW_CLIENT_CUTOFF_MS } from '../../service/live/live.ts';
import { type RawConnection, rawWebSocket } from '../helpers/raw-client.ts';
import {
  type RunningService,
  sampleValue,
  scrape,
  startService,
  stopService,
  sumSamples,
} from '../helpers/service.ts';

const CLIENTS = 300;

/** A client that counts what it gets without parsing it (300 of them share this process). */
interface Watcher {
  readonly ws: WebSocket;
  frames: number;
  closed: boolean;
}

function watch(port: number): Promise<Watcher> {
  const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`);
  const w: Watcher = { ws, frames: 0, closed: false };
  ws.on('message', () => {
    w.frames++;
  });
  ws.on('close', () => {
    w.closed = true;
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(w));
    ws.once('error', reject);
  });
}

let s: RunningService;
let watchers: Watcher[] = [];
let slow: RawConnection;

beforeAll(async () => {
  // Many conversations at once, with fast desks: thousands of dispatches a second, and frames
  // large enough that a client that never reads falls behind within seconds. Pings far apart,
  // so the slow client is cut for its slowness, not for a missed pong.
  s = await startService([
    ...['--rate', '300', '--concurrency', '96', '--latency-ms', '1'],
    ...['--max-clients', String(CLIENTS), '--max-clients-per-address', String(CLIENTS)],
    ...['--ws-ping-s', '120'],
  ]);
  slow = await rawWebSocket(s.port, '/ws');
  slow.socket.pause();
  for (let i = 0; i < CLIENTS - 1; i += 50) {
    watchers.push(
      ...(await Promise.all(
        Array.from({ length: Math.min(50, CLIENTS - 1 - i) }, () => watch(s.port)),
      )),
    );
  }
}, 60_000);

afterAll(async () => {
  for (const w of watchers) w.ws.terminate();
  watchers = [];
  slow?.socket.destroy();
  await stopService(s);
});

describe('the live feed with many clients, one never reading', () => {
  it('skips the slow client and counts its updates as dropped, then disconnects it, while the others keep receiving', async () => {
    const text = await scrape(s);
    expect(sampleValue(text, 'demo_websocket_clients')).toBe(CLIENTS);
    // Skipped first (counted on /metrics, said on stderr), then cut once slow for the cutoff.
    await vi.waitFor(
      async () =>
        expect(
          sumSamples(await scrape(s), 'demo_websocket_refused_total', { reason: 'slow_reader' }),
        ).toBe(1),
      { timeout: 90_000, interval: 500 },
    );
    const after = await scrape(s);
    expect(sampleValue(after, 'demo_websocket_clients')).toBe(CLIENTS - 1);
    const dropped = sampleValue(after, 'demo_live_updates_dropped_total') as number;
    expect(dropped).toBeGreaterThan(0);
    // Only the slow one was ever skipped: no one else was refused or cut off.
    expect(sumSamples(after, 'demo_websocket_refused_total')).toBe(1);
    await vi.waitFor(
      () =>
        expect(s.stderr()).toMatch(
          new RegExp(
            `^live updates dropped: \\d+ updates in \\d+ frames not sent to clients too slow to read them since the last report; 1 disconnected, slow for ${SLOW_CLIENT_CUTOFF_MS / 1000} s$`,
            'm',
          ),
        ),
      { timeout: 15_000 },
    );
    // Every other client is still connected and keeps getting frames.
    expect(watchers.filter((w) => w.closed)).toEqual([]);
    const seen = watchers.map((w) => w.frames);
    await vi.waitFor(
      () => expect(watchers.filter((w, i) => w.frames <= (seen[i] as number) + 2)).toEqual([]),
      { timeout: 30_000 },
    );
    // Nothing more is dropped for anyone once the slow client is gone.
    expect(sampleValue(await scrape(s), 'demo_live_updates_dropped_total')).toBe(dropped);
  });

  it('sends a client at most one frame per interval, however many dispatches happen meanwhile', async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${s.port}/ws`);
    const frames: { type: string; dispatches?: { spreads: number[] }[] }[] = [];
    ws.on('message', (data) => frames.push(JSON.parse(String(data))));
    try {
      // The hello, then the history with the first frame after connecting.
      await vi.waitFor(() => expect(frames.length).toBeGreaterThanOrEqual(2), { timeout: 15_000 });
      const dispatchesBefore = sumSamples(await scrape(s), 'orchestrator_dispatches_total');
      const from = frames.length;
      const start = performance.now();
      await new Promise((r) => setTimeout(r, 3_000));
      // The person-in-the-loop notices go at once (rare); the frames are what the timer sends.
      const notices = new Set(['approval', 'approvals', 'decided']);
      const all = frames.slice(from);
      const updates = all.filter((f) => !notices.has(f.type));
      const elapsed = performance.now() - start;
      const dispatches =
        sumSamples(await scrape(s), 'orchestrator_dispatches_total') - dispatchesBefore;
      expect(frames.slice(0, 2).map((f) => f.type)).toEqual(['hello', 'history']);
      expect(new Set(updates.map((f) => f.type))).toEqual(new Set(['updates']));
      // The timer never fires twice within an interval: the count is bounded by the clock,
      // not by the dispatches (thousands in the same time).
      expect(updates.length).toBeLessThanOrEqual(Math.floor(elapsed / FRAME_INTERVAL_MS) + 1);
      expect(dispatches).toBeGreaterThan(10 * updates.length);
      // Each frame carries many dispatches, coalesced.
      const carried = updates.reduce(
        (n, f) => n + (f.dispatches ?? []).reduce((m, d) => m + d.spreads.length, 0),
        0,
      );
      expect(carried).toBeGreaterThan(5 * updates.length);
    } finally {
      ws.terminate();
    }
  });
});
