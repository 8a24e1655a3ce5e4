/**
 * The ops bundle's one configuration, in the way monitoring mixins keep theirs: every selector,
 * threshold, `for:` duration and window the rules, dashboards and Kubernetes manifests use is one
 * commented value (its shape and documentation in ops/config-types.ts, its default here).
 * `npm run ops` renders the defaults into the committed files;
 * `npm run ops -- --config my-ops.ts --out my-ops/` renders a variant for your own config.
 */

import { describe, duration, expect, OpsConfigError, plainObject, unknownKeys } from './check.ts';
import type { OpsConfig, OpsConfigInput } from './config-types.ts';
import { checkDurable } from './durable-config.ts';
import { checkKubernetes } from './kubernetes-config.ts';
import {
  METRIC_ONLY_LABELS,
  parseSelector,
  RULE_LABELS,
  SelectorError,
  unreachableMatcher,
} from './selector.ts';
import { checkSlos } from './slo-config.ts';
import { checkUsage } from './usage-config.ts';

export type {
  AlertConfig,
  BurnRateAlertConfig,
  Duration,
  KubernetesConfig,
  OpsConfig,
  OpsConfigInput,
  PriceTable,
  SloConfig,
  SlosConfig,
} from './config-types.ts';
export { OpsConfigError };

export const DEFAULT_OPS_CONFIG: OpsConfig = {
  selector: 'job="conversation-orchestrator"',
  groupLabels: ['job'],
  rateWindow: '5m',
  dispatchWindow: '1m',
  minTraffic: 0.01,
  slos: {
    convergence: {
      objective: 0.95,
      period: '30d',
      goodReasons: ['converged'],
      excludedReasons: ['aborted'],
    },
    convergenceLatency: { objective: 0.99, period: '30d', thresholdSeconds: 5 },
  },
  // The SRE workbook's pairs: a page spends 2% of a 30-day budget in 1h (14.4x) or 5% in 6h (6x),
  // a ticket 10% in 1d (3x) or 10% in 3d (1x). `for:` damps a single evaluation's spike.
  burnRateAlerts: [
    { severity: 'critical', burnRate: 14.4, longWindow: '1h', shortWindow: '5m', for: '2m' },
    { severity: 'critical', burnRate: 6, longWindow: '6h', shortWindow: '30m', for: '15m' },
    { severity: 'warning', burnRate: 3, longWindow: '1d', shortWindow: '2h', for: '1h' },
    { severity: 'warning', burnRate: 1, longWindow: '3d', shortWindow: '6h', for: '3h' },
  ],
  // Written out rather than imported: this is what your service's telemetry uses, which may not
  // be the library's default (test/ops/config.test.ts keeps the two defaults in step).
  conversationDurationBuckets: [
    0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
  ],
  customReasons: [],
  stalledConversations: { for: '5m' },
  listenerErrors: { for: '5m' },
  targetDown: { for: '2m' },
  jobDown: { for: '2m' },
  tokenBurn: { tokensPerSecond: 10_000, for: '15m' },
  runawayConversations: { p95Tokens: 200_000, for: '15m' },
  excludedEndings: { share: 0.5, window: '1h', for: '15m' },
  wedgedConversations: { share: 0.1, window: '1h', for: '30m' },
  recoveryBacklog: { for: '10m' },
  storeUnreadable: { for: '5m' },
  checkpointFailures: { for: '5m' },
  leaseConflicts: { perSecond: 0.1, for: '15m' },
  suspendedConversations: { maxAge: '7d', for: '15m' },
  queueStalledJobs: { for: '5m' },
  queueWait: { maxWait: '5m', for: '5m' },
  prices: null,
  runbookUrl:
    'https://github.com/conversation-orchestrator/conversation-orchestrator/blob/main/prometheus/runbook.md',
  kubernetes: {
    namespace: 'conversation-orchestrator',
    image: 'conversation-orchestrator-demo:0.1.0',
    replicas: 3,
    prometheusSelector: { release: 'kube-prometheus-stack' },
    otlpEndpoint: 'http://jaeger-collector.observability:4318',
    minWorkers: 1,
    maxWorkers: 10,
    workerConcurrency: 50,
    waitingJobsPerWorker: 100,
    redisImage: 'redis:7.2.5-alpine',
  },
};

/** The options of one alert each. */
const ALERTS = [
  'stalledConversations',
  'listenerErrors',
  'targetDown',
  'jobDown',
  'tokenBurn',
  'runawayConversations',
  'excludedEndings',
  'wedgedConversations',
  'recoveryBacklog',
  'storeUnreadable',
  'checkpointFailures',
  'leaseConflicts',
  'suspendedConversations',
  'queueStalledJobs',
  'queueWait',
] as const;

/** The options that are objects of their own. */
const NESTED = [...ALERTS, 'slos', 'kubernetes'] as const;

/** The SLOs, by option name. */
const SLOS = ['convergence', 'convergenceLatency'] as const;

const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
// One or more `label op "value"` matchers, comma-separated (values without unescaped quotes).
// A value holds no raw line break: PromQL strings cannot.
const MATCHERS =
  /^\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\\n\r]|\\.)*"(\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\\n\r]|\\.)*")*\s*$/;
