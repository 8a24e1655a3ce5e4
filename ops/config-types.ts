/**
 * The shapes of the ops bundle's configuration, one floor below everything that reads it: the
 * checks (ops/*-config.ts), the rules, the dashboards and the manifests import these types from
 * here, and ops/config.ts (the defaults and `defineOpsConfig`) re-exports them, so no module that
 * ops/config.ts imports has to import ops/config.ts back.
 */

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

/** An SLO's common part. */
export interface SloConfig {
  /**
   * The share of the SLO's events that must be good over `period`, in (0, 1). Its error budget
   * is `1 - objective`.
   */
  readonly objective: number;
  /**
   * The period the objective holds over (the error budget's window).
   * @default '30d'
   */
  readonly period: Duration;
}

export interface SlosConfig {
  /**
   * `convergence`: the share of conversations that end converged. The events are the
   * conversations that ended with any reason but `excludedReasons`; the good ones ended with
   * one of `goodReasons`; every other reason is bad.
   * @default { objective: 0.95, period: '30d', goodReasons: ['converged'], excludedReasons: ['aborted'] }
   */
  readonly convergence: SloConfig & {
    /**
     * The reasons that count as converged (built-in or in `customReasons`).
     * @default ['converged']
     */
    readonly goodReasons: readonly string[];
    /**
     * The reasons that count neither way: a caller's abort is not a failure of the system.
     * @default ['aborted']
     */
    readonly excludedReasons: readonly string[];
  };
  /**
   * `convergence_latency`: the share of the conversations that converged (ended with one of the
   * convergence SLO's `goodReasons`) within `thresholdSeconds`.
   * @default { objective: 0.99, period: '30d', thresholdSeconds: 5 }
   */
  readonly convergenceLatency: SloConfig & {
    /**
     * How long converging may take, in seconds: one of `conversationDurationBuckets`, since a
     * histogram counts only up to its bucket boundaries.
     * @default 5
     */
    readonly thresholdSeconds: number;
  };
}

/** One pair of windows of the multi-window, multi-burn-rate alerts. */
export interface BurnRateAlertConfig {
  /** `critical` pages someone, `warning` opens a ticket (Alertmanager routes by it). */
  readonly severity: 'critical' | 'warning';
  /** How many times faster than the objective allows the budget burns, at least, for the alert. */
  readonly burnRate: number;
  /** The window the burn rate must exceed `burnRate` over; within every SLO's period. */
  readonly longWindow: Duration;
  /** The window the burn must still hold over: shorter than `longWindow`. */
  readonly shortWindow: Duration;
  /** How long both must hold before the alert fires. */
  readonly for: Duration;
}

