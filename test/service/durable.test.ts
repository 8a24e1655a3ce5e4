/**
 * The demo service loses nothing: `kill -9` with conversations in flight and a restart on the
 * same --data resumes them (once) and the endings totals go on from the store; SIGHUP shuts down
 * gracefully; a person approves or rejects waiting conversations through the endpoint, and every
 * bad request to it is refused clearly.
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterEach, describe, expect, it } from 'vitest';
import { createRotatingFileSink } from '../../src/replay/index.ts';
import { createRedisStore } from '../../src/stores/redis/index.ts';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';
import { hasRedisServer, startRedis } from '../helpers/redis.ts';
import {
  liveClient,
  type RunningService,
  spawnService,
  startService,
  stopService,
} from '../helpers/service.ts';

const running: RunningService[] = [];
afterEach(async () => {
  for (const s of running.splice(0)) await stopService(s);
});

async function start(args: string[]): Promise<RunningService> {
  const s = await startService(args);
  running.push(s);
  return s;
}

async function until<T>(what: string, check: () => T | undefined | false, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** The number the service's stdout says, as `pattern`'s first group, once it has said it. */
async function countSaid(service: RunningService, what: string, pattern: RegExp): Promise<number> {
  return Number((await until(what, () => pattern.exec(service.stdout()) ?? undefined))[1]);
}

/** What the service says once recover() has settled, with how many it resumed. */
const RESUMED_LINE = /resumed (\d+) conversations from the store/;

type Totals = Record<string, Record<string, number>>;
const sum = (t: Totals) =>
  Object.values(t).reduce((n, by) => n + Object.values(by).reduce((a, b) => a + b, 0), 0);

