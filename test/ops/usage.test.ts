/**
 * Tokens and cost in the ops bundle: the default config (no price table) generates no cost rules
 * and no cost panels; a priced config generates price series and cost rates that promtool
 * checks against hand-computed numbers, and a usage dashboard whose every query a real
 * Prometheus evaluates, with data, on a synthetic exposition of the usage metrics (named as
 * CONTRACT.md fixes them) whose rates are known.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { defineOpsConfig, type OpsConfigInput } from '../../ops/config.ts';
import { renderOps } from '../../ops/render.ts';
import { METRIC_CONVERSATION_TOKENS, METRIC_TOKENS } from '../../ops/usage.ts';
import { interpolate, rules } from '../helpers/ops.ts';
import { type RunningPrometheus, startPrometheus } from '../helpers/prometheus.ts';

const PRICED: OpsConfigInput = {
  rateWindow: '20s',
  prices: {
    currency: 'USD',
    models: {
      'sim-small': { inputPerMillion: 0.5, outputPerMillion: 1.5 },
      'sim-large': { inputPerMillion: 3, outputPerMillion: 15 },
    },
  },
};
const priced = renderOps(defineOpsConfig(PRICED));

interface Panel {
  title: string;
  targets: { expr: string }[];
}
const panels = (file: string): Panel[] => (JSON.parse(file) as { panels: Panel[] }).panels;

describe('without a price table (the default)', () => {
  it('generates no cost rules and no cost panels, but the token rates and alerts', () => {
    const names = rules().flatMap((r) => [r.record ?? r.alert]);
    expect(names.filter((n) => /cost|price|unpriced/.test(n ?? ''))).toEqual([]);
    expect(names).toContain('job_orchestrator:orchestrator_tokens:rate5m');
    expect(names).toContain('OrchestratorTokenBurn');
    expect(names).toContain('OrchestratorRunawayConversations');
    const titles = panels(readFileSync('grafana/dashboards/usage.json', 'utf8')).map(
      (p) => p.title,
    );
    expect(titles).toEqual([
      'Tokens / s',
      'Share of tokens spent without converging',
      'Tokens per conversation (p95)',
      'Tokens per second by responder and model',
      'Tokens per second by orchestrator and type',
      'Tokens per conversation (p50 / p95) by reason',
      'Share of tokens spent without converging by orchestrator',
    ]);
  });
});

describe('with a price table', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'orchestrator-ops-usage-'));
    writeFileSync(
      join(dir, 'rules.yml'),
      priced.get('prometheus/rules/orchestrator.rules.yml') ?? '',
    );
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('adds cost panels to the usage dashboard, in the named currency', () => {
    const usage = panels(priced.get('grafana/dashboards/usage.json') ?? '');
    const cost = usage.filter((p) => /Cost|without a price/.test(p.title));
    expect(cost.map((p) => p.title)).toEqual([
      'Cost / h',
      'Cost per hour by responder',
      'Tokens per second of models without a price',
    ]);
    const json = priced.get('grafana/dashboards/usage.json') ?? '';
    expect(json).toContain('"unit": "suffix: USD/h"');
  });

  it('records each price per token and the cost rates the hand-computed numbers give', () => {
    // desk_a: 10,000 input and 2,000 output tokens of sim-small a second: 10000 * 0.5e-6 +
    // 2000 * 1.5e-6 = 0.008 USD/s. desk_b: 1,000 and 100 of sim-large: 0.003 + 0.0015 = 0.0045.
    // desk_c: 60 tokens a second of a model the table lacks: no cost, 60 unpriced tokens/s.
    const J = 'job="conversation-orchestrator",orchestrator="fx_desks"';
    // Samples every 10 seconds: the 20s rate window holds three.
    const series = (responder: string, model: string, type: string, perSecond: number) => ({
      series: `${METRIC_TOKENS}{${J},responder="${responder}",model="${model}",type="${type}"}`,
      values: `0+${perSecond * 10}x60`,
    });
    const near = (expr: string, labels: string, value: number) => ({
      expr: `abs(${expr} - ${value}) < bool 1e-12`,
      eval_time: '5m',
      exp_samples: [{ labels, value: 1 }],
    });
    const test = {
      rule_files: [join(dir, 'rules.yml')],
      evaluation_interval: '1m',
      group_eval_order: [
        'orchestrator.recording',
        'orchestrator.slo',
        'orchestrator.usage',
        'orchestrator.alerts',
      ],
      tests: [
        {
          interval: '10s',
          input_series: [
            series('desk_a', 'sim-small', 'input', 10_000),
            series('desk_a', 'sim-small', 'output', 2_000),
            series('desk_b', 'sim-large', 'input', 1_000),
            series('desk_b', 'sim-large', 'output', 100),
            series('desk_c', 'sim-unknown', 'input', 60),
          ],
          promql_expr_test: [
            near(
              'model_type:orchestrator_token_price:per_token{model="sim-small",type="input"}',
              '{currency="USD",model="sim-small",type="input"}',
              5e-7,
            ),
            near(
              'model_type:orchestrator_token_price:per_token{model="sim-large",type="output"}',
              '{currency="USD",model="sim-large",type="output"}',
              1.5e-5,
            ),
            near(
              'job_orchestrator_responder:orchestrator_cost:rate20s{responder="desk_a"}',
              `{${J},responder="desk_a",currency="USD"}`,
              0.008,
            ),
            near(
              'job_orchestrator_responder:orchestrator_cost:rate20s{responder="desk_b"}',
              `{${J},responder="desk_b",currency="USD"}`,
              0.0045,
            ),
            near('job_orchestrator:orchestrator_cost:rate20s', `{${J},currency="USD"}`, 0.0125),
            near('job_orchestrator:orchestrator_tokens_unpriced:rate20s', `{${J}}`, 60),
            near('job_orchestrator:orchestrator_tokens:rate20s', `{${J}}`, 13_160),
            // No cost series for the responder whose model has no price.
            {
              expr: 'absent(job_orchestrator_responder:orchestrator_cost:rate20s{responder="desk_c"})',
              eval_time: '5m',
              exp_samples: [{ labels: '{responder="desk_c"}', value: 1 }],
            },
          ],
        },
      ],
    };
    const file = join(dir, 'cost.test.yml');
    writeFileSync(file, JSON.stringify(test));
    const r = spawnSync('promtool', ['test', 'rules', file], { encoding: 'utf8' });
    expect(r.stdout + r.stderr).toContain('SUCCESS');
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });
});

describe('the usage dashboard, on a real Prometheus scraping a synthetic exposition', () => {
  // Known rates: desk_a 1,000 input and 200 output tokens of sim-small a second, desk_b 50 of a
  // model without a price; ended conversations spend 1,000 tokens a second converged and 3,000
  // unconverged (max_dispatches). Counters are rate x seconds since start, as a scrape sees them.
  const start = Date.now();
  let server: Server;
  let prometheus: RunningPrometheus;
  let dir: string;

  function exposition(): string {
    const t = (Date.now() - start) / 1000;
    const O = 'orchestrator="fx_desks"';
    const lines = [
      `# TYPE ${METRIC_TOKENS} counter`,
      `${METRIC_TOKENS}{${O},responder="desk_a",model="sim-small",type="input"} ${1000 * t}`,
      `${METRIC_TOKENS}{${O},responder="desk_a",model="sim-small",type="output"} ${200 * t}`,
      `${METRIC_TOKENS}{${O},responder="desk_b",model="sim-unknown",type="input"} ${50 * t}`,
      `# TYPE ${METRIC_CONVERSATION_TOKENS} histogram`,
    ];
    // One conversation a second per reason: converged ones spend 1,000 tokens, the others 3,000.
    for (const [reason, tokens] of [
      ['converged', 1000],
      ['max_dispatches', 3000],
    ] as const) {
      const n = Math.floor(t);
      const L = `${O},reason="${reason}"`;
      for (const le of [100, 1000, 10000, 100000]) {
        lines.push(`${METRIC_CONVERSATION_TOKENS}_bucket{${L},le="${le}"} ${tokens <= le ? n : 0}`);
      }
      lines.push(`${METRIC_CONVERSATION_TOKENS}_bucket{${L},le="+Inf"} ${n}`);
      lines.push(`${METRIC_CONVERSATION_TOKENS}_sum{${L}} ${n * tokens}`);
      lines.push(`${METRIC_CONVERSATION_TOKENS}_count{${L}} ${n}`);
    }
    lines.push(
      '# TYPE orchestrator_conversations_started_total counter',
      `orchestrator_conversations_started_total{${O}} ${Math.floor(2 * t)}`,
    );
    return `${lines.join('\n')}\n`;
  }

  beforeAll(async () => {
    server = createServer((_req, res) => {
      res.setHeader('content-type', 'text/plain; version=0.0.4');
      res.end(exposition());
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    dir = mkdtempSync(join(tmpdir(), 'orchestrator-ops-usage-prom-'));
    writeFileSync(
      join(dir, 'rules.yml'),
      priced.get('prometheus/rules/orchestrator.rules.yml') ?? '',
    );
    prometheus = await startPrometheus(`127.0.0.1:${port}`, [join(dir, 'rules.yml')]);
  }, 60_000);

  afterAll(async () => {
    await prometheus?.stop();
    await new Promise((resolve) => server?.close(resolve));
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  type Vector = { result: { value: [number, string] }[] };
  const value = async (expr: string): Promise<number[]> => {
    // Grafana's rate range is at least four scrape intervals: 4 s here (1 s scrapes), so the
    // rates settle within seconds instead of the helper's minute.
    const query = interpolate(expr.replaceAll('$__rate_interval', '4s'));
    const r = await prometheus.query<Vector>('/api/v1/query', { query });
    expect(r.status, `${expr}: ${r.error}`).toBe('success');
    return r.data.result.map((s) => Number(s.value[1]));
  };

  it('evaluates every panel query of the priced dashboard with data, and the numbers are the known rates', async () => {
    const usage = panels(priced.get('grafana/dashboards/usage.json') ?? '');
    const byTitle = Object.fromEntries(usage.map((p) => [p.title, p.targets.map((t) => t.expr)]));
    await vi.waitFor(
      async () => {
        for (const p of usage) {
          for (const t of p.targets) {
            const values = await value(t.expr);
            expect(
              values.filter((v) => !Number.isNaN(v)).length,
              `${p.title}: ${t.expr}`,
            ).toBeGreaterThan(0);
          }
        }
      },
      { timeout: 45_000, interval: 1000 },
    );
    const one = async (title: string) => {
      const [v] = await value(byTitle[title]?.[0] ?? '');
      return v as number;
    };
    await vi.waitFor(
      async () => {
        // 3,000 of the 4,000 tokens a second went to conversations that did not converge.
        expect(await one('Share of tokens spent without converging')).toBeCloseTo(0.75, 2);
        expect((await one('Tokens / s')) / 1250).toBeCloseTo(1, 1);
        // (1000 * 0.5 + 200 * 1.5) / 1e6 USD a second: 2.88 USD an hour; desk_b's model has no price.
        expect((await one('Cost / h')) / 2.88).toBeCloseTo(1, 1);
        expect((await one('Tokens per second of models without a price')) / 50).toBeCloseTo(1, 1);
      },
      { timeout: 30_000, interval: 1000 },
    );
  }, 60_000);

  it('evaluates the usage rules into series', async () => {
    for (const record of [
      'job_orchestrator:orchestrator_tokens:rate20s',
      'job_orchestrator:orchestrator_conversation_tokens:histogram_quantile_rate20s',
      'job_orchestrator_responder:orchestrator_cost:rate20s',
      'job_orchestrator:orchestrator_cost:rate20s',
      'job_orchestrator:orchestrator_tokens_unpriced:rate20s',
      'model_type:orchestrator_token_price:per_token',
    ]) {
      await vi.waitFor(
        async () => expect((await value(record)).length, record).toBeGreaterThan(0),
        {
          timeout: 30_000,
          interval: 1000,
        },
      );
    }
    // p95 of tokens per conversation: half the conversations at 1,000 (bucket 1000), half at
    // 3,000 (bucket 10000): 1000 + 9000 * (0.95 - 0.5) / 0.5 = 9,100.
    const [p95] = await value(
      'job_orchestrator:orchestrator_conversation_tokens:histogram_quantile_rate20s',
    );
    expect(p95).toBeCloseTo(9100, -1);
  }, 60_000);
});