/** The selector's matchers: valid values, target labels only, and labels the manifests produce. */
function selector(config: OpsConfig): void {
  let matchers: ReturnType<typeof parseSelector>;
  try {
    matchers = parseSelector(config.selector);
  } catch (error) {
    if (!(error instanceof SelectorError)) throw error;
    throw new OpsConfigError(
      `Expected \`selector\` matcher ${error.message.slice('Expected '.length)}, got ${describe(error.matcher)}`,
    );
  }
  const metricOnly = matchers.find((m) => METRIC_ONLY_LABELS.includes(m.label));
  expect(
    metricOnly === undefined,
    'selector',
    `matchers on target labels only (it selects \`up{…}\` too, which has no ${METRIC_ONLY_LABELS.map((l) => `\`${l}\``).join(', ')})`,
    metricOnly?.text,
  );
  const namespace = config.kubernetes.namespace;
  const unreachable =
    typeof namespace === 'string' ? unreachableMatcher(matchers, namespace) : undefined;
  if (unreachable) {
    const produced = Object.entries(unreachable.labels)
      .map(([k, v]) => `${k}="${v}"`)
      .join(',');
    throw new OpsConfigError(
      `Expected \`selector\` matchers the Kubernetes ServiceMonitor's targets satisfy (they carry ${produced}, a per-replica \`instance\` and \`pod\`, and \`label="value"\` for each equality matcher), got ${describe(unreachable.matcher.text)}`,
    );
  }
}

/** The defaults with your changes, checked: a bad value throws with what was expected and what came. */
export function defineOpsConfig(input: OpsConfigInput = {}): OpsConfig {
  const d = DEFAULT_OPS_CONFIG;
  plainObject('config', input);
  // A misspelt key would otherwise be ignored in silence, leaving the default in place.
  unknownKeys('', input, Object.keys(d));
  for (const key of NESTED) {
    const value = input[key];
    if (value === undefined) continue;
    plainObject(key, value);
    unknownKeys(`${key}.`, value, Object.keys(d[key]));
  }
  for (const key of SLOS) {
    const value = input.slos?.[key];
    if (value === undefined) continue;
    plainObject(`slos.${key}`, value);
    unknownKeys(`slos.${key}.`, value, Object.keys(d.slos[key]));
  }
  const config: OpsConfig = {
    ...d,
    ...input,
    slos: {
      convergence: { ...d.slos.convergence, ...input.slos?.convergence },
      convergenceLatency: { ...d.slos.convergenceLatency, ...input.slos?.convergenceLatency },
    },
    stalledConversations: { ...d.stalledConversations, ...input.stalledConversations },
    listenerErrors: { ...d.listenerErrors, ...input.listenerErrors },
    targetDown: { ...d.targetDown, ...input.targetDown },
    jobDown: { ...d.jobDown, ...input.jobDown },
    tokenBurn: { ...d.tokenBurn, ...input.tokenBurn },
    runawayConversations: { ...d.runawayConversations, ...input.runawayConversations },
    excludedEndings: { ...d.excludedEndings, ...input.excludedEndings },
    wedgedConversations: { ...d.wedgedConversations, ...input.wedgedConversations },
    recoveryBacklog: { ...d.recoveryBacklog, ...input.recoveryBacklog },
    storeUnreadable: { ...d.storeUnreadable, ...input.storeUnreadable },
    checkpointFailures: { ...d.checkpointFailures, ...input.checkpointFailures },
    leaseConflicts: { ...d.leaseConflicts, ...input.leaseConflicts },
    suspendedConversations: { ...d.suspendedConversations, ...input.suspendedConversations },
    queueStalledJobs: { ...d.queueStalledJobs, ...input.queueStalledJobs },
    queueWait: { ...d.queueWait, ...input.queueWait },
    prices: input.prices === undefined ? d.prices : input.prices,
    kubernetes: { ...d.kubernetes, ...input.kubernetes },
  };
  expect(
    typeof config.selector === 'string' && MATCHERS.test(config.selector),
    'selector',
    'PromQL label matchers such as `job="conversation-orchestrator"`',
    config.selector,
  );
  selector(config);
  expect(
    Array.isArray(config.groupLabels) &&
      new Set(config.groupLabels).size === config.groupLabels.length &&
      config.groupLabels.every(
        (l) => typeof l === 'string' && LABEL.test(l) && !RULE_LABELS.includes(l),
      ),
    'groupLabels',
    `an array of distinct label names other than ${RULE_LABELS.map((l) => `\`${l}\``).join(', ')}`,
    config.groupLabels,
  );
  expect(
    config.groupLabels.includes('job'),
    'groupLabels',
    'an array that includes `job` (alertmanager.yml inhibits on `equal: [job]`)',
    config.groupLabels,
  );
  duration('rateWindow', config.rateWindow);
  duration('dispatchWindow', config.dispatchWindow);
  expect(
    typeof config.minTraffic === 'number' &&
      Number.isFinite(config.minTraffic) &&
      config.minTraffic >= 0,
    'minTraffic',
    'a non-negative number of conversations per second',
    config.minTraffic,
  );
  checkSlos(config);
  checkUsage(config);
  checkDurable(config);
  for (const alert of ALERTS) duration(`${alert}.for`, config[alert].for);
  let url: URL | undefined;
  try {
    url = new URL(config.runbookUrl);
  } catch {
    url = undefined;
  }
  expect(
    url !== undefined && (url.protocol === 'https:' || url.protocol === 'http:') && url.hash === '',
    'runbookUrl',
    'an http(s) URL without a #fragment',
    config.runbookUrl,
  );
  checkKubernetes(config);
  return config;
}
