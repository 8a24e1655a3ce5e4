/**
 * One trace per conversation across processes, and metrics exact across workers: real child
 * processes sharing a SQLite file store, exporting OTLP/HTTP to one real receiver, one of them
 * killed with SIGKILL mid-conversation.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSqliteStore } from '../../src/stores/sqlite/index.ts';
import { outputOf } from '../helpers/child-output.ts';
import { attrs, type OtlpSpan, startOtlpReceiver } from '../helpers/otlp-receiver.ts';

const child = join(import.meta.dirname, '../fixtures', 'segments-child.ts');
const dir = mkdtempSync(join(tmpdir(), 'segments-'));
let receiver: Awaited<ReturnType<typeof startOtlpReceiver>>;
beforeAll(async () => {
  receiver = await startOtlpReceiver();
});
afterAll(async () => {
  await receiver.close();
  rmSync(dir, { recursive: true, force: true });
});

/** Runs the child to its end (the receiver answers meanwhile: spawnSync would block it). */
function run(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ status: number | null; signal: string | null; out: string }> {
  return new Promise((resolve) => {
    const proc = spawn(process.execPath, ['--import', 'tsx', child, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, ...env },
    });
    const output = outputOf(proc);
    const timer = setTimeout(() => proc.kill('SIGKILL'), 60_000);
    proc.on('exit', (status, signal) => {
      clearTimeout(timer);
      if (status !== 0 && signal === null) process.stderr.write(output.err);
      resolve({ status, signal, out: output.out });
    });
  });
}

const conversationSpans = (id: string): OtlpSpan[] =>
  receiver.spans.filter(
    (s) =>
      s.name === 'invoke_workflow segments' && attrs(s.attributes)['gen_ai.conversation.id'] === id,
  );
const dispatchCounts = (span: OtlpSpan | undefined): number[] =>
  (span?.events ?? [])
    .filter((e) => e.name === 'conversation.dispatch')
    .map((e) => attrs(e.attributes)['conversation.dispatch.count'] as number);

describe('one trace per conversation, across processes', () => {
  it('a conversation killed with SIGKILL and recovered in a new process is one trace: segment 2 under the original parent, linked to segment 1, cause crash, the lost dispatches counted', async () => {
    const db = join(dir, 'crash.db');
    const killed = await run([db, receiver.url, 'run', 'c1', '5']);
    expect(killed.signal).toBe('SIGKILL');
    const recovered = await run([db, receiver.url, 'recover']);
    expect(recovered.status).toBe(0);
    expect(JSON.parse(recovered.out)).toMatchObject({ resumed: 1, ended: 1 });

    const request = receiver.spans.find((s) => s.name === 'request');
    const [segment2, ...others] = conversationSpans('c1');
    // Segment 1 died with its process: only its responder spans (exported as each ended) remain.
    expect(others).toEqual([]);
    const segment1Children = receiver.spans.filter(
      (s) =>
        s.name.startsWith('invoke_agent ') &&
        s.traceId === request?.traceId &&
        s.parentSpanId !== segment2?.spanId,
    );
    expect(segment1Children.length).toBe(4);
    const segment1SpanId = segment1Children[0]?.parentSpanId;
    expect(segment2?.traceId).toBe(request?.traceId);
    expect(segment2?.parentSpanId).toBe(request?.spanId);
    expect((segment2 as unknown as { links: { spanId: string; traceId: string }[] }).links).toEqual(
      [expect.objectContaining({ traceId: request?.traceId, spanId: segment1SpanId })],
    );
    expect(attrs(segment2?.attributes)).toMatchObject({
      'conversation.segment': 2,
      'conversation.resume.cause': 'crash',
      // Dispatches 1 … 4 were committed; their events died with segment 1's span.
      'conversation.resume.dispatches_lost': 4,
      'conversation.dispatch_count': 8,
      'conversation.end.reason': 'max_dispatches',
      'conversation.dispatch_events.dropped': 0,
    });
    // Numbering goes on: the events of segment 2 are dispatches 5 … 8.
    expect(dispatchCounts(segment2)).toEqual([5, 6, 7, 8]);
  }, 120_000);

  // Issue 43, finding 2: the trace context is in the conversation's first checkpoint (its
  // creation), so a crash before any other commit (in the first responder call, or anywhere in
  // 'exit' mode, which commits only at the end) recovers into the same trace.
  it.each([
    ['sync', 1],
    ['async', 1],
    ['exit', 5],
  ] as const)(
    "a conversation killed before its first dispatch's commit (%s, SIGKILL in call %i) is recovered in its own trace",
    async (durability, killAt) => {
      const db = join(dir, `early-${durability}.db`);
      const requestFile = join(dir, `early-${durability}.json`);
      const id = `early-${durability}`;
      const env = { SEGMENTS_DURABILITY: durability, SEGMENTS_REQUEST_FILE: requestFile };
      const killed = await run([db, receiver.url, 'run', id, String(killAt)], env);
      expect(killed.signal).toBe('SIGKILL');
      const recovered = await run([db, receiver.url, 'recover'], env);
      expect(recovered.status).toBe(0);
      expect(JSON.parse(recovered.out)).toMatchObject({ resumed: 1, ended: 1 });
      const request = JSON.parse(readFileSync(requestFile, 'utf8')) as {
        traceId: string;
        spanId: string;
      };
      const [segment2, ...others] = conversationSpans(id);
      expect(others).toEqual([]);
      expect(segment2?.traceId).toBe(request.traceId);
      expect(segment2?.parentSpanId).toBe(request.spanId);
      expect(attrs(segment2?.attributes)).toMatchObject({
        'conversation.segment': 2,
        'conversation.resume.cause': 'crash',
        'conversation.dispatch_count': 8,
      });
      // Every responder span of the recovered segment is in that trace too.
      const agents = receiver.spans.filter(
        (s) => s.name.startsWith('invoke_agent ') && s.parentSpanId === segment2?.spanId,
      );
      expect(agents.length).toBeGreaterThan(0);
      for (const a of agents) expect(a.traceId).toBe(request.traceId);
    },
    120_000,
  );

  it('a conversation suspended in one process and resumed in another is one trace of two segments, the first ended as suspended', async () => {
    const db = join(dir, 'suspend.db');
    const first = await run([db, receiver.url, 'suspend', 's1']);
    expect(first.status).toBe(0);
    expect(JSON.parse(first.out).suspended).toEqual({
      responder: 'b',
      payload: { question: 'go on?' },
    });
    const second = await run([db, receiver.url, 'resume', 's1']);
    expect(second.status).toBe(0);
    const [segment1, segment2] = conversationSpans('s1').sort(
      (x, y) =>
        (attrs(x.attributes)['conversation.segment'] as number) -
        (attrs(y.attributes)['conversation.segment'] as number),
    );
    expect(segment2?.traceId).toBe(segment1?.traceId);
    expect(segment2?.parentSpanId).toBe(segment1?.parentSpanId);
    expect((segment2 as unknown as { links: { spanId: string }[] }).links[0]?.spanId).toBe(
      segment1?.spanId,
    );
    expect(attrs(segment1?.attributes)).toMatchObject({
      'conversation.segment': 1,
      'conversation.end.reason': 'suspended',
      'conversation.dispatch_count': 4,
    });
    expect(attrs(segment1?.attributes)['conversation.resume.cause']).toBeUndefined();
    expect(attrs(segment2?.attributes)).toMatchObject({
      'conversation.segment': 2,
      'conversation.resume.cause': 'suspend',
      'conversation.end.reason': 'max_dispatches',
      'conversation.dispatch_count': 8,
    });
    expect(attrs(segment2?.attributes)['conversation.resume.dispatches_lost']).toBeUndefined();
    expect(dispatchCounts(segment1)).toEqual([1, 2, 3, 4]);
    expect(dispatchCounts(segment2)).toEqual([5, 6, 7, 8]);
  }, 120_000);
});

