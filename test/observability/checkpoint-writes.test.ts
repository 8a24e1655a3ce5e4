/**
 * The telemetry of checkpoint writes (issue 41): the bytes of each write by kind (whole, entry,
 * snapshot), snapshot durations and failures, on the prom-client registry and the OpenTelemetry
 * path alike, exact against what the store was handed; and a resumed segment's span saying how
 * many entries its resume folded. A transcript conversation (1 KB a dispatch) on the memory and
 * SQLite stores.
 */

import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import {
  type CheckpointEntry,
  type CheckpointOptions,
  type CheckpointWrite,
  ConversationAbortedError,
  type ConversationObserver,
  type ConversationStore,
  createMemoryStore,
  type IncrementalStore,
} from '../../src/index.ts';
import { createConversationTelemetry } from '../../src/observability/index.ts';
import {
  type HistogramValue,
  manualMeter,
  otelSeries,
  promSeries,
  type SeriesValue,
} from '../helpers/otel-metrics.ts';
import { memoryTracing, restoreTracing, spansNamed } from '../helpers/tracing.ts';
import type { Transcript } from '../helpers/transcript.ts';
import { TRANSCRIPT_STORES, transcriptOrchestrator } from '../helpers/transcript-conversation.ts';
import { wrap } from '../helpers/wrapped-store.ts';

afterEach(restoreTracing);

/** What the store was handed: bytes by kind, in order, and snapshots' outcomes. */
function watched(store: ConversationStore, failSnapshots = false) {
  const s = store as IncrementalStore;
  const handed = { whole: [] as number[], entry: [] as number[], snapshot: [] as number[] };
  const acquired: number[] = [];
  const watchedStore = wrap(store, {
    commit: (checkpoint, lease, leaseMs) =>
      s.commit(checkpoint, lease, leaseMs).then((outcome) => {
        if (outcome.ok) handed.whole.push(Buffer.byteLength(checkpoint.state));
        return outcome;
      }),
    append: (entry: CheckpointEntry, lease, leaseMs) =>
      s.append(entry, lease, leaseMs).then((outcome) => {
        if (outcome.ok) handed.entry.push(Buffer.byteLength(entry.entry));
        return outcome;
      }),
    snapshot: (checkpoint, lease) => {
      if (failSnapshots) return Promise.reject(new Error('disk full'));
      return s.snapshot(checkpoint, lease).then((outcome) => {
        if (outcome.ok) handed.snapshot.push(Buffer.byteLength(checkpoint.state));
        return outcome;
      });
    },
    acquire: (...args: Parameters<IncrementalStore['acquire']>) =>
      s.acquire(...args).then((outcome) => {
        if (outcome.status === 'acquired') acquired.push(outcome.entries?.length ?? 0);
        return outcome;
      }),
  });
  return { store: watchedStore, handed, acquired };
}

/** Every write an observer hears (`onCheckpointWrite`), besides the telemetry. */
function listening(): {
  observer: ConversationObserver<Transcript, string>;
  heard: CheckpointWrite[];
} {
  const heard: CheckpointWrite[] = [];
  return {
    heard,
    observer: { startConversation: () => ({ onCheckpointWrite: (w) => heard.push(w) }) },
  };
}

const transcript = (
  store: ConversationStore,
  observers: ConversationObserver<Transcript, string>[],
  dispatches: number,
  checkpoints: CheckpointOptions,
  abortAt?: { at: number; controller: AbortController },
) =>
  transcriptOrchestrator({
    name: 'writes',
    store,
    dispatches,
    checkpoints,
    observers,
    // A promise: an abort lands while a responder's call is open (a clean handoff).
    answersLater: true,
    drainAt: abortAt,
  });

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);
const hist = (all: Map<string, SeriesValue>, key: string) =>
  all.get(key) as HistogramValue | undefined;

