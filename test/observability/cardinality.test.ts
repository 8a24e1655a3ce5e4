/**
 * Issue 18: cardinality has a ceiling (orchestrators per registry, responders per orchestrator,
 * reasons), past which everything is still counted exactly under one overflow value, with a
 * warning once; and a tenant's series can be released.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import {
  ConversationOrchestrator,
  type Message,
  maxDispatches,
  roundRobin,
  type TerminationPolicy,
} from '../../src/index.ts';
import { createConversationTelemetry, semconv } from '../../src/observability/index.ts';
import { cappedTelemetry, warningsLogger } from '../helpers/tracing.ts';

const OVERFLOW = semconv.OVERFLOW_LABEL_VALUE;

function tenant(
  name: string,
  telemetry: ReturnType<typeof createConversationTelemetry<number, number>>,
  responders: readonly string[] = ['a'],
  termination: TerminationPolicy<number, number> = maxDispatches(2),
) {
  return new ConversationOrchestrator<number, number>({
    name,
    responders: responders.map((r) => ({
      name: r,
      respond: (m: Message<number>) => ({ sender: r, content: m.content + 1 }),
    })),
    turnPolicy: roundRobin(),
    projection: { initial: () => 0, fold: (s, m) => s + m.content },
    termination,
    observers: [telemetry],
  });
}

/** `name{labels} value` lines of the exposition, as a map. */
async function samples(registry: Registry): Promise<Map<string, number>> {
  const text = await registry.metrics();
  const map = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const cut = line.lastIndexOf(' ');
    map.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return map;
}

const input = { sender: 'user', content: 0 };

describe('distinct orchestrator names have a per-registry cap', () => {
  it('counts conversations past maxOrchestrators exactly under the overflow value, and warns once', async () => {
    const { registry, warnings, telemetry } = cappedTelemetry({ maxOrchestrators: 3 });
    for (let t = 0; t < 10; t++) await tenant(`tenant_${t}`, telemetry).run(input);
    await tenant('tenant_9', telemetry).run(input);
    const s = await samples(registry);
    const started = [...s].filter(([k]) =>
      k.startsWith('orchestrator_conversations_started_total{'),
    );
    expect(started).toEqual([
      ['orchestrator_conversations_started_total{orchestrator="tenant_0"}', 1],
      ['orchestrator_conversations_started_total{orchestrator="tenant_1"}', 1],
      ['orchestrator_conversations_started_total{orchestrator="tenant_2"}', 1],
      [`orchestrator_conversations_started_total{orchestrator="${OVERFLOW}"}`, 8],
    ]);
    expect(s.get(`orchestrator_dispatches_total{orchestrator="${OVERFLOW}",responder="a"}`)).toBe(
      16,
    );
    expect(
      s.get(
        `orchestrator_conversations_ended_total{orchestrator="${OVERFLOW}",reason="max_dispatches"}`,
      ),
    ).toBe(8);
    expect(warnings).toEqual([
      `conversation-orchestrator: more than maxOrchestrators (3) distinct orchestrator names on this registry; conversations of the others are counted under orchestrator="${OVERFLOW}" (release a tenant's series with telemetry.releaseOrchestrator(name))`,
    ]);
  });

  it('keeps the exposition bounded with 10,000 tenants: the default cap is 200', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({
      registry,
      logger: warningsLogger().logger,
    });
    for (let t = 0; t < 10_000; t++) {
      await tenant(`tenant_${t}`, telemetry, ['a'], maxDispatches(1)).run(input);
    }
    const s = await samples(registry);
    const names = new Set(
      [...s.keys()]
        .filter((k) => k.startsWith('orchestrator_conversations_started_total{'))
        .map((k) => /orchestrator="([^"]*)"/.exec(k)?.[1]),
    );
    expect(names.size).toBe(201);
    expect(names.has(OVERFLOW)).toBe(true);
    expect(s.get(`orchestrator_conversations_started_total{orchestrator="${OVERFLOW}"}`)).toBe(
      9_800,
    );
  });

  it('the overflow value cannot be a valid orchestrator name', () => {
    expect(
      () =>
        new ConversationOrchestrator({
          name: OVERFLOW,
          responders: [{ name: 'a', respond: () => undefined }],
          turnPolicy: roundRobin(),
          projection: { initial: () => 0, fold: (s) => s },
          termination: maxDispatches(1),
        }),
    ).toThrow(/Expected `name`/);
  });
});