/** What tokens cost, per model (the `model` label of `orchestrator_tokens_total`). */
export interface PriceTable {
  /** The one currency of every price, an ISO 4217 code such as `USD` (a label on cost series). */
  readonly currency: string;
  /** Per model name: the price of a million input tokens and of a million output tokens. */
  readonly models: Readonly<
    Record<string, { readonly inputPerMillion: number; readonly outputPerMillion: number }>
  >;
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
   * The range of the rates and quantiles the recording rules and dashboards' summaries use.
   * @default '5m'
   */
  readonly rateWindow: Duration;
  /**
   * The range within which at least one dispatch counts as progress (stalled conversations).
   * @default '1m'
   */
  readonly dispatchWindow: Duration;
  /**
   * Events per second of an SLO (conversations that ended, or that converged for the latency
   * SLO), over an alert's long window, below which its burn-rate alerts stay quiet: with a
   * handful of conversations an hour, one failure is a large share and means little.
   * @default 0.01
   */
  readonly minTraffic: number;
  /**
   * The service level objectives. Each one's error ratio is recorded over every window of
   * `burnRateAlerts` and over its period, and alerted on when its budget burns too fast.
   */
  readonly slos: SlosConfig;
  /**
   * The multi-window, multi-burn-rate alerts of every SLO (Google's SRE workbook, "Alerting on
   * SLOs"): one alert rule per SLO and entry, firing when the error budget burns more than
   * `burnRate` times as fast as the objective allows over both `longWindow` and `shortWindow`
   * (the short window makes the alert stop soon after the burn does). The set of windows is the
   * set of recording rules.
   * @default page (critical) at 14.4x over 1h and 5m or 6x over 6h and 30m; ticket (warning) at 3x over 1d and 2h or 1x over 3d and 6h
   */
  readonly burnRateAlerts: readonly BurnRateAlertConfig[];
  /**
   * The bucket boundaries (seconds) of `orchestrator_conversation_duration_seconds`, as the
   * telemetry of the service is configured (`buckets.conversationDuration`): the latency SLO's
   * threshold must be one of them. A test keeps the default in step with the telemetry's
   * `DEFAULT_CONVERSATION_DURATION_BUCKETS`.
   * @default [0.0001, 0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600]
   */
  readonly conversationDurationBuckets: readonly number[];
  /**
   * The reasons your own termination policies end conversations with (beside the library's
   * built-in ones such as `converged` and `aborted`): the SLOs may name them.
   * @default []
   */
  readonly customReasons: readonly string[];
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
  /** `OrchestratorTokenBurn` (warning): an orchestrator spends tokens faster than a rate. */
  readonly tokenBurn: AlertConfig & {
    /**
     * Tokens per second (input and output, every responder and model of an orchestrator, over
     * `rateWindow`) above which the spending is too fast: set it from your budget.
     * @default 10000
     */
    readonly tokensPerSecond: number;
  };
  /**
   * `OrchestratorExcludedEndings` (critical): most conversations end with a reason the SLOs
   * exclude (`slos.convergence.excludedReasons`, `aborted` by default), which no SLO alert can
   * see: 100% of conversations aborted is otherwise no event at all.
   */
  readonly excludedEndings: AlertConfig & {
    /**
     * The share of the conversations ending over `window` that end with an excluded reason,
     * above which the alert fires (quiet below `minTraffic` conversations a second).
     * @default 0.5
     */
    readonly share: number;
    /**
     * The window the share is measured over.
     * @default '1h'
     */
    readonly window: Duration;
  };
  /**
   * `OrchestratorWedgedConversations` (critical): on one instance, a share of the conversations
   * started never end while the others go on (no `dispatchTimeoutMs`, a responder that never
   * answers): `in_progress` grows, and the stalled alert, which needs no dispatch at all, stays
   * quiet.
   */
  readonly wedgedConversations: AlertConfig & {
    /**
     * The growth of `orchestrator_conversations_in_progress` over `window`, as a share of the
     * conversations started in it, above which the alert fires. Steady traffic keeps it near 0.
     * @default 0.1
     */
    readonly share: number;
    /**
     * The window growth and starts are measured over: longer than your slowest healthy
     * conversation, or its start-up looks like a leak.
     * @default '1h'
     */
    readonly window: Duration;
  };
  /**
   * `OrchestratorRecoveryBacklog` (critical): the store holds running conversations whose lease
   * no worker holds (`orchestrator_conversations_unleased` above 0) for this long: nobody
   * recovers them.
   * @default { for: '10m' }
   */
  readonly recoveryBacklog: AlertConfig;
  /**
   * `OrchestratorStoreUnreadable` (warning): no worker's scrape-time read of a store answers
   * (`orchestrator_store_up` 0 on every worker) for this long: the store gauges are gone, and the
   * recovery backlog and suspension alerts cannot fire.
   * @default { for: '5m' }
   */
  readonly storeUnreadable: AlertConfig;
  /** `OrchestratorCheckpointFailures` (critical): checkpoint commits fail, for this long. */
  readonly checkpointFailures: AlertConfig;
  /** `OrchestratorLeaseConflicts` (warning): workers keep contesting conversations' leases. */
  readonly leaseConflicts: AlertConfig & {
    /**
     * Lease conflicts per second (over `rateWindow`) above which the alert fires. A crash
     * recovered, or a zombie refused, is one conflict now and then; a steady stream is two
     * workers fighting (a lease shorter than a commit's pause).
     * @default 0.1
     */
    readonly perSecond: number;
  };
  /** `OrchestratorSuspendedTooLong` (warning): a suspended conversation has waited too long. */
  readonly suspendedConversations: AlertConfig & {
    /**
     * How long a conversation may stay suspended (waiting for a person, an approval) before
     * someone should look: the age of the oldest one above it fires.
     * @default '7d'
     */
    readonly maxAge: Duration;
  };
  /** `OrchestratorQueueJobsStalled` (warning): BullMQ finds jobs stalled (a worker died or blocked). */
  readonly queueStalledJobs: AlertConfig;
  /** `OrchestratorQueueWaitTooLong` (warning): the oldest job of a BullMQ queue waits too long. */
  readonly queueWait: AlertConfig & {
    /**
     * How long a job may wait in its queue before a worker takes it.
     * @default '5m'
     */
    readonly maxWait: Duration;
  };
  /** `OrchestratorRunawayConversations` (warning): conversations spend too many tokens each. */
  readonly runawayConversations: AlertConfig & {
    /**
     * Tokens per conversation (`orchestrator_conversation_tokens`) that 95% of the conversations
     * ending over `rateWindow` must stay under. Quiet below `minTraffic` conversations a second.
     * @default 200000
     */
    readonly p95Tokens: number;
  };
  /**
   * Prices per model, to turn token rates into cost rates in recording rules
   * (`job_orchestrator_responder:orchestrator_cost:rate5m` …) and cost panels. Prices change
   * more often than deployments: they live here, not in the app. `null`: no cost rules.
   * @default null
   * @example { currency: 'USD', models: { 'gpt-4o': { inputPerMillion: 2.5, outputPerMillion: 10 } } }
   */
  readonly prices: PriceTable | null;
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
  /**
   * Fleet mode (kubernetes/fleet/): BullMQ worker replicas kept running whatever the queue (a
   * conversation resumed after a wait finds a worker at once).
   * @default 1
   */
  readonly minWorkers: number;
  /**
   * Fleet mode: the most worker replicas KEDA scales to.
   * @default 10
   */
  readonly maxWorkers: number;
  /**
   * Fleet mode: segments one worker runs at once (`--concurrency` of service/worker.ts).
   * @default 50
   */
  readonly workerConcurrency: number;
  /**
   * Fleet mode: waiting jobs per worker replica KEDA aims for (its redis scaler's `listLength`).
   * @default 100
   */
  readonly waitingJobsPerWorker: number;
  /**
   * Fleet mode: the Redis image of the demo's queue and store (pinned).
   * @default 'redis:7.2.5-alpine'
   */
  readonly redisImage: string;
}

/** Partial at every level: what `defineOpsConfig` accepts. */
export type OpsConfigInput = {
  readonly [K in keyof OpsConfig]?: K extends 'slos'
    ? { readonly [S in keyof SlosConfig]?: Partial<SlosConfig[S]> }
    : OpsConfig[K] extends readonly unknown[]
      ? OpsConfig[K]
      : OpsConfig[K] extends object
        ? Partial<OpsConfig[K]>
        : OpsConfig[K];
};
