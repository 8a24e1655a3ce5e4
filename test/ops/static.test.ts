import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { durationSeconds } from '../../ops/check.ts';
import { DEFAULT_OPS_CONFIG } from '../../ops/config.ts';
import { renderOps } from '../../ops/render.ts';
import { METRIC_CONVERSATION_TOKENS, METRIC_TOKENS } from '../../ops/usage.ts';
import { WORKER_DRAIN_MS } from '../../service/fleet/worker-names.ts';
import { semconv } from '../../src/observability/index.ts';
import {
  dashboardFiles,
  dashboardQueries,
  exposedSeriesNames,
  metricNamesIn,
  ruleFiles,
  rules,
  variableSelector,
} from '../helpers/ops.ts';

/** Every query goes to the dashboard's datasource variable (Grafana's `${datasource}`). */
const DATASOURCE = { type: 'prometheus', uid: ['$', '{datasource}'].join('') };
const runbook = readFileSync('prometheus/runbook.md', 'utf8');
const RUNBOOK_URL = `${DEFAULT_OPS_CONFIG.runbookUrl}#`;
/** The metrics of BullMQ queues, labelled by `queue`, not `orchestrator`. */
const QUEUE_METRICS = [
  semconv.BULLMQ_METRIC_JOB_COUNT,
  semconv.METRIC_QUEUE_JOB_WAIT,
  semconv.METRIC_QUEUE_OLDEST_WAITING,
  semconv.METRIC_QUEUE_JOBS_STALLED,
];
const TEST_FILES = readdirSync('prometheus/tests')
  .filter((f) => f.endsWith('.test.yml'))
  .map((f) => `prometheus/tests/${f}`);

