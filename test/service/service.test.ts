import { spawnSync } from 'node:child_process';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { ConfigError, parseConfig, usage } from '../../service/config.ts';
import * as healthMetrics from '../../service/http/health-metrics.ts';
import { attrs, startOtlpReceiver } from '../helpers/otlp-receiver.ts';
import { docsTableNames, docText } from '../helpers/readme.ts';
import {
  type RunningService,
  runServiceCommand,
  startService,
  sumSamples,
} from '../helpers/service.ts';

const FAST = ['--rate', '40', '--concurrency', '12', '--latency-ms', '1', '--progress-s', '0.5'];
let running: RunningService | undefined;

afterEach(async () => {
  if (running && running.child.exitCode === null) {
    running.child.kill('SIGKILL');
    await running.exited;
  }
  running = undefined;
});

describe('the demo service (npm start)', () => {
  it('serves /healthz and /metrics, and the conversation metrics move', async () => {
    running = await startService(FAST);
    const health = await fetch(`${running.url}/healthz`);
    expect(health.status).toBe(200);
    expect(health.headers.get('x-content-type-options')).toBe('nosniff');
    expect(await health.json()).toMatchObject({ status: 'ok' });

    await new Promise((r) => setTimeout(r, 1500));
    const first = await (await fetch(`${running.url}/metrics`)).text();
    await new Promise((r) => setTimeout(r, 1500));
    const second = await fetch(`${running.url}/metrics`);
    expect(second.headers.get('content-type')).toBe('text/plain; version=0.0.4; charset=utf-8');
    const text = await second.text();
    const ended = (t: string) => sumSamples(t, 'orchestrator_conversations_ended_total');
    const dispatches = (t: string) => sumSamples(t, 'orchestrator_dispatches_total');
    expect(ended(first)).toBeGreaterThan(0);
    expect(ended(text)).toBeGreaterThan(ended(first));
    expect(dispatches(text)).toBeGreaterThan(dispatches(first));
    expect(
      sumSamples(text, 'orchestrator_conversations_ended_total', { reason: 'converged' }),
    ).toBeGreaterThan(0);
    // Classic text format: counters keep `_total` in HELP/TYPE, no exemplars, no # EOF; promtool agrees.
    expect(text).toContain('# TYPE orchestrator_dispatches_total counter');
    expect(text).not.toContain('# {trace_id');
    const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    expect(lint.stdout + lint.stderr).toBe('');
  });

  it('answers an OpenMetrics scraper in OpenMetrics', async () => {
    running = await startService(FAST);
    await new Promise((r) => setTimeout(r, 1000));
    const res = await fetch(`${running.url}/metrics`, {
      headers: {
        accept: 'application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5',
      },
    });
    expect(res.headers.get('content-type')).toBe(
      'application/openmetrics-text; version=1.0.0; charset=utf-8',
    );
    const text = await res.text();
    expect(text.trimEnd().endsWith('# EOF')).toBe(true);
    expect(text).toContain('# TYPE orchestrator_dispatches counter');
  });

  it('pushes every dispatch in order, then how the conversation ended, over a real WebSocket', async () => {
    running = await startService(FAST);
    const ws = new WebSocket(`ws://127.0.0.1:${running.port}/ws?orchestrator=fx_desks`);
    type Update = {
      type: string;
      orchestrator?: string;
      conversationId?: string;
      dispatchCount?: number;
      spread?: number;
      reason?: string;
      decision?: { terminate: boolean; reason: string } | undefined;
    };
    const messages: (Update & {
      dispatches?: (Update & { fromDispatch: number; spreads: number[] })[];
      ends?: Update[];
    })[] = [];
    ws.on('message', (data) => messages.push(JSON.parse(String(data))));
    // Each `updates` frame, unfolded: one update per dispatch, then one per ending.
    const unfold = () =>
      messages.slice(2).flatMap((frame): Update[] => {
        // The person-in-the-loop notices (the waiting list, a new one waiting) are not frames.
        if (['approvals', 'approval', 'decided'].includes(frame.type)) return [];
        expect(frame.type).toBe('updates');
        return [
          ...(frame.dispatches ?? []).flatMap(({ fromDispatch, spreads, ...d }) =>
            spreads.map((spread, i) => ({
              ...d,
              type: 'dispatch',
              dispatchCount: fromDispatch + i,
              spread,
              // The decision comes with the newest dispatch only.
              ...(i === spreads.length - 1 ? {} : { decision: undefined }),
            })),
          ),
          ...(frame.ends ?? []).map((e) => ({ ...e, type: 'end' })),
        ];
      });
    try {
      await vi.waitFor(
        () => expect(unfold().filter((m) => m.type === 'end').length).toBeGreaterThan(20),
        {
          timeout: 30_000,
        },
      );
    } finally {
      ws.close();
    }
    expect(messages[0]).toEqual({
      type: 'hello',
      subscribed: 'fx_desks',
      orchestrators: ['fx_desks', 'rates_desks'],
      tolerance: 0.05,
      maxDispatches: 400,
      slowMs: 5000,
    });
    // Then the history: the conversations in flight, whose dispatches continue it exactly.
    const history = messages[1] as unknown as {
      type: string;
      conversations: { conversationId: string; fromDispatch: number; spreads: number[] }[];
      omitted: number;
      totals: Record<string, Record<string, number>>;
    };
    expect(history.type).toBe('history');
    expect(history.omitted).toBe(0);
    expect(Object.keys(history.totals).every((o) => o === 'fx_desks')).toBe(true);
    const updates = unfold();
    for (const tail of history.conversations) {
      expect(tail.fromDispatch).toBe(1);
      const next = updates.find((u) => u.conversationId === tail.conversationId);
      if (next?.type === 'dispatch')
        expect(next.dispatchCount).toBe(tail.fromDispatch + tail.spreads.length);
    }
    const seen = new Map<
      string,
      { counts: number[]; last?: { terminate: boolean; reason: string } }
    >();
    const ends = [];
    for (const u of updates) {
      expect(u.orchestrator).toBe('fx_desks');
      expect(typeof u.spread).toBe('number');
      const id = u.conversationId as string;
      const conversation = seen.get(id) ?? { counts: [] };
      seen.set(id, conversation);
      if (u.type === 'end') {
        ends.push(u);
        // The desks' simulated models: a converged conversation read 420 prompt tokens and
        // 18 per earlier quote at each dispatch (output varies).
        const tokens = (u as { tokens?: { input: number; output: number } }).tokens;
        const n = u.dispatchCount as number;
        if (u.reason === 'converged') expect(tokens?.input).toBe(420 * n + 9 * n * (n - 1));
        expect(Number.isSafeInteger(tokens?.output)).toBe(true);
        expect(['converged', 'max_dispatches', 'timeout', 'error', 'aborted']).toContain(u.reason);
        // No dispatch after the end; the end counts the dispatches that were pushed.
        conversation.counts.push(Number.NaN);
        if (conversation.counts[0] === 1)
          expect(u.dispatchCount).toBe(conversation.counts.length - 1);
        if (conversation.last?.terminate) expect(u.reason).toBe(conversation.last.reason);
        continue;
      }
      expect(u.type).toBe('dispatch');
      conversation.counts.push(u.dispatchCount as number);
      if (u.decision === undefined) continue;
      expect(typeof u.decision.terminate).toBe('boolean');
      conversation.last = u.decision;
    }
    // Each conversation's updates arrive one dispatch after another.
    for (const { counts } of seen.values()) {
      for (let i = 1; i < counts.length; i++) {
        if (!Number.isNaN(counts[i])) expect(counts[i]).toBe((counts[i - 1] as number) + 1);
      }
    }
    // docs/service.md documents every message type the socket sent; the person-in-the-loop
    // notices (approvals, approval, decided) come only when a conversation waits, so they may not.
    const documented = docsTableNames('## `/ws` messages', 'docs/service.md').sort();
    const sent = [...new Set(messages.map((m) => m.type))].sort();
    const notices = ['approvals', 'approval', 'decided'];
    expect(sent.filter((t) => !documented.includes(t) && !notices.includes(t))).toEqual([]);
    expect(
      documented.filter(
        (t) => !sent.includes(t) && !['approvals', 'approval', 'decided'].includes(t),
      ),
    ).toEqual([]);
    // Failures and aborts end without a terminating dispatch: only the end message says so.
    const reasons = new Set(ends.map((e) => e.reason));
    expect(reasons.has('converged')).toBe(true);
    const finished = updates.filter((u) => u.decision?.terminate);
    expect(finished.length).toBeGreaterThan(0);
    expect(finished.every((u) => u.decision?.reason !== 'continue')).toBe(true);
  });

  it('bounds the history sent on connect in bytes, counting the conversations left out', async () => {
    running = await startService([
      ...['--rate', '2000', '--concurrency', '1500', '--latency-ms', '500', '--mix', 'never=1'],
    ]);
    const url = `ws://127.0.0.1:${running.port}/ws`;
    await new Promise((r) => setTimeout(r, 2_000));
    const frames: string[] = [];
    const ws = new WebSocket(url);
    ws.on('message', (data) => frames.push(String(data)));
    try {
      await vi.waitFor(() => expect(frames.length).toBeGreaterThanOrEqual(2), { timeout: 20_000 });
    } finally {
      ws.close();
    }
    const history = JSON.parse(frames[1] as string);
    expect(history.type).toBe('history');
    // 64 KiB of tails, and a little for the totals around them.
    expect(Buffer.byteLength(frames[1] as string)).toBeLessThan(64 * 1024 + 1024);
    expect(history.conversations.length).toBeGreaterThan(100);
    // Conversations time out after 3 s and new ones start: some 1,500 are in flight at any time.
    expect(history.conversations.length + history.omitted).toBeGreaterThan(1000);
    expect(history.omitted).toBeGreaterThan(0);
  });

  it('on SIGTERM aborts in-flight conversations, flushes their spans and exits 0', async () => {
    const receiver = await startOtlpReceiver();
    running = await startService(
      // Every trace kept: a durable conversation handed off at shutdown ends a segment, which the
      // sampler decides by its ratio (docs/sampling.md), not by the unconverged rule.
      [
        '--rate',
        '40',
        '--concurrency',
        '12',
        '--latency-ms',
        '20',
        '--mix',
        'slow=1',
        '--sample-ratio',
        '1',
      ],
      { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_SERVICE_NAME: 'desks-test' },
    );
    expect(running.stdout()).toContain(`tracing on: OTLP/HTTP to ${receiver.url}`);
    await new Promise((r) => setTimeout(r, 1500));
    running.child.kill('SIGTERM');
    expect(await running.exited).toBe(0);
    const line = /aborted (\d+) in-flight conversations, (\d+) spans exported, closed/.exec(
      running.stdout(),
    );
    const aborted = line;
    expect(Number(aborted?.[1])).toBeGreaterThan(0);
    await receiver.close();
    const conversations = receiver.spans.filter((s) => s.name.startsWith('invoke_workflow '));
    const abortedSpans = conversations.filter(
      (s) => attrs(s.attributes)['conversation.end.reason'] === 'aborted',
    );
    // Every conversation aborted at shutdown reached the receiver before the process exited.
    expect(abortedSpans.length).toBe(Number(aborted?.[1]));
    expect(abortedSpans[0]?.events.length).toBeGreaterThan(0);
    // The shutdown line is true: it counts what the receiver got.
    expect(Number(line?.[2])).toBe(receiver.spans.length);
  });

  it('prints --help and rejects bad values clearly', () => {
    const help = spawnSync(process.execPath, ['--import', 'tsx', 'service/main.ts', '--help'], {
      encoding: 'utf8',
    });
    expect(help.status).toBe(0);
    expect(help.stdout).toContain('--concurrency');
    expect(help.stdout).toContain('env CONCURRENCY, default 16');
    const bad = spawnSync(
      process.execPath,
      ['--import', 'tsx', 'service/main.ts', '--rate', 'fast'],
      { encoding: 'utf8' },
    );
    expect(bad.status).toBe(2);
    expect(bad.stderr.trim()).toBe(
      'Expected --rate to be a number from 0.01 to 100000, got `fast`',
    );
    const env = spawnSync(process.execPath, ['--import', 'tsx', 'service/main.ts'], {
      encoding: 'utf8',
      env: { ...process.env, MIX: 'converge=1,chaos=2' },
    });
    expect(env.status).toBe(2);
    expect(env.stderr.trim()).toBe(
      'Expected MIX to be scenario=weight pairs (scenarios: converge, slow, lagging, never, timeout, fail, abort, approval; weights >= 0), got `converge=1,chaos=2`',
    );
  });

  it('rejects every bad value with a clear message and exit code 2, before listening', async () => {
    const cases: [string[], NodeJS.ProcessEnv, string][] = [
      [
        ['--host', '999.1.1.1'],
        {},
        'Expected --host to be an IP address (0.0.0.0, 127.0.0.1, ::) or a host name, got `999.1.1.1`',
      ],
      [
        [],
        { HOST: 'bad host!' },
        'Expected HOST to be an IP address (0.0.0.0, 127.0.0.1, ::) or a host name, got `bad host!`',
      ],
      [
        [],
        { CONCURRENCY: '0x10' },
        'Expected CONCURRENCY to be an integer from 1 to 10000, got `0x10`',
      ],
      [['--rate', ' 5'], {}, 'Expected --rate to be a number from 0.01 to 100000, got ` 5`'],
      [
        ['--tolerance', '1e400'],
        {},
        'Expected --tolerance to be a number from 1e-9 to 1000000, got `1e400`',
      ],
      [
        ['--mix', 'converge=0x1'],
        {},
        'Expected --mix to be scenario=weight pairs (scenarios: converge, slow, lagging, never, timeout, fail, abort, approval; weights >= 0), got `converge=0x1`',
      ],
      [
        ['--max-clients=-1'],
        {},
        'Expected --max-clients to be an integer from 0 to 100000, got `-1`',
      ],
      [
        ['--headers-timeout-ms', '5000', '--request-timeout-ms', '1000'],
        {},
        'Expected --request-timeout-ms to be at least --headers-timeout-ms (5000), got `1000`',
      ],
      [['--rate', '5', '--rate', '50'], {}, 'Expected --rate at most once, got it 2 times'],
      [['--port', '5'], {}, 'Expected --port at most once, got it 2 times'],
      [[], { RATE: '' }, 'Expected RATE to be unset or a value, got an empty string'],
      [[], { HOST: '' }, 'Expected HOST to be unset or a value, got an empty string'],
      [
        ['--concurrency', '16.0'],
        {},
        'Expected --concurrency to be an integer from 1 to 10000, got `16.0`',
      ],
      [[], { DESKS: '3e0' }, 'Expected DESKS to be an integer from 2 to 8, got `3e0`'],
      [['--rate', '1e3'], {}, 'Expected --rate to be a number from 0.01 to 100000, got `1e3`'],
      [['--rate', '5.'], {}, 'Expected --rate to be a number from 0.01 to 100000, got `5.`'],
      ...['0x7f.1', '127.1', '1.2.3.0x4', '0x7f000001', '10.0.0.010.'].map(
        (host): [string[], NodeJS.ProcessEnv, string] => [
          ['--host', host],
          {},
          `Expected --host to be an IP address (0.0.0.0, 127.0.0.1, ::) or a host name, got \`${host}\``,
        ],
      ),
      [
        ['--host', '192.0.2.1'],
        {},
        "Cannot listen on --host 192.0.2.1 --port 0: the address is not one of this machine's (EADDRNOTAVAIL)",
      ],
    ];
    // Four processes at a time: 22 at once on a loaded 2-core machine (load average > 20) made
    // some exit 2 with an empty stderr.
    const results: Awaited<ReturnType<typeof runServiceCommand>>[] = [];
    for (let i = 0; i < cases.length; i += 4) {
      results.push(
        ...(await Promise.all(
          cases
            .slice(i, i + 4)
            .map(([args, env]) => runServiceCommand(['--port', '0', ...args], env)),
        )),
      );
    }
    expect(results.map((r) => ({ status: r.status, stderr: r.stderr.trim() }))).toEqual(
      cases.map(([, , message]) => ({ status: 2, stderr: message })),
    );
  }, 180_000);

  it('rejects bad --allowed-hosts and --trace-url values with what was expected and what came', () => {
    const cases: [string[], NodeJS.ProcessEnv, string][] = [
      ...['evil example', '1.2.3', 'a..b', '.', '*', 'x:80', 'a,'].map(
        (hosts): [string[], NodeJS.ProcessEnv, string] => [
          ['--allowed-hosts', hosts],
          {},
          `Expected --allowed-hosts to be comma-separated host names (desks, demo.example.com, .example.com) or IP addresses, got \`${hosts}\``,
        ],
      ),
      [
        [],
        { ALLOWED_HOSTS: '' },
        'Expected ALLOWED_HOSTS to be unset or a value, got an empty string',
      ],
      ...[
        'http://localhost:16686/trace/',
        'http://localhost:16686/trace/{traceId}/{traceId}',
        'javascript:alert(1)//{traceId}',
        'file:///{traceId}',
        '/trace/{traceId}',
      ].map((url): [string[], NodeJS.ProcessEnv, string] => [
        [],
        { TRACE_URL: url },
        `Expected TRACE_URL to be an http(s) URL holding {traceId} once (http://localhost:16686/trace/{traceId}), got \`${url}\``,
      ]),
    ];
    for (const [args, env, message] of cases) {
      expect(() => parseConfig(args, env)).toThrow(new ConfigError(message));
    }
    // And the good ones: the default list follows --host, a list replaces it, IPs come unbracketed.
    const config = (args: string[], env: NodeJS.ProcessEnv = {}) => {
      const c = parseConfig(args, env);
      if (c === 'help') throw new Error('help');
      return c;
    };
    expect(config([]).allowedHosts).toEqual(['localhost', '127.0.0.1', '::1']);
    expect(config(['--host', 'demo.internal']).allowedHosts).toEqual([
      'demo.internal',
      'localhost',
      '127.0.0.1',
      '::1',
    ]);
    expect(config(['--allowed-hosts', 'Desks, .Example.COM,[::1],10.0.0.1']).allowedHosts).toEqual([
      'desks',
      '.example.com',
      '::1',
      '10.0.0.1',
    ]);
    expect(config([]).traceUrl).toBeUndefined();
    expect(config([], { TRACE_URL: 'http://localhost:16686/trace/{traceId}' }).traceUrl).toBe(
      'http://localhost:16686/trace/{traceId}',
    );
  });

  it('takes plain decimals and host names, and brackets an IPv6 host in the URLs it prints', async () => {
    running = await startService([...FAST, '--host', '::1', '--tolerance', '.05']);
    expect(running.stdout()).toContain(
      `listening on http://[::1]:${running.port} (the live page at /, /metrics, /healthz, ws://[::1]:${running.port}/ws)`,
    );
    expect((await fetch(`http://[::1]:${running.port}/healthz`)).status).toBe(200);
  });

  it('says so and exits 2 when its port is taken', async () => {
    running = await startService(FAST);
    const taken = await runServiceCommand(['--port', String(running.port)]);
    expect(taken.status).toBe(2);
    expect(taken.stderr.trim()).toBe(
      `Cannot listen on --host 127.0.0.1 --port ${running.port}: the port is in use (EADDRINUSE)`,
    );
  });

  it('documents exactly its own metrics and every knob in docs/service.md', async () => {
    running = await startService(FAST);
    const text = await (await fetch(`${running.url}/metrics`)).text();
    const exposed = [...text.matchAll(/^# TYPE (demo_\S+) /gm)].map((m) => m[1]).sort();
    expect(docsTableNames('## Demo service metrics', 'docs/service.md').sort()).toEqual(exposed);
    // Exactly the service's table of its metric names: every METRIC_* constant, seven of them.
    const table = Object.entries(healthMetrics)
      .filter(([name]) => name.startsWith('METRIC_'))
      .map(([, value]) => value as string)
      .sort();
    expect(table).toHaveLength(7);
    expect(exposed).toEqual(table);
    const page = docText('docs/service.md');
    const flags = [...usage().matchAll(/^ {2}(--[a-z-]+)/gm)].map((m) => m[1] as string);
    expect(flags.length).toBe(30);
    for (const flag of flags.filter((f) => f !== '--help')) expect(page).toContain(`| \`${flag}\``);
  });
});