/** Raw POST to the resume endpoint, with whatever headers and body a test gives. */
function post(
  port: number,
  path: string,
  body: string,
  headers: Record<string, string> = { 'content-type': 'application/json' },
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', headers }, (res) => {
      let text = '';
      res.on('data', (c: Buffer) => {
        text += c.toString();
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

// Slow desks (200 ms a quote) keep conversations in flight when the service is killed.
const SLOW = ['--latency-ms', '200', '--rate', '20', '--concurrency', '8', '--mix', 'converge=1'];

describe('the demo service, killed and started again on the same --data', () => {
  it('resumes every conversation that was in flight, marks them, and counts each ending once', async () => {
    const data = mkdtempSync(join(tmpdir(), 'demo-durable-'));
    const first = await start([...SLOW, '--data', data]);
    const before = liveClient(`ws://127.0.0.1:${first.port}/ws`);
    // Some ended, some in flight.
    await until('endings and conversations in flight', () => {
      const ends = before.messages.filter((m) => m.type === 'end').length;
      const healthy = ends >= 3;
      return healthy || undefined;
    });
    first.child.kill('SIGKILL');
    await first.exited;
    const endedBefore = new Set(
      before.messages.filter((m) => m.type === 'end').map((m) => m.conversationId as string),
    );
    const unendedOnPage = new Set(
      before.messages
        .filter((m) => m.type === 'dispatch' && !endedBefore.has(m.conversationId as string))
        .map((m) => m.conversationId as string),
    );
    // The kill can land between a conversation's last commit and the frame that tells the page
    // of its ending: the store, not the page, says which were in flight. Each one the page saw
    // unended is in the store, ended or not: nothing the page saw is lost.
    const atKill = await storeIds(join(data, 'conversations.db'));
    for (const id of unendedOnPage) expect(atKill.get(id)).toBeDefined();
    const inFlightBefore = new Set([...unendedOnPage].filter((id) => atKill.get(id) !== 'ended'));
    expect(inFlightBefore.size).toBeGreaterThan(0);

    const second = await start([...SLOW, '--data', data]);
    // The store's endings start the totals: at least every ending the first run published.
    // Printed once the store is read, which may come after the listening line.
    const counted = await countSaid(second, 'the store line', /(\d+) ended ones counted from it/);
    expect(counted).toBeGreaterThanOrEqual(endedBefore.size);
    const after = liveClient(`ws://127.0.0.1:${second.port}/ws`);
    const history = await until('history', () => after.messages.find((m) => m.type === 'history'));
    // The totals start from the store's endings, then go on live.
    expect(sum(history.totals as Totals)).toBeGreaterThanOrEqual(counted);
    // Every conversation in flight at the kill resumes here and ends, as the store says.
    const db = join(data, 'conversations.db');
    for (const end = Date.now() + 60_000; ; await sleep(250)) {
      const now = await storeIds(db);
      if ([...inFlightBefore].every((id) => now.get(id) === 'ended')) break;
      if (Date.now() > end) throw new Error('timed out waiting for the store to end every one');
    }
    // The page heard each ending, marked as resumed, except those that ended before it connected,
    // which the history message counted.
    const resumedEnds = await until('the page to hear every resumed ending', () => {
      const ended = after.messages.filter(
        (m) => m.type === 'end' && inFlightBefore.has(m.conversationId as string),
      );
      return ended.length + (history.resumedEnded as number) >= inFlightBefore.size
        ? ended
        : undefined;
    });
    // Some may not have dispatched yet when the page watched: at least those it saw resume.
    // Said once recover() has settled, which may come after the page got the endings.
    const resumedCount = await countSaid(second, 'the resumed line', RESUMED_LINE);
    expect(resumedCount).toBeGreaterThanOrEqual(inFlightBefore.size);
    for (const m of resumedEnds) expect(m.resumed).toBe(true);
    // Their dispatches are marked too, inside the coalesced updates frames.
    const resumedDispatches = after.messages.filter(
      (m) => m.type === 'dispatch' && inFlightBefore.has(m.conversationId as string),
    );
    expect(resumedDispatches.length).toBeGreaterThan(0);
    for (const m of resumedDispatches) expect(m.resumed).toBe(true);
    // No conversation ended twice, across both runs.
    const allEnds = [
      ...before.messages.filter((m) => m.type === 'end'),
      ...after.messages.filter((m) => m.type === 'end'),
    ].map((m) => m.conversationId as string);
    expect(new Set(allEnds).size).toBe(allEnds.length);
    before.ws.terminate();
    after.ws.terminate();
  }, 180_000);
});

describe('SIGHUP', () => {
  it('shuts down like SIGTERM: exit 0, recording flushed, conversations left to resume', async () => {
    const data = mkdtempSync(join(tmpdir(), 'demo-hup-'));
    const record = join(data, 'recordings');
    const s = await start([...SLOW, '--data', data, '--record', record]);
    const live = liveClient(`ws://127.0.0.1:${s.port}/ws`);
    await until('an ending', () => live.messages.some((m) => m.type === 'end') || undefined);
    s.child.kill('SIGHUP');
    expect(await s.exited).toBe(0);
    expect(s.stdout()).toMatch(
      /SIGHUP: aborted \d+ in-flight conversations, tracing off, recorded (\d+) conversations into/,
    );
    const recorded = Number(/recorded (\d+) conversations/.exec(s.stdout())?.[1]);
    const lines = readdirSync(record).flatMap((f) =>
      readFileSync(join(record, f), 'utf8')
        .split('\n')
        .filter((l) => l !== ''),
    );
    // Every line whole (no partial last line) and every conversation the recorder wrote.
    for (const line of lines) expect(() => JSON.parse(line)).not.toThrow();
    expect(lines.length).toBe(recorded);
    expect(s.stdout()).toMatch(/left in the store: \d+ in flight \(resumed at the next start\)/);
  }, 120_000);
});

/** Every conversation id of a store, by status. */
async function storeIds(path: string): Promise<Map<string, string>> {
  const store = createSqliteStore({ path });
  const ids = new Map<string, string>();
  try {
    for (const status of ['ended', 'running', 'suspended'] as const) {
      let after: string | undefined;
      for (;;) {
        const page = await store.list({ status, limit: 1000, ...(after ? { after } : {}) });
        for (const row of page) ids.set(row.conversationId, row.status);
        if (page.length < 1000) break;
        after = page.at(-1)?.conversationId;
      }
    }
  } finally {
    await store.close();
  }
  return ids;
}

/** The conversation ids of every line in a recordings directory, each line parsed whole. */
function recordedIds(dir: string): string[] {
  return readdirSync(dir).flatMap((f) =>
    readFileSync(join(dir, f), 'utf8')
      .split('\n')
      .filter((l) => l !== '')
      .map((l) => (JSON.parse(l) as { conversationId: string }).conversationId),
  );
}

const ids = (messages: { type: string; [key: string]: unknown }[], type: string) =>
  new Set(messages.filter((m) => m.type === type).map((m) => m.conversationId as string));

// Markets whose trader leaves (ended by cancel()), that fail, that wait for a person, and that
// converge, at a pace that keeps a dozen in flight; each ends within the desks' 3 s timeout.
const MIXED = [
  '--mix',
  'converge=4,abort=3,fail=1,approval=1,never=1',
  '--latency-ms',
  '20',
  '--rate',
  '30',
  '--concurrency',
  '16',
];

describe('SIGHUP mid-load', () => {
  it('records every conversation that ended, and leaves every one in flight to the next start, which resumes it', async () => {
    const data = mkdtempSync(join(tmpdir(), 'demo-hup-load-'));
    const record = join(data, 'recordings');
    const db = join(data, 'conversations.db');
    const first = await start([...MIXED, '--data', data, '--record', record]);
    const live = liveClient(`ws://127.0.0.1:${first.port}/ws`);
    await until('endings by cancel()', () => {
      const ended = live.messages.filter((m) => m.type === 'end');
      return (ended.length >= 40 && ended.some((m) => m.reason === 'aborted')) || undefined;
    });
    first.child.kill('SIGHUP');
    expect(await first.exited).toBe(0);
    expect(first.stdout()).toMatch(/SIGHUP: aborted \d+ in-flight conversations/);
    const atHup = await storeIds(db);
    const recorded = recordedIds(record);
    // Each ended conversation recorded once, and only ended ones: the store says which ended.
    expect(new Set(recorded).size).toBe(recorded.length);
    const endedInStore = [...atHup].filter(([, s]) => s === 'ended').map(([id]) => id);
    expect(endedInStore.length).toBeGreaterThanOrEqual(40);
    expect(new Set(recorded)).toEqual(new Set(endedInStore));
    // The page saw them end, and those it saw in flight at the signal are ended or left running.
    const seenEnded = ids(live.messages, 'end');
    const inFlight = [...ids(live.messages, 'dispatch')].filter((id) => !seenEnded.has(id));
    expect(inFlight.length).toBeGreaterThan(0);
    for (const id of seenEnded) expect(recorded).toContain(id);
    const left = [...atHup].filter(([, s]) => s === 'running').map(([id]) => id);
    for (const id of inFlight) expect(['ended', 'suspended', 'running']).toContain(atHup.get(id));
    live.ws.terminate();

    // The next start resumes every one left running, and they end there, marked resumed.
    const second = await start(['--rate', '0.01', '--data', data, '--mix', 'converge=1']);
    const after = liveClient(`ws://127.0.0.1:${second.port}/ws`);
    const resumed = await countSaid(second, 'recover() to settle', RESUMED_LINE);
    expect(resumed).toBe(left.length);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
    const later = await storeIds(db);
    for (const id of left) expect(later.get(id)).toBe('ended');
    after.ws.terminate();
  }, 120_000);
});

describe('kill -9 at random points, then a restart', () => {
  it("counts each ending once: the totals start from the store, and every ending published is the store's", async () => {
    const data = mkdtempSync(join(tmpdir(), 'demo-kill-totals-'));
    const db = join(data, 'conversations.db');
    const publishedIn = new Map<string, number>();
    let storedEnded = 0;
    for (let run = 0; run < 4; run++) {
      const s = await start([...MIXED, '--data', data]);
      // The start's count is the store's ended conversations as the last kill left them.
      const counted = Number(/(\d+) ended ones counted from it/.exec(s.stdout())?.[1]);
      expect(counted).toBe(storedEnded);
      const live = liveClient(`ws://127.0.0.1:${s.port}/ws`);
      await until('the history', () => live.messages.find((m) => m.type === 'history'));
      await sleep(1000 + Math.random() * 3000);
      s.child.kill('SIGKILL');
      await s.exited;
      live.ws.terminate();
      const stored = await storeIds(db);
      const ended = new Set([...stored].filter(([, st]) => st === 'ended').map(([id]) => id));
      // Every ending the page was told of is the store's, and none was told in two runs.
      for (const id of ids(live.messages, 'end')) {
        expect(ended.has(id)).toBe(true);
        expect(publishedIn.get(id)).toBeUndefined();
        publishedIn.set(id, run);
      }
      expect(ended.size).toBeGreaterThanOrEqual(storedEnded);
      storedEnded = ended.size;
    }
    // Started once more and left to settle: its totals are the store's ended conversations.
    const last = await start(['--rate', '0.01', '--data', data, '--mix', 'converge=1']);
    await until(
      'recover() to settle',
      () => /resumed \d+ conversations from the store/.test(last.stdout()) || undefined,
    );
    // The one conversation the pace starts at once ends within the desks' 3 s timeout.
    await sleep(3500);
    const live = liveClient(`ws://127.0.0.1:${last.port}/ws`);
    const history = await until('the history', () =>
      live.messages.find((m) => m.type === 'history'),
    );
    const stored = await storeIds(db);
    const ended = [...stored].filter(([, st]) => st === 'ended').length;
    expect(sum(history.totals as Totals)).toBe(ended);
    live.ws.terminate();
  }, 120_000);
});

describe('the recording of a run restarted within the same second', () => {
  it('goes into a new file, never appended to the crashed one, and each file is listed once', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'rec-'));
    const one = createRotatingFileSink({ dir });
    await one.write('{"a":1}\n');
    await one.write('{"partial":'); // a crash mid-line
    const two = createRotatingFileSink({ dir });
    await two.write('{"b":2}\n');
    await two.close();
    await one.close();
    const files = readdirSync(dir).sort();
    expect(files).toHaveLength(2);
    expect(two.files()).toEqual(
      files.map((f) => join(dir, f)).sort((a, b) => (a.slice(-13) < b.slice(-13) ? -1 : 1)),
    );
    expect(new Set(two.files()).size).toBe(two.files().length);
    const contents = files.map((f) => readFileSync(join(dir, f), 'utf8'));
    expect(contents).toContain('{"a":1}\n{"partial":');
    expect(contents).toContain('{"b":2}\n');
  });
});