describe('releasing a tenant', () => {
  it('removes every series of that orchestrator and frees its place under the cap', async () => {
    const { registry, warnings, telemetry } = cappedTelemetry({ maxOrchestrators: 2 });
    await tenant('stays', telemetry).run(input);
    await tenant('leaves', telemetry).run(input);
    expect(telemetry.releaseOrchestrator('leaves')).toBe(true);
    expect(telemetry.releaseOrchestrator('leaves')).toBe(false);
    const after = await registry.metrics();
    expect(after).not.toContain('orchestrator="leaves"');
    expect(after).toContain('orchestrator_dispatches_total{orchestrator="stays",responder="a"} 2');
    // The freed place goes to a new tenant, not to the overflow value.
    await tenant('arrives', telemetry).run(input);
    const s = await samples(registry);
    expect(s.get('orchestrator_conversations_started_total{orchestrator="arrives"}')).toBe(1);
    expect([...s.keys()].some((k) => k.includes(OVERFLOW))).toBe(false);
    expect(warnings).toEqual([]);
    // A released name that comes back starts from zero.
    await tenant('leaves', telemetry).run(input);
    expect(await registry.metrics()).not.toContain('orchestrator="leaves"');
    telemetry.releaseOrchestrator('arrives');
    await tenant('leaves', telemetry).run(input);
    expect(
      (await samples(registry)).get(
        'orchestrator_conversations_started_total{orchestrator="leaves"}',
      ),
    ).toBe(1);
  });

  it('answers false without a registry', () => {
    expect(createConversationTelemetry().releaseOrchestrator('x')).toBe(false);
  });
});

describe('per-responder series', () => {
  it('are created when a responder first dispatches: 10,000 responders of which one dispatched', async () => {
    const registry = new Registry();
    const telemetry = createConversationTelemetry<number, number>({ registry });
    const names = Array.from({ length: 10_000 }, (_, i) => `r${i}`);
    await tenant('wide', telemetry, names, maxDispatches(1)).run(input);
    const text = await registry.metrics();
    const responderLines = text.split('\n').filter((l) => l.includes('responder="'));
    // One counter line and one histogram (21 buckets + sum + count) for the one that dispatched.
    expect(new Set(responderLines.map((l) => /responder="([^"]*)"/.exec(l)?.[1]))).toEqual(
      new Set(['r0']),
    );
    expect(responderLines).toHaveLength(1 + 20 + 2);
  });

  it('past maxResponders, new responders are counted under the overflow value, with a warning once', async () => {
    const { registry, warnings, telemetry } = cappedTelemetry({ maxResponders: 2 });
    await tenant('wide', telemetry, ['a', 'b', 'c', 'd'], maxDispatches(8)).run(input);
    const s = await samples(registry);
    expect(s.get('orchestrator_dispatches_total{orchestrator="wide",responder="a"}')).toBe(2);
    expect(s.get('orchestrator_dispatches_total{orchestrator="wide",responder="b"}')).toBe(2);
    expect(
      s.get(`orchestrator_dispatches_total{orchestrator="wide",responder="${OVERFLOW}"}`),
    ).toBe(4);
    expect(
      s.get(
        `orchestrator_dispatch_duration_seconds_count{orchestrator="wide",responder="${OVERFLOW}"}`,
      ),
    ).toBe(4);
    expect(warnings).toEqual([
      `conversation-orchestrator: more than maxResponders (2) responders dispatched for orchestrator \`wide\`; the others are counted under responder="${OVERFLOW}" (said once per registry)`,
    ]);
  });
});

describe('reasons past maxReasons', () => {
  it('land in other with a warning naming the cap, once', async () => {
    const { registry, warnings, telemetry } = cappedTelemetry({ maxReasons: 2 });
    for (let i = 0; i < 5; i++) {
      const named: TerminationPolicy<number, number> = {
        name: `reason_${i}`,
        start: () => () => ({ terminate: true, reason: `reason_${i}` }),
      };
      await tenant('reasons', telemetry, ['a'], named).run(input);
    }
    const s = await samples(registry);
    expect(
      s.get('orchestrator_conversations_ended_total{orchestrator="reasons",reason="other"}'),
    ).toBe(3);
    expect(warnings).toEqual([
      'conversation-orchestrator: more than maxReasons (2) distinct user-named reasons on this registry; the others are counted as reason="other" (said once)',
    ]);
  });
});
