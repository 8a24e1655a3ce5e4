/**
 * The ops bundle's one configuration, in the way monitoring mixins keep theirs: every selector,
 * threshold, `for:` duration and window the rules, dashboards and Kubernetes manifests use is one
 * commented value here. `npm run ops` renders the defaults into the committed files;
 * `npm run ops -- --config my-ops.ts --out my-ops/` renders a variant for your own config.
 */

import {
  METRIC_ONLY_LABELS,
  parseSelector,
  SelectorError,
  unreachableMatcher,
} from './selector.ts';

/**
 * A Prometheus duration: `30s`, `5m`, `1h`, `1h30m`. Units from `y` down to `ms`, each at most
 * once and in that order, and more than zero, as Prometheus parses them.
 */
export type Duration = string;

/** One alert's knobs. */
export interface AlertConfig {
  /**
   * How long the condition must hold before the alert fires.
   */
  readonly for: Duration;
}

export interface OpsConfig {
  /**
   * PromQL label matchers that select the service's series, as they appear inside `{...}`. Every
   * rule and dashboard query carries them, so a scrape job named differently needs only this.
   * @default 'job="conversation-orchestrator"'
   */
  readonly selector: string;
  /**
   * Labels kept beside `orchestrator` when rules aggregate the replicas of a service; alerts carry
   * them, and they name the recording rules' level (`job_orchestrator:...`). They must include
   * `job`: alertmanager/alertmanager.yml (static, not generated) inhibits on `equal: [job]`, so a
   * job that is down silences the alerts of that job only.
   * @default ['job']
   */
  readonly groupLabels: readonly string[];
  /**
   * The range of the rates and quantiles the alerts look at.
   * @default '5m'
   */
  readonly rateWindow: Duration;
  /**
   * The range within which at least one dispatch counts as progress (stalled conversations).
   * @default '1m'
   */
  readonly dispatchWindow: Duration;
  /**
   * Conversations ended per second below which the ratio alerts stay quiet (too little traffic
   * for a share to mean anything).
   * @default 0.01
   */
  readonly minTraffic: number;
  /** `OrchestratorSlowConvergence` (warning). */
  readonly slowConvergence: AlertConfig & {
    /**
     * p95 time to converge, in seconds, above which conversations count as slow.
     * @default 5
     */
    readonly p95Seconds: number;
  };
  /** `OrchestratorConvergenceFailures` (warning). */
  readonly convergenceFailures: AlertConfig & {
    /**
     * Share of conversations ending without converging (max dispatches, timeout, failure).
     * @default 0.25
     */
    readonly ratio: number;
  };
  /** `OrchestratorConversationErrors` (critical). */
  readonly conversationErrors: AlertConfig & {
    /**
     * Share of conversations failing (error, deadline, queue overflow).
     * @default 0.1
     */
    readonly ratio: number;
  };
  /** `OrchestratorStalledConversations` (critical): conversations in progress, no dispatch. */
  readonly stalledConversations: AlertConfig;
  /** `OrchestratorListenerErrors` (warning): any listener error, for this long. */
  readonly listenerErrors: AlertConfig;
  /** `OrchestratorTargetDown` (warning): the scrape of one instance fails. */
  readonly targetDown: AlertConfig;
  /**
   * `OrchestratorJobDown` (critical): no instance of a job can be scraped, or service discovery
   * finds none; it inhibits the job's other alerts.
   */
  readonly jobDown: AlertConfig;
  /**
   * Where `runbook.md` lives; each alert's `runbook_url` is this plus `#alertname` in lower case.
   * The default is a placeholder nobody hosts for you: set it to where you publish
   * `prometheus/runbook.md` (it ships in the npm package).
   * @default 'https://github.com/conversation-orchestrator/conversation-orchestrator/blob/main/prometheus/runbook.md'
   */
  readonly runbookUrl: string;
  /** The Kubernetes manifests (kubernetes/). */
  readonly kubernetes: KubernetesConfig;
}