describe('a conversation whose trader left', () => {
  it('is cancelled: stored as ended (aborted, the trader left), which recover() leaves, and counted once as aborted', async () => {
    const data = mkdtempSync(join(tmpdir(), 'demo-abandoned-'));
    const s = await start([
      '--data',
      data,
      '--mix',
      'abort=1',
      '--rate',
      '20',
      '--latency-ms',
      '50',
    ]);
    const live = liveClient(`ws://127.0.0.1:${s.port}/ws`);
    const ids = await until('three abandoned conversations to end', () => {
      const ended = live.messages
        .filter((m) => m.type === 'end' && m.reason === 'aborted')
        .map((m) => m.conversationId as string);
      return ended.length >= 3 ? ended : undefined;
    });
    // One end frame per conversation: the abort that handed it back is not one.
    expect(new Set(ids).size).toBe(ids.length);
    // The telemetry counts them as endings (an abort alone hands a durable conversation back).
    const metrics = await (await fetch(`http://127.0.0.1:${s.port}/metrics`)).text();
    const counted = [
      ...metrics.matchAll(
        /^orchestrator_conversations_ended_total\{[^}]*reason="aborted"[^}]*\} (\d+)$/gm,
      ),
    ].reduce((n, m) => n + Number(m[1]), 0);
    expect(counted).toBeGreaterThanOrEqual(ids.length);
    // A cancel is counted as that ending, not as a resume.
    expect(metrics).not.toMatch(/cause="cancel"/);
    s.child.kill('SIGTERM');
    expect(await s.exited).toBe(0);
    const store = createSqliteStore({ path: join(data, 'conversations.db') });
    try {
      for (const id of ids) {
        const got = await store.get(id);
        expect(got?.status).toBe('ended');
        expect((got?.result as { error?: unknown } | undefined)?.error).toMatchObject({
          name: 'ConversationAbortedError',
          reason: 'aborted',
          cause: 'the trader left',
        });
      }
    } finally {
      await store.close();
    }
  }, 120_000);
});

