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
import { DEFAULT_OPS_CONFIG, defineOpsConfig, type OpsConfigInput } from '../ops/config.ts';
import { renderOps } from '../ops/render.ts';
import { humanDuration } from '../ops/rules.ts';
import { type DashboardQuery, dashboardQueries, metricNamesIn, type Rule } from './helpers/ops.ts';

const run = promisify(execFile);
const ROOT = resolve(import.meta.dirname, '..');

describe('defineOpsConfig', () => {
  it('returns the defaults when given nothing, and merges nested values', () => {
    expect(defineOpsConfig()).toEqual(DEFAULT_OPS_CONFIG);
    const config = defineOpsConfig({ slowConvergence: { p95Seconds: 30 } });
    expect(config.slowConvergence).toEqual({ p95Seconds: 30, for: '10m' });
    expect(config.kubernetes).toEqual(DEFAULT_OPS_CONFIG.kubernetes);
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
      'Expected `selector` to be matchers on target labels only (it selects `up{…}` too, which has no `__name__`, `orchestrator`, `responder`, `reason`, `le`, `quantile`), got `orchestrator="fx_desks"` (string)',
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
      'Expected `groupLabels` to be an array of distinct label names other than `orchestrator`, `responder`, `reason`, `le`, `quantile`, got `["orchestrator"]` (object)',
    ],
    [
      { groupLabels: ['job', 'job'] },
      'Expected `groupLabels` to be an array of distinct label names other than `orchestrator`, `responder`, `reason`, `le`, `quantile`, got `["job","job"]` (object)',
    ],
    [
      { rateWindw: '10m' } as OpsConfigInput,
      'Unknown option `rateWindw`; expected one of `selector`, `groupLabels`, `rateWindow`',
    ],
    [
      { slowConvergence: { p95: 30 } } as OpsConfigInput,
      'Unknown option `slowConvergence.p95`; expected one of `slowConvergence.p95Seconds`, `slowConvergence.for`',
    ],
    [
      { kubernetes: 'prod' } as unknown as OpsConfigInput,
      'Expected `kubernetes` to be an object, got `prod` (string)',
    ],
    [
      { rateWindow: '5 minutes' },
      'Expected `rateWindow` to be a Prometheus duration such as `5m` or `1h30m` (units from y to ms, each once, largest first, more than zero), got `5 minutes` (string)',
    ],
    [
      { slowConvergence: { p95Seconds: -1 } },
      'Expected `slowConvergence.p95Seconds` to be a positive number of seconds, got `-1` (number)',
    ],
    [
      { conversationErrors: { ratio: 10 } },
      'Expected `conversationErrors.ratio` to be a ratio between 0 and 1, got `10` (number)',
    ],
    [
      { targetDown: { for: '' } },
      'Expected `targetDown.for` to be a Prometheus duration such as `5m` or `1h30m` (units from y to ms, each once, largest first, more than zero), got `` (string)',
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
      expect(check.stdout + check.stderr).toContain('SUCCESS: 22 rules found');
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
    slowConvergence: { p95Seconds: 30, for: '15m' },
    conversationErrors: { ratio: 0.02 },
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
    const expected = renderOps(defineOpsConfig(variant));
    const written = readdirSync(out, { recursive: true, encoding: 'utf8' })
      .filter((f) => /\.(json|ya?ml)$/.test(f))
      .sort();
    expect(written).toEqual([...expected.keys()].sort());
    for (const [path, content] of expected) expect(read(path), path).toBe(content);
  });

  it('writes rules promtool accepts, where every selection carries the selector and the thresholds are the config', () => {
    const file = join(out, 'prometheus/rules/orchestrator.rules.yml');
    const check = spawnSync('promtool', ['check', 'rules', file], { encoding: 'utf8' });
    expect(check.stdout).toMatch(/SUCCESS: 22 rules found/);
    const rules = rulesOf(read('prometheus/rules/orchestrator.rules.yml'));
    for (const rule of rules.filter((r) => r.record)) {
      expect(rule.record).toMatch(/^namespace_job_orchestrator(_\w+)?:/);
      // Raw metrics are selected with the selector; recorded ones were already.
      for (const name of metricNamesIn(rule.expr).filter((n) => n.startsWith('orchestrator_'))) {
        expect(rule.expr, rule.record).toContain(`${name}{job="agents",env="prod"`);
      }
    }
    const byName: Record<string, Rule> = Object.fromEntries(
      rules.filter((r) => r.alert).map((r) => [r.alert, r]),
    );
    expect(byName.OrchestratorSlowConvergence?.expr).toContain('> 30 # slowConvergence.p95Seconds');
    expect(byName.OrchestratorSlowConvergence?.for).toBe('15m');
    expect(byName.OrchestratorSlowConvergence?.annotations?.description).toContain(
      'over the last 10 minutes (threshold 30s)',
    );
    expect(byName.OrchestratorConversationErrors?.expr).toContain(
      '> 0.02 # conversationErrors.ratio',
    );
    expect(byName.OrchestratorTargetDown?.expr).toContain('up{job="agents",env="prod"} == 0');
    for (const rule of Object.values(byName)) {
      expect(rule.annotations?.runbook_url).toBe(
        `https://wiki.example.com/agents/runbook#${rule.alert?.toLowerCase()}`,
      );
    }
  });

  it('writes dashboards whose every raw metric query carries the selector', () => {
    const queries: DashboardQuery[] = dashboardQueries(join(out, 'grafana/dashboards'));
    expect(queries.length).toBe(dashboardQueries().length);
    expect(queries.length).toBeGreaterThan(15);
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