describe.each(TRANSCRIPT_STORES)('checkpoint writes on the %s store', (storeName, newStore) => {
  /**
   * A transcript of `dispatches` run as `conversationId`, snapshotted every `every` dispatches,
   * heard by `telemetry` and a listener, on a watched store (whose snapshots fail if `failing`).
   */
  async function written(
    telemetry: ConversationObserver<Transcript, string>,
    dispatches: number,
    every: number,
    conversationId: string,
    failing = false,
  ) {
    const { store, handed } = watched(newStore(), failing);
    const { observer, heard } = listening();
    const result = await transcript(store, [telemetry, observer], dispatches, {
      snapshotEveryDispatches: every,
    }).run({ sender: 'user', content: 'begin' }, { conversationId });
    return { result, handed, heard };
  }

  it('counts the bytes of every write by kind and times every snapshot, on both metric paths, as the store was handed them', async () => {
    const registry = new Registry();
    const meter = manualMeter();
    const telemetry = createConversationTelemetry({
      registry,
      meterProvider: meter.meterProvider,
      genAiMetrics: false,
    });
    const { result, handed, heard } = await written(telemetry, 300, 60, 'w1');
    expect(result.dispatchCount).toBe(300);
    // Snapshots are written beside the loop: let the last one answer.
    await new Promise((r) => setTimeout(r, 50));

    expect(handed.entry.length).toBeGreaterThan(250);
    expect(handed.snapshot.length).toBeGreaterThanOrEqual(3);
    expect(handed.whole.length).toBeGreaterThanOrEqual(2);
    const prom = await promSeries(registry);
    const otel = otelSeries(await meter.collect());
    const labels = (kind: string) => `{kind="${kind}",orchestrator="writes",store="${storeName}"}`;
    for (const kind of ['whole', 'entry', 'snapshot'] as const) {
      const key = `orchestrator.checkpoint.size${labels(kind)}`;
      const registered = hist(prom, key);
      expect(registered, key).toMatchObject({
        count: handed[kind].length,
        sum: sum(handed[kind]),
      });
      // The same series on the OpenTelemetry path, buckets and all.
      expect(hist(otel, key)).toEqual(registered);
      // And what an observer of its own hears.
      const own = heard.filter((w) => w.kind === kind);
      expect(own.map((w) => w.bytes)).toEqual(handed[kind]);
      for (const w of own) expect(w.durationMs).toBeGreaterThanOrEqual(0);
    }
    // An entry is one message and the rest of the position, never the transcript.
    expect(Math.max(...handed.entry)).toBeLessThan(2000);
    const snapshotKey = `orchestrator.checkpoint.snapshot.duration{orchestrator="writes",store="${storeName}"}`;
    expect(hist(prom, snapshotKey)?.count).toBe(handed.snapshot.length);
    expect(hist(otel, snapshotKey)).toEqual(hist(prom, snapshotKey));
    // No failure: the failure counter has no series yet.
    expect(
      [...prom.keys()].filter((k) => k.startsWith('orchestrator.checkpoint.snapshot.failures')),
    ).toEqual([]);
    // The bucket list reaches a long transcript's snapshot.
    expect(
      Object.keys(
        (hist(prom, `orchestrator.checkpoint.size${labels('entry')}`) as HistogramValue).buckets,
      ),
    ).toContain('268435456');
  });

  it('counts a failing snapshot as failed, times it, and records no bytes for it', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry({ registry });
    const { result, handed, heard } = await written(telemetry, 200, 40, 'w2', true);
    // The conversation is not hurt by its snapshots failing: its entries hold it.
    expect(result.dispatchCount).toBe(200);
    await new Promise((r) => setTimeout(r, 50));
    const failed = heard.filter((w) => w.kind === 'snapshot');
    expect(failed.length).toBeGreaterThanOrEqual(1);
    for (const w of failed) expect(String(w.error)).toContain('disk full');
    const prom = await promSeries(registry);
    const at = `{orchestrator="writes",store="${storeName}"}`;
    expect(prom.get(`orchestrator.checkpoint.snapshot.failures${at}`)).toBe(failed.length);
    expect(hist(prom, `orchestrator.checkpoint.snapshot.duration${at}`)?.count).toBe(failed.length);
    expect(
      prom.get(
        `orchestrator.checkpoint.size{kind="snapshot",orchestrator="writes",store="${storeName}"}`,
      ),
    ).toBeUndefined();
    expect(handed.snapshot).toEqual([]);
    const text = await registry.metrics();
    expect(text).toMatch(
      new RegExp(
        `orchestrator_checkpoint_snapshot_failures_total\\{orchestrator="writes",store="${storeName}"\\} ${failed.length}`,
      ),
    );
  });

  it("says on the resumed segment's span how many entries its resume folded", async () => {
    const { exporter, provider } = memoryTracing();
    const telemetry = createConversationTelemetry({ tracerProvider: provider });
    const { store, acquired } = watched(newStore());
    const controller = new AbortController();
    const first = transcript(
      store,
      [telemetry],
      400,
      { snapshotEveryDispatches: 100 },
      {
        at: 250,
        controller,
      },
    );
    await expect(
      first.run(
        { sender: 'user', content: 'begin' },
        { conversationId: 'w3', signal: controller.signal },
      ),
    ).rejects.toBeInstanceOf(ConversationAbortedError);
    await new Promise((r) => setTimeout(r, 50));
    const second = transcript(store, [telemetry], 400, { snapshotEveryDispatches: 100 });
    const done = await second.resume('w3');
    expect(done.dispatchCount).toBe(400);
    await provider.forceFlush();
    const spans = spansNamed(exporter, 'invoke_workflow writes').sort(
      (x, y) =>
        (x.attributes['conversation.segment'] as number) -
        (y.attributes['conversation.segment'] as number),
    );
    expect(spans.map((s) => s.attributes['conversation.segment'])).toEqual([1, 2]);
    // The store handed back the base and the entries after it: the span says how many.
    expect(acquired.length).toBe(1);
    const folded = acquired[0] as number;
    // A snapshot every 100 dispatches, cut at 250: some entries after the last snapshot.
    expect(folded).toBeGreaterThan(0);
    expect(folded).toBeLessThan(250);
    expect(spans[1]?.attributes['conversation.resume.entries']).toBe(folded);
    expect(spans[0]?.attributes['conversation.resume.entries']).toBeUndefined();
  });
});