describe('POST /conversations/:id/resume', () => {
  it('approves and rejects waiting conversations, and refuses every bad request clearly', async () => {
    const data = mkdtempSync(join(tmpdir(), 'demo-approve-'));
    const s = await start(['--data', data, '--mix', 'approval=1', '--rate', '20']);
    const live = liveClient(`ws://127.0.0.1:${s.port}/ws`);
    const waiting = await until('two waiting conversations', () => {
      const ids = live.messages
        .filter((m) => m.type === 'approval')
        .map((m) => m.conversationId as string);
      return ids.length >= 3 ? ids : undefined;
    });
    const [a, b, c] = waiting as [string, string, string];
    const path = (id: string) => `/conversations/${id}/resume`;
    expect(await post(s.port, path(a), '{"decision":"approve"}')).toEqual({
      status: 202,
      body: `{"conversationId":"${a}","decision":"approve"}\n`,
    });
    expect((await post(s.port, path(a), '{"decision":"approve"}')).status).toBe(409);
    expect((await post(s.port, path(b), '{"decision":"reject"}')).status).toBe(202);
    const ends = await until('both to end', () => {
      const e = live.messages.filter(
        (m) => m.type === 'end' && (m.conversationId === a || m.conversationId === b),
      );
      return e.length === 2 ? e : undefined;
    });
    expect(ends.find((m) => m.conversationId === a)?.reason).toBe('converged');
    expect(ends.find((m) => m.conversationId === b)?.reason).toBe('rejected');
    // An ended one is not waiting: 409.
    expect((await post(s.port, path(a), '{"decision":"reject"}')).status).toBe(409);
    // Bad requests, each with its status and what was expected.
    const bad = await post(s.port, path(c), '{"decision":');
    expect(bad.status).toBe(400);
    expect(bad.body).toContain('got invalid JSON');
    expect(await post(s.port, path(c), '{"decision":"maybe"}')).toEqual({
      status: 400,
      body: `${JSON.stringify({ error: 'Expected {"decision": "approve" | "reject"}, got {"decision":"maybe"}' })}\n`,
    });
    expect((await post(s.port, path(c), '["approve"]')).status).toBe(400);
    expect(
      (await post(s.port, path(c), JSON.stringify({ decision: 'approve', pad: 'x'.repeat(2000) })))
        .status,
    ).toBe(413);
    expect(
      (await post(s.port, path(c), '{"decision":"approve"}', { 'content-type': 'text/plain' }))
        .status,
    ).toBe(415);
    expect(
      (
        await post(s.port, path(c), '{"decision":"approve"}', {
          'content-type': 'application/json',
          host: 'evil.example',
        })
      ).status,
    ).toBe(421);
    expect(
      (
        await post(s.port, path(c), '{"decision":"approve"}', {
          'content-type': 'application/json',
          origin: 'http://evil.example',
        })
      ).status,
    ).toBe(403);
    expect(
      (await post(s.port, path('no-such-conversation'), '{"decision":"approve"}')).status,
    ).toBe(404);
    // c is still waiting after all of those.
    expect((await post(s.port, path(c), '{"decision":"approve"}')).status).toBe(202);
    live.ws.terminate();
  }, 120_000);

  it('keeps waiting conversations across a restart and rejects those past --approval-timeout-s', async () => {
    const data = mkdtempSync(join(tmpdir(), 'demo-wait-'));
    const first = await start(['--data', data, '--mix', 'approval=1', '--rate', '20']);
    const live = liveClient(`ws://127.0.0.1:${first.port}/ws`);
    await until(
      'a waiting conversation',
      () => live.messages.some((m) => m.type === 'approval') || undefined,
    );
    live.ws.terminate();
    first.child.kill('SIGKILL');
    await first.exited;
    const waitingBefore = live.messages
      .filter((m) => m.type === 'approval')
      .map((m) => m.conversationId as string);
    // Started again: the list comes from the store.
    const second = await start(['--data', data, '--mix', 'converge=1', '--rate', '1']);
    const again = liveClient(`ws://127.0.0.1:${second.port}/ws`);
    const list = await until('the approvals list', () =>
      again.messages.find((m) => m.type === 'approvals'),
    );
    const ids = (list.waiting as { conversationId: string }[]).map((w) => w.conversationId);
    for (const id of waitingBefore) expect(ids).toContain(id);
    again.ws.terminate();
    second.child.kill('SIGKILL');
    await second.exited;
    // Started with a timeout they have all waited past: each is rejected, stored as ended.
    const third = await start([
      '--data',
      data,
      '--mix',
      'converge=1',
      '--rate',
      '1',
      '--approval-timeout-s',
      '0.1',
    ]);
    const store = createSqliteStore({ path: join(data, 'conversations.db') });
    try {
      for (const id of ids) {
        let reason = 'still waiting';
        for (let i = 0; i < 600 && reason === 'still waiting'; i++) {
          const got = await store.get(id);
          if (got?.status === 'ended') {
            reason = (got.result as { decision: { reason: string } }).decision.reason;
          } else await sleep(100);
        }
        expect(reason).toBe('rejected');
      }
    } finally {
      await store.close();
    }
    await stopService(third);
  }, 120_000);
});