export interface KubernetesConfig {
  /**
   * Namespace of every object.
   * @default 'conversation-orchestrator'
   */
  readonly namespace: string;
  /**
   * The demo service's image (built from the Dockerfile).
   * @default 'conversation-orchestrator-demo:0.1.0'
   */
  readonly image: string;
  /**
   * Replicas of the demo service.
   * @default 3
   */
  readonly replicas: number;
  /**
   * The label the kube-prometheus-stack's Prometheus selects ServiceMonitors and PrometheusRules
   * by (its Helm release name).
   * @default { release: 'kube-prometheus-stack' }
   */
  readonly prometheusSelector: Readonly<Record<string, string>>;
  /**
   * OTLP/HTTP endpoint the service exports traces to (`OTEL_EXPORTER_OTLP_ENDPOINT`).
   * @default 'http://jaeger-collector.observability:4318'
   */
  readonly otlpEndpoint: string;
}

/** Partial at every level: what `defineOpsConfig` accepts. */
export type OpsConfigInput = {
  readonly [K in keyof OpsConfig]?: OpsConfig[K] extends readonly unknown[]
    ? OpsConfig[K]
    : OpsConfig[K] extends object
      ? Partial<OpsConfig[K]>
      : OpsConfig[K];
};

export const DEFAULT_OPS_CONFIG: OpsConfig = {
  selector: 'job="conversation-orchestrator"',
  groupLabels: ['job'],
  rateWindow: '5m',
  dispatchWindow: '1m',
  minTraffic: 0.01,
  slowConvergence: { p95Seconds: 5, for: '10m' },
  convergenceFailures: { ratio: 0.25, for: '10m' },
  conversationErrors: { ratio: 0.1, for: '5m' },
  stalledConversations: { for: '5m' },
  listenerErrors: { for: '5m' },
  targetDown: { for: '2m' },
  jobDown: { for: '2m' },
  runbookUrl:
    'https://github.com/conversation-orchestrator/conversation-orchestrator/blob/main/prometheus/runbook.md',
  kubernetes: {
    namespace: 'conversation-orchestrator',
    image: 'conversation-orchestrator-demo:0.1.0',
    replicas: 3,
    prometheusSelector: { release: 'kube-prometheus-stack' },
    otlpEndpoint: 'http://jaeger-collector.observability:4318',
  },
};

export class OpsConfigError extends Error {
  override name = 'OpsConfigError';
}

function describe(value: unknown): string {
  return `\`${typeof value === 'string' ? value : JSON.stringify(value)}\` (${typeof value})`;
}

function expect(ok: boolean, what: string, expected: string, value: unknown): void {
  if (!ok)
    throw new OpsConfigError(`Expected \`${what}\` to be ${expected}, got ${describe(value)}`);
}

/** Labels the rules set or aggregate by themselves: a group label cannot be one of them. */
const RULE_LABELS = ['orchestrator', 'responder', 'reason', 'le', 'quantile'];

/** The options of one alert each. */
const ALERTS = [
  'slowConvergence',
  'convergenceFailures',
  'conversationErrors',
  'stalledConversations',
  'listenerErrors',
  'targetDown',
  'jobDown',
] as const;

/** The options that are objects of their own. */
const NESTED = [...ALERTS, 'kubernetes'] as const;