describe('a snapshot that answers after the conversation ended', () => {
  it('is told to nobody: an observer hears no write after its conversation ended', async () => {
    const base = createMemoryStore() as unknown as IncrementalStore;
    let late = 0;
    const slow = wrap(base, {
      snapshot: (checkpoint, lease) => {
        late++;
        return new Promise((resolve) => setTimeout(resolve, 150)).then(() =>
          base.snapshot(checkpoint, lease),
        );
      },
    });
    const order: string[] = [];
    const observer: ConversationObserver<Transcript, string> = {
      startConversation: () => ({
        onCheckpointWrite: (w) => order.push(`write ${w.kind}`),
        onConversationEnd: () => order.push('end'),
      }),
    };
    // Snapshots every 30 dispatches, each answering 150 ms later: the last ones after the end.
    const result = await transcript(slow, [observer], 200, { snapshotEveryDispatches: 30 }).run(
      { sender: 'user', content: 'begin' },
      { conversationId: 'late' },
    );
    expect(result.dispatchCount).toBe(200);
    await new Promise((r) => setTimeout(r, 400));
    expect(late).toBeGreaterThanOrEqual(1);
    // The end is the last thing heard; a snapshot answering before it may be heard, none after.
    expect(order.at(-1)).toBe('end');
    expect(order.filter((o) => o === 'end')).toHaveLength(1);
  });
});