describe.skipIf(!hasRedisServer())(
  'the demo service starting on a store with many ended conversations',
  () => {
    it('answers /healthz with 200 from the moment it listens, never 500 while it reads the store', async () => {
      const redis = await startRedis();
      // 6,000 endings of earlier runs in a network store: reading them takes many round trips.
      const store = createRedisStore({ url: redis.url });
      const result = JSON.stringify({ decision: { terminate: true, reason: 'converged' } });
      for (let batch = 0; batch < 60; batch++) {
        await Promise.all(
          Array.from({ length: 100 }, (_, i) =>
            store.create(
              {
                conversationId: `old-${batch}-${i}`,
                orchestrator: i % 2 === 0 ? 'fx_desks' : 'rates_desks',
                status: 'ended',
                seq: 1,
                dispatchCount: 20,
                state: '{}',
                result,
              },
              'earlier-run',
              1000,
            ),
          ),
        );
      }
      await store.close();
      const port = await new Promise<number>((resolve) => {
        const probe = createServer().listen(0, '127.0.0.1', () => {
          const { port } = probe.address() as { port: number };
          probe.close(() => resolve(port));
        });
      });
      const service = spawnService(['--store', redis.url, '--port', String(port), '--rate', '1']);
      try {
        // Asked from the moment the process starts: refused until it listens, then answered.
        const statuses: (number | 'refused')[] = [];
        let listening = false;
        while (!listening && service.child.exitCode === null) {
          listening = /listening on/.test(service.stdout());
          try {
            statuses.push((await fetch(`http://127.0.0.1:${port}/healthz`)).status);
          } catch {
            statuses.push('refused');
          }
          await sleep(5);
        }
        expect(service.stdout()).toContain('; 6000 ended ones counted from it');
        const answered = statuses.filter((s) => s !== 'refused');
        expect(answered.length).toBeGreaterThan(0);
        expect(new Set(answered)).toEqual(new Set([200]));
        expect(statuses.at(-1)).toBe(200);
      } finally {
        service.child.kill('SIGKILL');
        await service.exited;
        await redis.stop();
      }
    }, 120_000);
  },
);
