/**
 * The ops config: bad values are refused with what was expected and what came, and a user's own
 * config renders, with one command, rules, dashboards and manifests that all follow it.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { renderCollector } from '../../ops/collector.ts';
import { DEFAULT_OPS_CONFIG, defineOpsConfig, type OpsConfigInput } from '../../ops/config.ts';
import { renderOps } from '../../ops/render.ts';
import { humanDuration } from '../../ops/rules.ts';
import { DEFAULT_CONVERSATION_DURATION_BUCKETS } from '../../src/observability/index.ts';
import { type DashboardQuery, dashboardQueries, metricNamesIn, type Rule } from '../helpers/ops.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '../..');

describe('defineOpsConfig', () => {
  it('returns the defaults when given nothing, and merges nested values', () => {
    expect(defineOpsConfig()).toEqual(DEFAULT_OPS_CONFIG);
    const config = defineOpsConfig({ slos: { convergenceLatency: { thresholdSeconds: 10 } } });
    expect(config.slos).toEqual({
      convergence: {
        objective: 0.95,
        period: '30d',
        goodReasons: ['converged'],
        excludedReasons: ['aborted'],
      },
      convergenceLatency: { objective: 0.99, period: '30d', thresholdSeconds: 10 },
    });
    expect(config.kubernetes).toEqual(DEFAULT_OPS_CONFIG.kubernetes);
  });

  it("names the telemetry's default conversation duration buckets, so the latency threshold is checked against what the service exposes", () => {
    expect(DEFAULT_OPS_CONFIG.conversationDurationBuckets).toEqual([
      ...DEFAULT_CONVERSATION_DURATION_BUCKETS,
    ]);
    expect(DEFAULT_OPS_CONFIG.conversationDurationBuckets).toContain(
      DEFAULT_OPS_CONFIG.slos.convergenceLatency.thresholdSeconds,
    );
  });

  it.each<[OpsConfigInput, string]>([
    [
      { selector: 'conversation-orchestrator' },
      'Expected `selector` to be PromQL label matchers such as `job="conversation-orchestrator"`, got `conversation-orchestrator` (string)',
    ],
    [
      { selector: 'job="a"} or vector(1) or {x="' },
      'Expected `selector` to be PromQL label matchers such as `job="conversation-orchestrator"`, got `job="a"} or vector(1) or {x="` (string)',
    ],
    [
      { selector: 'job="a\nb"' },
      'Expected `selector` to be PromQL label matchers such as `job="conversation-orchestrator"`, got `job="a\nb"` (string)',
    ],
    ...['0s', '0m', '5m5m', '1m1h', '30s5m', '1.5h', '-5m', '5 m'].map(
      (d): [OpsConfigInput, string] => [
        { dispatchWindow: d },
        `Expected \`dispatchWindow\` to be a Prometheus duration such as \`5m\` or \`1h30m\` (units from y to ms, each once, largest first, more than zero), got \`${d}\` (string)`,
      ],
    ),
    [
      { jobDown: { for: '0s' } },
      'Expected `jobDown.for` to be a Prometheus duration such as `5m` or `1h30m` (units from y to ms, each once, largest first, more than zero), got `0s` (string)',
    ],
    [
      { selector: 'job=~"a.*|("' },
      'Expected `selector` matcher `job=~"a.*|("` to be a regular expression that compiles, got `job=~"a.*|("` (string)',
    ],
    [
      { selector: 'job="a",env!~"[z-a]"' },
      'Expected `selector` matcher `env!~"[z-a]"` to be a regular expression that compiles, got `env!~"[z-a]"` (string)',
    ],
    [
      { selector: 'job=~"a\\.b"' },
      'Expected `selector` matcher `job=~"a\\.b"` to be a string with valid escapes (write `\\\\.` for a literal dot), got `job=~"a\\.b"` (string)',
    ],
    [
      { selector: 'job="conversation-orchestrator",env=~"(?=prod)p.*"' },
      'Expected `selector` matcher `env=~"(?=prod)p.*"` to be a regular expression that compiles, got `env=~"(?=prod)p.*"` (string)',
    ],
    [
      { selector: 'job="agents",orchestrator="fx_desks"' },
      'Expected `selector` to be matchers on target labels only (it selects `up{…}` too, which has no `__name__`, `orchestrator`, `responder`, `reason`, `le`, `quantile`, `store`, `cause`, `queue`, `state`), got `orchestrator="fx_desks"` (string)',
    ],
    [
      { selector: 'job=~"agents-.*"' },
      'Expected `selector` matchers the Kubernetes ServiceMonitor\'s targets satisfy (they carry job="conversation-orchestrator",namespace="conversation-orchestrator",service="conversation-orchestrator",endpoint="http",container="service", a per-replica `instance` and `pod`, and `label="value"` for each equality matcher), got `job=~"agents-.*"` (string)',
    ],
    [
      { selector: 'job="agents",namespace="prod"', kubernetes: { namespace: 'agents' } },
      'Expected `selector` matchers the Kubernetes ServiceMonitor\'s targets satisfy (they carry job="agents",namespace="agents",service="conversation-orchestrator",endpoint="http",container="service", a per-replica `instance` and `pod`, and `label="value"` for each equality matcher), got `namespace="prod"` (string)',
    ],
    [
      { selector: 'job="agents",instance="desks-1:9464"' },
      'Expected `selector` matchers the Kubernetes ServiceMonitor\'s targets satisfy (they carry job="agents",namespace="conversation-orchestrator",service="conversation-orchestrator",endpoint="http",container="service", a per-replica `instance` and `pod`, and `label="value"` for each equality matcher), got `instance="desks-1:9464"` (string)',
    ],
    [
      { groupLabels: ['namespace'] },
      'Expected `groupLabels` to be an array that includes `job` (alertmanager.yml inhibits on `equal: [job]`), got `["namespace"]` (object)',
    ],
    [
      { kubernetes: { prometheusSelector: { release: 'kube prometheus' } } },
      'Expected `kubernetes.prometheusSelector` to be Kubernetes labels such as `{ release: "kube-prometheus-stack" }`, got `{"release":"kube prometheus"}` (object)',
    ],
    [
      { groupLabels: ['orchestrator'] },
      'Expected `groupLabels` to be an array of distinct label names other than `orchestrator`, `responder`, `reason`, `le`, `quantile`, `store`, `cause`, `queue`, `state`, got `["orchestrator"]` (object)',
    ],
    [
      { groupLabels: ['job', 'job'] },
      'Expected `groupLabels` to be an array of distinct label names other than `orchestrator`, `responder`, `reason`, `le`, `quantile`, `store`, `cause`, `queue`, `state`, got `["job","job"]` (object)',
    ],
    [
      { rateWindw: '10m' } as OpsConfigInput,
      'Unknown option `rateWindw`; expected one of `selector`, `groupLabels`, `rateWindow`',
    ],
    [
      { slos: { convergence: { objectve: 0.9 } } } as unknown as OpsConfigInput,
      'Unknown option `slos.convergence.objectve`; expected one of `slos.convergence.objective`, `slos.convergence.period`, `slos.convergence.goodReasons`, `slos.convergence.excludedReasons`',
    ],
    [
      { slos: { latency: {} } } as unknown as OpsConfigInput,
      'Unknown option `slos.latency`; expected one of `slos.convergence`, `slos.convergenceLatency`',
    ],
    [
      { kubernetes: 'prod' } as unknown as OpsConfigInput,
      'Expected `kubernetes` to be an object, got `prod` (string)',
    ],
    [
      { rateWindow: '5 minutes' },
      'Expected `rateWindow` to be a Prometheus duration such as `5m` or `1h30m` (units from y to ms, each once, largest first, more than zero), got `5 minutes` (string)',
    ],
    ...[0, 1, 95, -0.5, Number.NaN].map((objective): [OpsConfigInput, string] => [
      { slos: { convergence: { objective } } },
      `Expected \`slos.convergence.objective\` to be a ratio between 0 and 1, got \`${JSON.stringify(objective)}\` (number)`,
    ]),
    [
      { slos: { convergenceLatency: { period: '30 days' } } },
      'Expected `slos.convergenceLatency.period` to be a Prometheus duration such as `5m` or `1h30m` (units from y to ms, each once, largest first, more than zero), got `30 days` (string)',
    ],
    [
      { slos: { convergence: { goodReasons: ['converged', 'agreed'] } } },
      'Expected `slos.convergence.goodReasons` to hold reasons the telemetry reports (built-in: `converged`, `consensus`, `max_dispatches`, `timeout`, `stopped`, `queue_exhausted`, `aborted`, `deadline`, `error`, `queue_overflow`, `token_budget`; or one of `customReasons`), got `agreed` (string)',
    ],
    [
      { slos: { convergence: { goodReasons: [] } } },
      'Expected `slos.convergence.goodReasons` to be an array of distinct reasons, at least one, got `[]` (object)',
    ],
    [
      { slos: { convergence: { excludedReasons: ['aborted', 'converged'] } } },
      'Expected `slos.convergence.excludedReasons` to be reasons that are not also good ones, got `converged` (string)',
    ],
    [
      { customReasons: ['Agreed'] },
      'Expected `customReasons` to be an array of distinct snake_case reasons of 1-40 characters, none of them built in, got `["Agreed"]` (object)',
    ],
    [
      { customReasons: ['converged'] },
      'Expected `customReasons` to be an array of distinct snake_case reasons of 1-40 characters, none of them built in, got `["converged"]` (object)',
    ],
    [
      { slos: { convergenceLatency: { thresholdSeconds: 3 } } },
      'Expected `slos.convergenceLatency.thresholdSeconds` to be a bucket boundary of orchestrator_conversation_duration_seconds (`conversationDurationBuckets`: 0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600), got `3` (number)',
    ],
    [
      { conversationDurationBuckets: [1, 5, 2.5] },
      'Expected `conversationDurationBuckets` to be an increasing array of positive numbers of seconds, got `[1,5,2.5]` (object)',
    ],
    [
      {
        burnRateAlerts: [
          { severity: 'critical', burnRate: 14.4, longWindow: '5m', shortWindow: '1h', for: '2m' },
        ],
      },
      'Expected `burnRateAlerts[0].shortWindow` to be shorter than its `longWindow` (5m), got `1h` (string)',
    ],
    [
      {
        burnRateAlerts: [
          { severity: 'warning', burnRate: 1, longWindow: '60d', shortWindow: '6h', for: '3h' },
        ],
      },
      'Expected `burnRateAlerts[0].longWindow` to be within the period of `slos.convergence` (30d), got `60d` (string)',
    ],
    [
      { slos: { convergence: { objective: 0.9 } } },
      'Expected `burnRateAlerts[0].burnRate` to be below 1 / the error budget of `slos.convergence` (1 / 0.1 = 10): a higher burn would need more than every event to be bad, got `14.4` (number)',
    ],
    [
      {
        burnRateAlerts: [
          { severity: 'page', burnRate: 14.4, longWindow: '1h', shortWindow: '5m', for: '2m' },
        ],
      } as unknown as OpsConfigInput,
      'Expected `burnRateAlerts[0].severity` to be `critical` or `warning`, got `page` (string)',
    ],
    [
      {
        burnRateAlerts: [
          { severity: 'warning', burnRate: 1, longWindow: '1h', shortWindow: '5m', four: '2m' },
        ],
      } as unknown as OpsConfigInput,
      'Unknown option `burnRateAlerts[0].four`; expected one of `burnRateAlerts[0].severity`, `burnRateAlerts[0].burnRate`, `burnRateAlerts[0].longWindow`, `burnRateAlerts[0].shortWindow`, `burnRateAlerts[0].for`',
    ],
    [
      { tokenBurn: { tokensPerSecond: 0 } },
      'Expected `tokenBurn.tokensPerSecond` to be a positive number, got `0` (number)',
    ],
    [
      {
        prices: {
          currency: 'dollars',
          models: { 'gpt-4o': { inputPerMillion: 2.5, outputPerMillion: 10 } },
        },
      },
      'Expected `prices.currency` to be an ISO 4217 currency code such as `USD`, got `dollars` (string)',
    ],
    [
      { prices: { currency: 'USD', models: {} } },
      'Expected `prices.models` to be an object with at least one model, got `{}` (object)',
    ],
    [
      {
        prices: {
          currency: 'USD',
          models: { 'gpt 4o': { inputPerMillion: 2.5, outputPerMillion: 10 } },
        },
      },
      'Expected `prices.models` to be keyed by model names as the telemetry reports them (1-64 letters, digits, `_`, `.`, `:` or `-`), got `gpt 4o` (string)',
    ],
    [
      {
        prices: { currency: 'USD', models: { 'gpt-4o': { inputPerMillion: 2.5 } } },
      } as unknown as OpsConfigInput,
      'Expected `prices.models["gpt-4o"]` to have exactly `inputPerMillion` and `outputPerMillion`, got `{"inputPerMillion":2.5}` (object)',
    ],
    [
      {
        prices: {
          currency: 'USD',
          models: { 'gpt-4o': { inputPerMillion: -1, outputPerMillion: 10 } },
        },
      },
      'Expected `prices.models["gpt-4o"].inputPerMillion` to be a non-negative number (the price of a million tokens), got `-1` (number)',
    ],
    [
      { burnRateAlerts: [] },
      'Expected `burnRateAlerts` to be a non-empty array, got `[]` (object)',
    ],
    [
      { targetDown: { for: '' } },
      'Expected `targetDown.for` to be a Prometheus duration such as `5m` or `1h30m` (units from y to ms, each once, largest first, more than zero), got `` (string)',
    ],
    [
      { excludedEndings: { share: 1 } },
      'Expected `excludedEndings.share` to be a ratio between 0 and 1, got `1` (number)',
    ],
    [
      { wedgedConversations: { window: '1 hour' } },
      'Expected `wedgedConversations.window` to be a Prometheus duration such as `5m` or `1h30m` (units from y to ms, each once, largest first, more than zero), got `1 hour` (string)',
    ],
    [
      { leaseConflicts: { perSecond: -0.1 } },
      'Expected `leaseConflicts.perSecond` to be a non-negative number of conflicts per second, got `-0.1` (number)',
    ],
    [
      { suspendedConversations: { maxAge: '0d' } },
      'Expected `suspendedConversations.maxAge` to be a Prometheus duration such as `5m` or `1h30m` (units from y to ms, each once, largest first, more than zero), got `0d` (string)',
    ],
    [
      { queueWait: { maxWait: 300 } } as unknown as OpsConfigInput,
      'Expected `queueWait.maxWait` to be a Prometheus duration such as `5m` or `1h30m` (units from y to ms, each once, largest first, more than zero), got `300` (number)',
    ],
    [
      { recoveryBacklog: { for: '10 minutes' } },
      'Expected `recoveryBacklog.for` to be a Prometheus duration such as `5m` or `1h30m` (units from y to ms, each once, largest first, more than zero), got `10 minutes` (string)',
    ],
    [
      { runbookUrl: 'https://example.com/runbook.md#top' },
      'Expected `runbookUrl` to be an http(s) URL without a #fragment, got `https://example.com/runbook.md#top` (string)',
    ],
    [
      { kubernetes: { replicas: 0 } },
      'Expected `kubernetes.replicas` to be a positive integer, got `0` (number)',
    ],
    [
      { kubernetes: { namespace: 'Conversation_Orchestrator' } },
      'Expected `kubernetes.namespace` to be a DNS label, got `Conversation_Orchestrator` (string)',
    ],
  ])('refuses %j', (input, message) => {
    expect(() => defineOpsConfig(input)).toThrow(message);
  });

  it('accepts what Prometheus accepts: compound durations largest unit first, regexes, other jobs', () => {
    const config = defineOpsConfig({
      selector:
        'job=~"(?i)Conversation-Orch.*",env!="dev",team!~"qa|[[:digit:]]+",service=~"conversation-.+"',
      rateWindow: '1h30m',
      dispatchWindow: '90s',
      stalledConversations: { for: '1d12h30m15s500ms' },
      jobDown: { for: '1m' },
    });
    expect([config.rateWindow, config.stalledConversations.for]).toEqual([
      '1h30m',
      '1d12h30m15s500ms',
    ]);
    // ... and Prometheus agrees: the rules generated from it pass promtool.
    const dir = mkdtempSync(join(tmpdir(), 'orchestrator-ops-accepted-'));
    try {
      const file = join(dir, 'rules.yml');
      writeFileSync(file, renderOps(config).get('prometheus/rules/orchestrator.rules.yml') ?? '');
      const check = spawnSync('promtool', ['check', 'rules', file], { encoding: 'utf8' });
      expect(check.stdout + check.stderr).toContain('SUCCESS: 72 rules found');
      expect(check.status).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('says durations the way the alert descriptions do', () => {
    expect(['5m', '1m', '20s', '1h', '1h30m'].map(humanDuration)).toEqual([
      '5 minutes',
      '1 minute',
      '20 seconds',
      '1 hour',
      '1h30m',
    ]);
  });
});

describe('a variant for your own config, with one command', () => {
  const variant: OpsConfigInput = {
    selector: 'job="agents",env="prod"',
    groupLabels: ['namespace', 'job'],
    rateWindow: '10m',
    slos: {
      convergence: { objective: 0.99, goodReasons: ['converged', 'agreed'], excludedReasons: [] },
      convergenceLatency: { objective: 0.995, thresholdSeconds: 30, period: '28d' },
    },
    customReasons: ['agreed'],
    runbookUrl: 'https://wiki.example.com/agents/runbook',
    kubernetes: { namespace: 'agents', replicas: 5, image: 'registry.example.com/agents:1.2.3' },
  };
  let dir: string;
  let out: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'orchestrator-ops-variant-'));
    out = join(dir, 'out');
    writeFileSync(join(dir, 'my-ops.ts'), `export default ${JSON.stringify(variant, null, 2)};\n`);
    await run(
      'npm',
      ['run', '--silent', 'ops', '--', '--config', join(dir, 'my-ops.ts'), '--out', out],
      {
        cwd: ROOT,
      },
    );
  }, 60_000);

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const read = (path: string) => readFileSync(join(out, path), 'utf8');
  const rulesOf = (text: string): Rule[] =>
    (parse(text) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

  it('writes exactly the files the repository commits, for the variant', () => {
    const expected = new Map([
      ...renderOps(defineOpsConfig(variant)),
      ...renderCollector(defineOpsConfig(variant)),
    ]);
    const written = readdirSync(out, { recursive: true, encoding: 'utf8' })
      .filter((f) => /\.(json|ya?ml)$/.test(f))
      .sort();
    expect(written).toEqual([...expected.keys()].sort());
    for (const [path, content] of expected) expect(read(path), path).toBe(content);
  });

  it('writes rules promtool accepts, where every selection carries the selector and the thresholds are the config', () => {
    const file = join(out, 'prometheus/rules/orchestrator.rules.yml');
    const check = spawnSync('promtool', ['check', 'rules', file], { encoding: 'utf8' });
    expect(check.stdout).toMatch(/SUCCESS: 75 rules found/);
    const rules = rulesOf(read('prometheus/rules/orchestrator.rules.yml'));
    for (const rule of rules.filter((r) => r.record)) {
      expect(rule.record).toMatch(/^namespace_job_orchestrator(_\w+)?:/);
      // Raw metrics are selected with the selector; recorded ones were already.
      for (const name of metricNamesIn(rule.expr).filter((n) => n.startsWith('orchestrator_'))) {
        expect(rule.expr, rule.record).toContain(`${name}{job="agents",env="prod"`);
      }
    }
    const alerts = rules.filter((r) => r.alert);
    const burns = (alert: string) => alerts.filter((r) => r.alert === alert);
    // One rule per SLO and window pair, each with the variant's objective in its thresholds.
    expect(burns('OrchestratorConvergenceSLOBurn').map((r) => r.labels)).toEqual([
      { severity: 'critical', slo: 'convergence', long_window: '1h', short_window: '5m' },
      { severity: 'critical', slo: 'convergence', long_window: '6h', short_window: '30m' },
      { severity: 'warning', slo: 'convergence', long_window: '1d', short_window: '2h' },
      { severity: 'warning', slo: 'convergence', long_window: '3d', short_window: '6h' },
    ]);
    expect(burns('OrchestratorConvergenceSLOBurn')[0]?.expr).toContain(
      'namespace_job_orchestrator:orchestrator_slo_errors:ratio_rate1h{slo="convergence"} / 0.01\n  > 14.4',
    );
    const latency = burns('OrchestratorConvergenceLatencySLOBurn');
    expect(latency[1]?.expr).toContain(
      'namespace_job_orchestrator:orchestrator_slo_errors:ratio_rate6h{slo="convergence_latency"} / 0.005\n  > 6',
    );
    expect(latency[0]?.annotations?.description).toContain(
      '(objective: 99.5% of converged conversations converge within 30s, over 28 days)',
    );
    const recorded = Object.fromEntries(
      rules
        .filter((r) => r.record && r.labels?.slo)
        .map((r) => [`${r.record} ${r.labels?.slo}`, r.expr]),
    );
    // The user's own good reason counts, nothing is excluded, the threshold is the 30s bucket,
    // and each SLO's period is recorded (28d for latency, 30d for convergence).
    expect(
      recorded['namespace_job_orchestrator:orchestrator_slo_errors:ratio_rate30d convergence'],
    ).toContain('reason!~"converged|agreed"}[30d]');
    expect(recorded['namespace_job_orchestrator:orchestrator_slo_events:rate1h convergence']).toBe(
      'sum by (namespace, job, orchestrator) (rate(orchestrator_conversations_ended_total{job="agents",env="prod"}[1h]))\n',
    );
    expect(
      recorded[
        'namespace_job_orchestrator:orchestrator_slo_errors:ratio_rate28d convergence_latency'
      ],
    ).toContain('reason=~"converged|agreed",le=~"30(\\\\.0)?"}[28d]');
    const byName: Record<string, Rule> = Object.fromEntries(alerts.map((r) => [r.alert, r]));
    expect(byName.OrchestratorTargetDown?.expr).toContain('up{job="agents",env="prod"} == 0');
    for (const rule of alerts) {
      expect(rule.annotations?.runbook_url).toBe(
        `https://wiki.example.com/agents/runbook#${rule.alert?.toLowerCase()}`,
      );
    }
  });

  it('writes dashboards whose every raw metric query carries the selector', () => {
    const queries: DashboardQuery[] = dashboardQueries(join(out, 'grafana/dashboards'));
    // As many as the committed dashboards, plus one: the convergence SLO's burn-rate panel shows
    // every recorded window shorter than its 30d period, and the variant records 28d (the
    // latency SLO's period) too.
    expect(queries.length).toBe(dashboardQueries().length + 1);
    for (const q of queries) {
      for (const name of metricNamesIn(q.expr).filter((n) => /^orchestrator_\w+$/.test(n))) {
        expect(q.expr, `${q.dashboard} / ${q.panel}`).toContain(`${name}{job="agents",env="prod"`);
      }
    }
  });

  it('writes manifests in the namespace, with the replicas and image, and the same rules', () => {
    const deployment = parse(read('kubernetes/deployment.yaml')) as {
      metadata: { namespace: string };
      spec: { replicas: number; template: { spec: { containers: { image: string }[] } } };
    };
    expect(deployment.metadata.namespace).toBe('agents');
    expect(deployment.spec.replicas).toBe(5);
    expect(deployment.spec.template.spec.containers[0]?.image).toBe(
      'registry.example.com/agents:1.2.3',
    );
    const rule = parse(read('kubernetes/prometheusrule.yaml')) as { spec: { groups: unknown } };
    expect(rule.spec.groups).toEqual(
      (parse(read('prometheus/rules/orchestrator.rules.yml')) as { groups: unknown }).groups,
    );
  });

  it('writes a ServiceMonitor whose targets carry the labels the selector selects (promtool evaluates the rules on them)', () => {
    const service = parse(read('kubernetes/service.yaml')) as {
      metadata: { name: string; namespace: string };
    };
    const monitor = parse(read('kubernetes/servicemonitor.yaml')) as {
      spec: {
        jobLabel?: string;
        targetLabels?: string[];
        endpoints: {
          port: string;
          relabelings?: { action: string; targetLabel: string; replacement: string }[];
        }[];
      };
    };
    const deployment = parse(read('kubernetes/deployment.yaml')) as {
      spec: { template: { spec: { containers: { name: string }[] } } };
    };
    expect(monitor.spec.jobLabel).toBeUndefined();
    expect(monitor.spec.targetLabels).toBeUndefined();
    const [endpoint] = monitor.spec.endpoints;
    // The target labels the Prometheus Operator gives a pod behind the Service: `job` after the
    // Service (no jobLabel), then the endpoint's relabelings, applied after its own.
    const labels: Record<string, string> = {
      job: service.metadata.name,
      namespace: service.metadata.namespace,
      service: service.metadata.name,
      endpoint: endpoint?.port as string,
      container: deployment.spec.template.spec.containers[0]?.name as string,
      pod: 'conversation-orchestrator-7d9f-abcde',
      instance: '10.1.2.3:9464',
    };
    for (const r of endpoint?.relabelings ?? []) {
      expect(r.action).toBe('replace');
      labels[r.targetLabel] = r.replacement;
    }
    expect(labels).toMatchObject({ job: 'agents', env: 'prod', namespace: 'agents' });
    const series = `up{${Object.entries(labels)
      .map(([k, v]) => `${k}="${v}"`)
      .join(',')}}`;
    const test = {
      rule_files: [join(out, 'prometheus/rules/orchestrator.rules.yml')],
      evaluation_interval: '1m',
      tests: [
        {
          interval: '1m',
          input_series: [{ series, values: '0x10' }],
          alert_rule_test: [
            {
              eval_time: '5m',
              alertname: 'OrchestratorTargetDown',
              exp_alerts: [
                {
                  exp_labels: { ...labels, severity: 'warning' },
                  exp_annotations: {
                    summary: 'Prometheus cannot scrape an instance of the conversation service.',
                    description:
                      'The scrape of 10.1.2.3:9464 (job agents) has failed for 2 minutes: the instance is down or unreachable, and its conversations are unobserved.',
                    runbook_url: 'https://wiki.example.com/agents/runbook#orchestratortargetdown',
                  },
                },
              ],
            },
            {
              eval_time: '5m',
              alertname: 'OrchestratorJobDown',
              exp_alerts: [
                {
                  exp_labels: { job: 'agents', severity: 'critical' },
                  exp_annotations: {
                    summary: 'No instance of the conversation service can be scraped.',
                    description:
                      "Prometheus has scraped no instance of job agents for 2 minutes: every instance is down or unreachable, or service discovery finds none. The job's other alerts are inhibited meanwhile.",
                    runbook_url: 'https://wiki.example.com/agents/runbook#orchestratorjobdown',
                  },
                },
              ],
            },
          ],
        },
      ],
    };
    const file = join(dir, 'servicemonitor-targets.test.yml');
    writeFileSync(file, JSON.stringify(test));
    const r = spawnSync('promtool', ['test', 'rules', file], { encoding: 'utf8' });
    expect(r.stdout + r.stderr).toContain('SUCCESS');
    expect(r.status, r.stdout + r.stderr).toBe(0);
  });

  it.each([
    [
      'selector',
      `'job=~"a.*|("'`,
      'Expected `selector` matcher `job=~"a.*|("` to be a regular expression that compiles',
    ],
    ['rateWindow', '"0s"', 'Expected `rateWindow` to be a Prometheus duration'],
    [
      'slos',
      '{ convergenceLatency: { thresholdSeconds: 3 } }',
      'Expected `slos.convergenceLatency.thresholdSeconds` to be a bucket boundary of orchestrator_conversation_duration_seconds',
    ],
    [
      'burnRateAlerts',
      '[{ severity: "critical", burnRate: 14.4, longWindow: "5m", shortWindow: "1h", for: "2m" }]',
      'Expected `burnRateAlerts[0].shortWindow` to be shorter than its `longWindow` (5m), got `1h` (string)',
    ],
    [
      'customReasons',
      '["agreed"], slos: { convergence: { objective: 1 } }',
      'Expected `slos.convergence.objective` to be a ratio between 0 and 1, got `1` (number)',
    ],
    ['dispatchWindow', '"5m5m"', 'Expected `dispatchWindow` to be a Prometheus duration'],
    [
      'stalledConversations',
      '{ for: "1m1h" }',
      'Expected `stalledConversations.for` to be a Prometheus duration',
    ],
    [
      'rateWindow',
      '"soon"',
      'Expected `rateWindow` to be a Prometheus duration such as `5m` or `1h30m` (units from y to ms, each once, largest first, more than zero), got `soon` (string)',
    ],
  ])(
    'refuses a config file with %s: %s, with the reason and exit code 2, writing nothing',
    (key, value, message) => {
      const bad = join(dir, `bad-${key}.ts`);
      writeFileSync(bad, `export default { ${key}: ${value} };\n`);
      const badOut = join(dir, `bad-out-${key}`);
      const r = spawnSync(
        'npm',
        ['run', '--silent', 'ops', '--', '--config', bad, '--out', badOut],
        {
          cwd: ROOT,
          encoding: 'utf8',
        },
      );
      expect(r.stderr).toContain(message);
      expect(r.status).toBe(2);
      expect(r.stdout).toBe('');
      expect(() => readdirSync(badOut)).toThrow(/ENOENT/);
    },
  );
});