function unknownKeys(prefix: string, given: object, known: object): void {
  for (const key of Object.keys(given)) {
    if (!Object.hasOwn(known, key)) {
      throw new OpsConfigError(
        `Unknown option \`${prefix}${key}\`; expected one of ${Object.keys(known)
          .map((k) => `\`${prefix}${k}\``)
          .join(', ')}`,
      );
    }
  }
}

// Prometheus' own duration grammar (model.ParseDuration): each unit once, largest first.
const DURATION = /^(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
// One or more `label op "value"` matchers, comma-separated (values without unescaped quotes).
// A value holds no raw line break: PromQL strings cannot.
const MATCHERS =
  /^\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\\n\r]|\\.)*"(\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\\n\r]|\\.)*")*\s*$/;
/** A Kubernetes label: an optional DNS prefix, then a name of 1-63 characters; values like names or empty. */
const K8S_LABEL_KEY =
  /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const K8S_LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function duration(what: string, value: unknown): void {
  expect(
    typeof value === 'string' && value !== '' && DURATION.test(value) && /[1-9]/.test(value),
    what,
    'a Prometheus duration such as `5m` or `1h30m` (units from y to ms, each once, largest first, more than zero)',
    value,
  );
}

function ratio(what: string, value: unknown): void {
  expect(
    typeof value === 'number' && value > 0 && value < 1,
    what,
    'a ratio between 0 and 1',
    value,
  );
}

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
  expect(
    typeof input === 'object' && input !== null && !Array.isArray(input),
    'config',
    'an object',
    input,
  );
  // A misspelt key would otherwise be ignored in silence, leaving the default in place.
  unknownKeys('', input, d);
  for (const key of NESTED) {
    const value = input[key];
    if (value === undefined) continue;
    expect(
      typeof value === 'object' && value !== null && !Array.isArray(value),
      key,
      'an object',
      value,
    );
    unknownKeys(`${key}.`, value, d[key]);
  }
  const config: OpsConfig = {
    ...d,
    ...input,
    slowConvergence: { ...d.slowConvergence, ...input.slowConvergence },
    convergenceFailures: { ...d.convergenceFailures, ...input.convergenceFailures },
    conversationErrors: { ...d.conversationErrors, ...input.conversationErrors },
    stalledConversations: { ...d.stalledConversations, ...input.stalledConversations },
    listenerErrors: { ...d.listenerErrors, ...input.listenerErrors },
    targetDown: { ...d.targetDown, ...input.targetDown },
    jobDown: { ...d.jobDown, ...input.jobDown },
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
  expect(
    typeof config.slowConvergence.p95Seconds === 'number' &&
      Number.isFinite(config.slowConvergence.p95Seconds) &&
      config.slowConvergence.p95Seconds > 0,
    'slowConvergence.p95Seconds',
    'a positive number of seconds',
    config.slowConvergence.p95Seconds,
  );
  ratio('convergenceFailures.ratio', config.convergenceFailures.ratio);
  ratio('conversationErrors.ratio', config.conversationErrors.ratio);
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
  const k = config.kubernetes;
  expect(
    typeof k.namespace === 'string' && DNS_LABEL.test(k.namespace),
    'kubernetes.namespace',
    'a DNS label',
    k.namespace,
  );
  expect(
    typeof k.image === 'string' && /^\S+$/.test(k.image) && k.image !== '',
    'kubernetes.image',
    'an image reference',
    k.image,
  );
  expect(
    Number.isInteger(k.replicas) && k.replicas >= 1,
    'kubernetes.replicas',
    'a positive integer',
    k.replicas,
  );
  expect(
    typeof k.prometheusSelector === 'object' &&
      k.prometheusSelector !== null &&
      !Array.isArray(k.prometheusSelector) &&
      Object.entries(k.prometheusSelector).every(
        ([key, v]) => K8S_LABEL_KEY.test(key) && typeof v === 'string' && K8S_LABEL_VALUE.test(v),
      ),
    'kubernetes.prometheusSelector',
    'Kubernetes labels such as `{ release: "kube-prometheus-stack" }`',
    k.prometheusSelector,
  );
  expect(
    typeof k.otlpEndpoint === 'string' && /^https?:\/\/\S+$/.test(k.otlpEndpoint),
    'kubernetes.otlpEndpoint',
    'an http(s) URL',
    k.otlpEndpoint,
  );
  return config;
}