/** `name{labels} value` lines of an exposition, summed per metric name and label set. */
function samples(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line.trim() === '') continue;
    const match = /^(\S+?)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (match === null) continue;
    const key = `${match[1]}${match[2] ?? ''}`;
    out.set(key, (out.get(key) ?? 0) + Number(match[3]));
  }
  return out;
}

function sum(maps: Map<string, number>[], name: string): number {
  let total = 0;
  for (const map of maps) {
    for (const [key, value] of map) if (key === name || key.startsWith(`${name}{`)) total += value;
  }
  return total;
}

describe('metrics exact across two worker processes against the store', () => {
  it("sums both workers' metrics (the killed one's last scrape included) to the store's truth", async () => {
    const db = join(dir, 'fleet.db');
    const go = join(dir, 'fleet.go');
    const metricsA = join(dir, 'a.prom');
    const metricsB = join(dir, 'b.prom');
    // A: five conversations of 10 dispatches, killed in its 23rd dispatch (conversation a3);
    // B: five of its own at the same time, then recovers what no live process holds.
    const a = run([db, '-', 'worker', 'a1,a2,a3,a4,a5', '23', metricsA]);
    const b = run([db, '-', 'worker', 'b1,b2,b3,b4,b5', '0', metricsB, go]);
    expect((await a).signal).toBe('SIGKILL');
    writeFileSync(go, '');
    const recovered = await b;
    expect(recovered.status).toBe(0);
    expect(JSON.parse(recovered.out)).toMatchObject({ resumed: 1, ended: 1 });

    const store = createSqliteStore({ path: db });
    const stored = await store.list({ limit: 1000 });
    await store.close();
    const truth = {
      conversations: stored.length,
      ended: stored.filter((c) => c.status === 'ended').length,
      dispatches: stored.reduce((n, c) => n + c.dispatchCount, 0),
    };
    expect(truth).toEqual({ conversations: 8, ended: 8, dispatches: 80 });

    const scrapes = [
      samples(readFileSync(metricsA, 'utf8')),
      samples(readFileSync(metricsB, 'utf8')),
    ];
    expect(sum(scrapes, 'orchestrator_dispatches_total')).toBe(truth.dispatches);
    expect(sum(scrapes, 'orchestrator_conversations_started_total')).toBe(truth.conversations);
    expect(sum(scrapes, 'orchestrator_conversations_ended_total')).toBe(truth.ended);
    expect(sum(scrapes, 'orchestrator_conversation_dispatches_count')).toBe(truth.ended);
    expect(sum(scrapes, 'orchestrator_conversation_dispatches_sum')).toBe(truth.dispatches);
    expect(sum(scrapes, 'orchestrator_conversations_resumed_total')).toBe(1);
    // The call in flight at the kill ran again, once.
    expect(sum(scrapes, 'orchestrator_responder_reinvocations_total')).toBe(1);
    // Nothing runs any more in B; A's last scrape was taken with one conversation running.
    expect(sum([scrapes[1] as Map<string, number>], 'orchestrator_conversations_in_progress')).toBe(
      0,
    );
    expect(sum([scrapes[0] as Map<string, number>], 'orchestrator_conversations_in_progress')).toBe(
      1,
    );
    // Every commit was timed: A's 2 conversations + 2 of a3 … its dispatches and starts.
    expect(sum(scrapes, 'orchestrator_checkpoint_failures_total')).toBe(0);
  }, 180_000);
});