describe('prometheus rules', () => {
  it('pass promtool check rules cleanly', () => {
    for (const file of ruleFiles()) {
      const r = spawnSync('promtool', ['check', 'rules', file], { encoding: 'utf8' });
      expect(r.status).toBe(0);
      expect(r.stdout).toMatch(/SUCCESS: \d+ rules found/);
      expect(r.stderr).toBe('');
    }
  });

  it('pass their promtool unit tests', () => {
    expect(TEST_FILES.sort()).toEqual([
      'prometheus/tests/durable.test.yml',
      'prometheus/tests/endings.test.yml',
      'prometheus/tests/orchestrator.test.yml',
      'prometheus/tests/slo-long.test.yml',
      'prometheus/tests/slo.test.yml',
      'prometheus/tests/usage.test.yml',
    ]);
    const r = spawnSync('promtool', ['test', 'rules', ...TEST_FILES], { encoding: 'utf8' });
    expect(r.stdout + r.stderr).not.toContain('FAILED');
    expect(r.stdout.match(/SUCCESS/g)).toHaveLength(TEST_FILES.length);
    expect(r.status).toBe(0);
  }, 180_000);

  it('have a unit test case for every alert, firing and quiet', () => {
    const cases = TEST_FILES.flatMap((file) =>
      (
        parse(readFileSync(file, 'utf8')) as {
          tests: { alert_rule_test?: { alertname: string; exp_alerts: unknown[] }[] }[];
        }
      ).tests.flatMap((t) => t.alert_rule_test ?? []),
    );
    for (const alert of rules().filter((r) => r.alert)) {
      const mine = cases.filter((c) => c.alertname === alert.alert);
      expect(
        mine.some((c) => c.exp_alerts.length > 0),
        `${alert.alert} firing`,
      ).toBe(true);
      expect(
        mine.some((c) => c.exp_alerts.length === 0),
        `${alert.alert} quiet`,
      ).toBe(true);
    }
  });

  it('name recording rules level:metric:operations and alerts Orchestrator*, with for, severity, summary, description and a runbook anchor', () => {
    for (const rule of rules()) {
      if (rule.record) {
        expect(rule.record).toMatch(/^[a-z_]+:[a-z_]+:[a-z0-9_]+$/);
        continue;
      }
      expect(rule.alert).toMatch(/^Orchestrator[A-Z][A-Za-z]+$/);
      expect(rule.for).toMatch(/^\d+[mh]$/);
      expect(['warning', 'critical']).toContain(rule.labels?.severity);
      expect(rule.annotations?.summary).toMatch(/^[A-Z][^{}]+\.$/);
      expect(rule.annotations?.description).toContain('{{ $labels.');
      const url = rule.annotations?.runbook_url ?? '';
      expect(url.startsWith(RUNBOOK_URL)).toBe(true);
      const anchor = url.slice(RUNBOOK_URL.length);
      expect(anchor).toBe((rule.alert as string).toLowerCase());
      expect(runbook).toContain(`\n## ${rule.alert}\n`);
    }
  });

  it('have a runbook whose sections are the two guides, then exactly the alerts', () => {
    const sections = [...runbook.matchAll(/^## (.+)$/gm)].map((m) => m[1]);
    expect(sections.slice(0, 2)).toEqual(['Reading the SLOs', 'Alerts the SLOs replaced']);
    expect(sections.slice(2).sort()).toEqual(
      [...new Set(rules().flatMap((r) => (r.alert ? [r.alert] : [])))].sort(),
    );
  });

  it('page and ticket on each SLO with the default objectives, burn rates and windows', () => {
    const burns = rules()
      .filter((r) => r.alert?.endsWith('SLOBurn'))
      .map((r) => {
        const [long, short] = [
          ...r.expr.matchAll(/ratio_rate(\w+)\{slo="(\w+)"\} \/ ([\d.]+)\n {2}> ([\d.]+)/g),
        ];
        return [
          r.alert,
          r.labels?.severity,
          r.labels?.slo,
          `${long?.[1]}+${short?.[1]}`,
          `budget ${long?.[3]}`,
          `burn ${long?.[4]}`,
          short?.[4] === long?.[4] && short?.[2] === r.labels?.slo,
        ].join(' ');
      });
    expect(burns).toEqual([
      'OrchestratorConvergenceSLOBurn critical convergence 1h+5m budget 0.05 burn 14.4 true',
      'OrchestratorConvergenceSLOBurn critical convergence 6h+30m budget 0.05 burn 6 true',
      'OrchestratorConvergenceSLOBurn warning convergence 1d+2h budget 0.05 burn 3 true',
      'OrchestratorConvergenceSLOBurn warning convergence 3d+6h budget 0.05 burn 1 true',
      'OrchestratorConvergenceLatencySLOBurn critical convergence_latency 1h+5m budget 0.01 burn 14.4 true',
      'OrchestratorConvergenceLatencySLOBurn critical convergence_latency 6h+30m budget 0.01 burn 6 true',
      'OrchestratorConvergenceLatencySLOBurn warning convergence_latency 1d+2h budget 0.01 burn 3 true',
      'OrchestratorConvergenceLatencySLOBurn warning convergence_latency 3d+6h budget 0.01 burn 1 true',
    ]);
    const windows = new Set(
      rules().flatMap((r) =>
        r.record?.includes(':orchestrator_slo_') ? [r.record.split(':')[2]] : [],
      ),
    );
    expect([...windows]).toEqual([
      'ratio_rate5m',
      'rate5m',
      'ratio_rate30m',
      'rate30m',
      'ratio_rate1h',
      'rate1h',
      'ratio_rate2h',
      'rate2h',
      'ratio_rate6h',
      'rate6h',
      'ratio_rate1d',
      'rate1d',
      'ratio_rate3d',
      'rate3d',
      'ratio_rate30d',
      'rate30d',
    ]);
  });
});

describe('names in dashboards and rules', () => {
  const exposed = exposedSeriesNames();

  it('use the usage metric names the contract fixes', () => {
    expect([METRIC_TOKENS, METRIC_CONVERSATION_TOKENS]).toEqual([
      'orchestrator_tokens_total',
      'orchestrator_conversation_tokens',
    ]);
  });
  const recorded = new Set(rules().flatMap((r) => (r.record ? [r.record] : [])));
  const builtIn = new Set(['up', 'ALERTS']);

  it('name only metrics the service exposes, recording rules defined here, or up/ALERTS', () => {
    const sources = [
      ...dashboardQueries().map((q) => ({ where: `${q.dashboard} / ${q.panel}`, expr: q.expr })),
      ...rules().map((r) => ({ where: r.record ?? r.alert ?? '', expr: r.expr })),
    ];
    const unknown: string[] = [];
    for (const { where, expr } of sources) {
      for (const name of metricNamesIn(variableSelector(expr) ?? expr)) {
        if (!exposed.has(name) && !recorded.has(name) && !builtIn.has(name))
          unknown.push(`${where}: ${name}`);
      }
    }
    expect(unknown).toEqual([]);
  });

  it('would catch a misspelt metric', () => {
    expect(
      metricNamesIn('sum(rate(orchestrator_dispatchez_total{orchestrator=~".*"}[1m]))'),
    ).toEqual(['orchestrator_dispatchez_total']);
    expect(exposed.has('orchestrator_dispatchez_total')).toBe(false);
  });
});

describe('grafana', () => {
  it('are typed with the foundation SDK built for the Grafana version the compose stack runs', () => {
    const sdk = JSON.parse(
      readFileSync('node_modules/@grafana/grafana-foundation-sdk/package.json', 'utf8'),
    ) as { version: string };
    const compose = parse(readFileSync('docker-compose.yml', 'utf8')) as {
      services: { grafana: { image: string } };
    };
    const grafana = compose.services.grafana.image.split(':')[1] ?? '';
    // 11.6.0-cogv0.0.x.… is the SDK generated from Grafana 11.6's schema.
    expect(sdk.version.split('-')[0]).toBe(grafana);
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as {
      devDependencies: Record<string, string>;
    };
    expect(pkg.devDependencies['@grafana/grafana-foundation-sdk']).toBe(sdk.version);
  });

  it('every generated file is what npm run ops writes for the default config', () => {
    const generated = renderOps(DEFAULT_OPS_CONFIG);
    for (const [path, content] of generated) {
      expect(readFileSync(path, 'utf8'), `${path} is stale: run npm run ops`).toBe(content);
    }
    expect(dashboardFiles().sort()).toEqual(
      [...generated.keys()].filter((p) => p.startsWith('grafana/dashboards/')).sort(),
    );
  });

  it('the README and docs/ops.md say how many dashboards ship, and docs/ops.md names each file', () => {
    const files = dashboardFiles()
      .map((f) => f.slice('grafana/dashboards/'.length))
      .sort();
    const words = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', 'ten'];
    const count = words[files.length - 1];
    const numberOfDashboards = new RegExp(
      `\\b(${words.join('|')})\\s+(?:Grafana\\s+)?dashboards\\b`,
      'gi',
    );
    for (const page of ['README.md', 'docs/ops.md']) {
      const said = [...readFileSync(page, 'utf8').matchAll(numberOfDashboards)].map((m) =>
        (m[1] as string).toLowerCase(),
      );
      expect(said.length, page).toBeGreaterThan(0);
      expect(said, page).toEqual(said.map(() => count));
    }
    const row = readFileSync('docs/ops.md', 'utf8')
      .split('\n')
      .find((l) => l.startsWith('| `grafana/dashboards/'));
    const named = [
      ...(row?.split('|')[1] ?? '').matchAll(/`(?:grafana\/dashboards\/)?([\w-]+\.json)`/g),
    ];
    expect(named.map((m) => m[1]).sort()).toEqual(files);
  });

  it('dashboards have fixed uids, a datasource variable, and every query uses it', () => {
    const uids = dashboardFiles().map((f) => {
      const d = JSON.parse(readFileSync(f, 'utf8'));
      expect(d.templating.list[0]).toMatchObject({
        name: 'datasource',
        type: 'datasource',
        query: 'prometheus',
      });
      const names = d.templating.list.map((v: { name: string }) => v.name);
      expect(names).toContain('orchestrator');
      // The SLO dashboard reads rules recorded over every replica: no instance to choose.
      if (d.uid !== 'orchestrator-slo') expect(names).toContain('instance');
      for (const panel of d.panels) {
        expect(panel.datasource).toEqual(DATASOURCE);
        for (const t of panel.targets) expect(t.datasource).toEqual(DATASOURCE);
      }
      return d.uid;
    });
    expect(uids.sort()).toEqual([
      'orchestrator-durability',
      'orchestrator-overview',
      'orchestrator-responders',
      'orchestrator-slo',
      'orchestrator-usage',
    ]);
  });

  it('every dashboard links every other one (keeping the time range and variables)', () => {
    const dashboards = dashboardFiles().map((f) => JSON.parse(readFileSync(f, 'utf8')));
    const uids = dashboards.map((d) => d.uid as string);
    for (const d of dashboards) {
      const links = d.links as { url: string; keepTime: boolean; includeVars: boolean }[];
      expect(links.map((l) => l.url).sort(), d.uid).toEqual(
        uids
          .filter((u) => u !== d.uid)
          .map((u) => `/d/${u}`)
          .sort(),
      );
      for (const l of links) expect(l).toMatchObject({ keepTime: true, includeVars: true });
    }
  });

  it("every panel query honours the dashboard's variables and the job selector", () => {
    const unfiltered = dashboardFiles().flatMap((f) => {
      const d = JSON.parse(readFileSync(f, 'utf8')) as {
        uid: string;
        panels: { title: string; targets: { expr: string }[] }[];
        templating: { list: { name: string; type: string }[] };
      };
      const variables = d.templating.list.filter((v) => v.type === 'query').map((v) => v.name);
      expect(variables.length).toBeGreaterThanOrEqual(1);
      return d.panels.flatMap((p) =>
        p.targets.flatMap((t) => {
          // The sampler's metrics are per process (it sees every orchestrator's conversations),
          // and a queue's serve no one orchestrator: no orchestrator label to filter on. Only
          // the queue's have a queue label.
          const processWide = t.expr.includes(semconv.METRIC_SAMPLER_DECISIONS);
          const perQueue = QUEUE_METRICS.some((m) => t.expr.includes(m));
          const applies = (v: string) =>
            v === 'orchestrator' ? !processWide && !perQueue : v === 'queue' ? perQueue : true;
          const missing = [
            ...variables.filter((v) => applies(v) && !t.expr.includes(`$${v}`)).map((v) => `$${v}`),
            ...(t.expr.includes('job="conversation-orchestrator"') ? [] : ['job']),
          ];
          return missing.length > 0 ? [`${d.uid} / ${p.title}: ${missing.join(', ')}`] : [];
        }),
      );
    });
    expect(unfiltered).toEqual([]);
  });

  it('latency panels ask for exemplars', () => {
    const exemplarPanels = dashboardFiles().flatMap((f) =>
      JSON.parse(readFileSync(f, 'utf8'))
        .panels.filter((p: { targets: { exemplar?: boolean }[] }) =>
          p.targets.some((t) => t.exemplar),
        )
        .map((p: { title: string }) => p.title),
    );
    expect(exemplarPanels.sort()).toEqual([
      'Dispatch latency p95 by responder',
      'Time to converge (p50 / p95 / p99)',
    ]);
  });

  it('provisions Prometheus (exemplars linked to Jaeger) and Jaeger with fixed uids, and the dashboards', () => {
    const ds = parse(readFileSync('grafana/provisioning/datasources/datasources.yaml', 'utf8')) as {
      datasources: {
        uid: string;
        type: string;
        url: string;
        jsonData?: { exemplarTraceIdDestinations?: unknown[] };
      }[];
    };
    const prometheus = ds.datasources.find((d) => d.type === 'prometheus');
    const jaeger = ds.datasources.find((d) => d.type === 'jaeger');
    expect(prometheus?.uid).toBe('prometheus');
    expect(jaeger?.uid).toBe('jaeger');
    expect(prometheus?.jsonData?.exemplarTraceIdDestinations).toEqual([
      { name: 'trace_id', datasourceUid: 'jaeger' },
    ]);
    const providers = parse(
      readFileSync('grafana/provisioning/dashboards/dashboards.yaml', 'utf8'),
    ) as {
      providers: { options: { path: string } }[];
    };
    expect(providers.providers[0]?.options.path).toBe('/var/lib/grafana/dashboards');
  });
});

describe('docker-compose.yml', () => {
  it('is valid for a real compose parser, with pinned images and the stack wired together', () => {
    const r = spawnSync('docker-compose', ['-f', 'docker-compose.yml', 'config'], {
      encoding: 'utf8',
    });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    const config = parse(r.stdout) as {
      services: Record<
        string,
        {
          image?: string;
          build?: unknown;
          deploy?: { replicas?: number };
          ports?: unknown[];
          command?: string[];
          volumes?: unknown[];
          environment?: Record<string, string>;
          stop_grace_period?: string;
        }
      >;
    };
    const { desks, jaeger, prometheus, grafana, alertmanager } = config.services;
    expect(desks?.build).toBeDefined();
    expect(desks?.deploy?.replicas).toBe(2);
    expect(desks?.environment).toMatchObject({
      HOST: '0.0.0.0',
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://jaeger:4318',
    });
    for (const s of [jaeger, prometheus, grafana, alertmanager])
      expect(s?.image).toMatch(/:[0-9v][\w.-]*$/);
    expect(alertmanager?.image).toMatch(/^prom\/alertmanager:v0\./);
    expect(JSON.stringify(alertmanager?.volumes)).toContain(
      'alertmanager/alertmanager.yml:/etc/alertmanager/alertmanager.yml:ro',
    );
    expect(jaeger?.image).toMatch(/^jaegertracing\/jaeger:2\./);
    const published = JSON.stringify(jaeger?.ports);
    expect(published).toContain('4318');
    expect(published).toContain('16686');
    expect(prometheus?.command).toContain('--enable-feature=exemplar-storage');
    expect(JSON.stringify(prometheus?.volumes)).toContain('/etc/prometheus/rules');
    expect(grafana?.environment).toMatchObject({
      GF_AUTH_ANONYMOUS_ENABLED: 'true',
      GF_AUTH_ANONYMOUS_ORG_ROLE: 'Viewer',
      GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH: '/var/lib/grafana/dashboards/overview.json',
    });
    // Fleet mode beside the demo: Redis with AOF, the producer, two workers draining on SIGTERM.
    const { redis, fleet, workers } = config.services;
    expect(redis?.image).toMatch(/^redis:\d+\.\d+\.\d+-alpine$/);
    expect(redis?.command?.slice(0, 3)).toEqual(['redis-server', '--appendonly', 'yes']);
    expect(fleet?.environment?.REDIS_URL).toBe('redis://redis:6379');
    expect(workers?.environment?.REDIS_URL).toBe('redis://redis:6379');
    expect(workers?.command).toEqual(['node', '--import', 'tsx', 'service/worker.ts']);
    expect(workers?.deploy?.replicas).toBe(2);
    // Longer than the worker's drain bound (WORKER_DRAIN_MS plus about 1 s).
    expect(durationSeconds(workers?.stop_grace_period ?? '0s')).toBeGreaterThan(
      WORKER_DRAIN_MS / 1000 + 1,
    );
    for (const path of [
      'Dockerfile',
      'prometheus/prometheus.yml',
      'grafana/provisioning',
      'grafana/dashboards/overview.json',
    ]) {
      expect(existsSync(path)).toBe(true);
    }
  });

  it('publishes every host port on 127.0.0.1 only: Grafana (anonymous), Prometheus, Alertmanager, Jaeger and OTLP', () => {
    const r = spawnSync('docker-compose', ['-f', 'docker-compose.yml', 'config'], {
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
    const { services } = parse(r.stdout) as {
      services: Record<string, { ports?: (string | { published?: number; host_ip?: string })[] }>;
    };
    // docker-compose writes a bound port as `host_ip:published:target/proto`, an unbound one as
    // `{ published, target }`; both forms are read, so an unbound port shows as `*:port`.
    const published = Object.entries(services).flatMap(([name, s]) =>
      (s.ports ?? []).map((p) =>
        typeof p === 'string'
          ? `${name} ${p.split(':').length === 3 ? p.split(':').slice(0, 2).join(':') : `*:${p.split(':')[0]}`}`
          : `${name} ${p.host_ip ?? '*'}:${p.published}`,
      ),
    );
    expect(published.sort()).toEqual([
      'alertmanager 127.0.0.1:9093',
      'desks 127.0.0.1:9464-9465',
      'fleet 127.0.0.1:9466',
      'grafana 127.0.0.1:3000',
      'jaeger 127.0.0.1:16686',
      'jaeger 127.0.0.1:4318',
      'prometheus 127.0.0.1:9090',
    ]);
  });

  it('gives every service a healthcheck and starts each after what it needs is healthy', () => {
    const r = spawnSync('docker-compose', ['-f', 'docker-compose.yml', 'config'], {
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
    const { services } = parse(r.stdout) as {
      services: Record<
        string,
        {
          healthcheck?: { test: string[]; interval: string; timeout: string; retries: number };
          depends_on?: Record<string, { condition: string }>;
        }
      >;
    };
    const missing = Object.entries(services)
      .filter(([, s]) => s.healthcheck?.test[0] !== 'CMD')
      .map(([name]) => name);
    expect(missing).toEqual([]);
    const dependencies = Object.fromEntries(
      Object.entries(services).map(([name, s]) => [
        name,
        Object.entries(s.depends_on ?? {})
          .map(([on, d]) => `${on}: ${d.condition}`)
          .sort(),
      ]),
    );
    expect(dependencies).toEqual({
      desks: ['jaeger: service_healthy'],
      jaeger: [],
      prometheus: ['alertmanager: service_healthy', 'desks: service_healthy'],
      alertmanager: ['alert-receiver: service_healthy'],
      'alert-receiver': [],
      grafana: ['jaeger: service_healthy', 'prometheus: service_healthy'],
      fleet: ['redis: service_healthy'],
      workers: ['redis: service_healthy'],
      redis: [],
    });
    // Each probe asks the service's own port, on its own health endpoint.
    const probe = (name: string) => services[name]?.healthcheck?.test.join(' ');
    expect(probe('desks')).toContain('http://127.0.0.1:9464/healthz');
    expect(probe('jaeger')).toContain('http://127.0.0.1:13133/status');
    expect(probe('prometheus')).toContain('http://127.0.0.1:9090/-/ready');
    expect(probe('grafana')).toContain('http://127.0.0.1:3000/api/health');
    expect(probe('alertmanager')).toContain('http://127.0.0.1:9093/-/ready');
    expect(probe('alert-receiver')).toContain('http://127.0.0.1:8080/healthz');
    expect(probe('fleet')).toContain('http://127.0.0.1:9464/healthz');
    expect(probe('redis')).toBe('CMD redis-cli ping');
    expect(probe('workers')).toContain("statSync('/tmp/worker-alive')");
  });

  it("scrapes the service by its compose name on its port, and the Dockerfile runs npm start's command", () => {
    const prom = parse(readFileSync('prometheus/prometheus.yml', 'utf8')) as {
      scrape_configs: { job_name: string; dns_sd_configs?: { names: string[]; port: number }[] }[];
    };
    const job = prom.scrape_configs.find((j) => j.job_name === 'conversation-orchestrator');
    // The single-process demo, the fleet's producer and each of its workers (WORKER_METRICS_PORT).
    expect(job?.dns_sd_configs?.[0]).toMatchObject({
      names: ['desks', 'fleet', 'workers'],
      port: 9464,
    });
    const compose = parse(readFileSync('docker-compose.yml', 'utf8')) as {
      services: Record<string, { environment?: Record<string, string>; expose?: string[] }>;
    };
    expect(compose.services.workers?.environment).toMatchObject({
      HOST: '0.0.0.0',
      WORKER_METRICS_PORT: '9464',
    });
    expect(compose.services.workers?.expose).toEqual(['9464']);
    const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: { start: string } };
    expect(readFileSync('Dockerfile', 'utf8')).toContain(
      `CMD ${JSON.stringify(pkg.scripts.start.split(' ')).replaceAll(',', ', ')}`,
    );
    const r = spawnSync('promtool', ['check', 'config', 'prometheus/prometheus.yml'], {
      encoding: 'utf8',
    });
    expect(r.status).toBe(0);
  });

  it("keeps Prometheus' samples at least as long as the longest range a rule reads", () => {
    const compose = parse(readFileSync('docker-compose.yml', 'utf8')) as {
      services: { prometheus: { command: string[] } };
    };
    const retention = compose.services.prometheus.command
      .filter((c) => c.startsWith('--storage.tsdb.retention.time='))
      .map((c) => c.slice('--storage.tsdb.retention.time='.length));
    expect(retention).toHaveLength(1);
    // Every range selector and subquery range of every rule: `[30d]`, `[1h:5m]`.
    const ranges = rules().flatMap((r) =>
      [...r.expr.matchAll(/\[(\d[\dywdhms]*)(?::[\dywdhms]*)?\]/g)].map((m) => m[1] as string),
    );
    const longest = Math.max(...ranges.map(durationSeconds));
    expect(longest).toBe(durationSeconds(DEFAULT_OPS_CONFIG.slos.convergence.period));
    expect(durationSeconds(retention[0] as string)).toBeGreaterThanOrEqual(longest);
  });

  it('sends alerts to the compose Alertmanager on its port', () => {
    const prom = parse(readFileSync('prometheus/prometheus.yml', 'utf8')) as {
      alerting: { alertmanagers: { static_configs: { targets: string[] }[] }[] };
    };
    expect(
      prom.alerting.alertmanagers.flatMap((a) => a.static_configs.flatMap((c) => c.targets)),
    ).toEqual(['alertmanager:9093']);
  });
});
