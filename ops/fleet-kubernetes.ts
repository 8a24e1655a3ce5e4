/**
 * kubernetes/fleet/: the demo in fleet mode, on top of kubernetes/ (its kustomization includes the
 * base): Redis for the queue and the store (a StatefulSet with AOF on a volume), the BullMQ worker
 * Deployment with a grace period above the worker's drain bound and a PodDisruptionBudget, a KEDA
 * ScaledObject scaling the workers on the queue's waiting jobs, a PodMonitor scraping each
 * worker's /metrics (as the rules' job), and a patch making the demo Deployment the producer
 * (REDIS_URL). A folder of its own: the base applies without KEDA.
 */
import { PodMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { Service } from 'kubernetes-models/v1/Service';
import { DEMO_QUEUE, WORKER_DRAIN_MS } from '../service/fleet/worker-names.ts';
import type { OpsConfig } from './config-types.ts';
import { ScaledObject } from './keda.ts';
import type { Manifest } from './kubernetes.ts';
import {
  containerResources,
  nodeContainer,
  nodePodSecurity,
  restrictedContainer,
  tmpVolume,
} from './kubernetes-pod.ts';
import { PORT_NAME, parseSelector, SERVICE_NAME, scrapeLabels } from './selector.ts';

export const WORKER_NAME = `${SERVICE_NAME}-worker`;
export const REDIS_NAME = `${SERVICE_NAME}-redis`;
const REDIS_PORT = 6379;
/** Each worker's /metrics (WORKER_METRICS_PORT), the demo service's port. */
const WORKER_METRICS_PORT = 9464;
/**
 * The worker pod's grace period: the drain (WORKER_DRAIN_MS, `close()` returns within it plus
 * about 1 s) and the store's close, with room to spare; Kubernetes' default is 30 s too.
 */
export const WORKER_GRACE_SECONDS = Math.ceil(WORKER_DRAIN_MS / 1000) + 20;

/** Every manifest of kubernetes/fleet/, by file name. */
export function fleetManifests(config: OpsConfig): Map<string, Manifest> {
  const k = config.kubernetes;
  const namespace = k.namespace;
  const part = { 'app.kubernetes.io/part-of': 'conversation-orchestrator' };
  const workerSelector = { 'app.kubernetes.io/name': WORKER_NAME };
  const workerLabels = { ...workerSelector, 'app.kubernetes.io/component': 'worker', ...part };
  const redisSelector = { 'app.kubernetes.io/name': REDIS_NAME };
  const redisLabels = { ...redisSelector, 'app.kubernetes.io/component': 'queue', ...part };
  const redisUrl = `redis://${REDIS_NAME}:${REDIS_PORT}`;
  const redisCli = { exec: { command: ['redis-cli', 'ping'] } };

  const redis = new StatefulSet({
    metadata: { name: REDIS_NAME, namespace, labels: redisLabels },
    spec: {
      serviceName: REDIS_NAME,
      replicas: 1,
      selector: { matchLabels: redisSelector },
      template: {
        metadata: { labels: redisLabels },
        spec: {
          automountServiceAccountToken: false,
          securityContext: { runAsNonRoot: true, runAsUser: 999, fsGroup: 999 },
          containers: [
            {
              name: 'redis',
              image: k.redisImage,
              // AOF on: a restarted Redis keeps every queued job and checkpoint (fsync each second;
              // `always` costs a disk write per commit, see docs/stores-network.md).
              args: ['--appendonly', 'yes', '--appendfsync', 'everysec', '--save', ''],
              ports: [{ name: 'redis', containerPort: REDIS_PORT }],
              readinessProbe: { ...redisCli, periodSeconds: 5, timeoutSeconds: 3 },
              livenessProbe: { ...redisCli, periodSeconds: 10, timeoutSeconds: 5 },
              resources: containerResources('512Mi'),
              securityContext: restrictedContainer(),
              volumeMounts: [{ name: 'data', mountPath: '/data' }],
            },
          ],
        },
      },
      volumeClaimTemplates: [
        {
          metadata: { name: 'data' },
          spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } },
        },
      ],
    },
  });
  const redisService = new Service({
    metadata: { name: REDIS_NAME, namespace, labels: redisLabels },
    spec: {
      selector: redisSelector,
      ports: [{ name: 'redis', port: REDIS_PORT, targetPort: 'redis', protocol: 'TCP' }],
    },
  });

  const worker = new Deployment({
    metadata: { name: WORKER_NAME, namespace, labels: workerLabels },
    spec: {
      // KEDA owns the count once the ScaledObject is applied; this is the first rollout's.
      replicas: k.minWorkers,
      selector: { matchLabels: workerSelector },
      template: {
        metadata: { labels: workerLabels },
        spec: {
          // SIGTERM drains: running segments stop at a commit point and go back to the queue.
          terminationGracePeriodSeconds: WORKER_GRACE_SECONDS,
          automountServiceAccountToken: false,
          securityContext: nodePodSecurity(),
          containers: [
            {
              name: 'worker',
              image: k.image,
              command: ['node', '--import', 'tsx', 'service/worker.ts'],
              env: [
                { name: 'REDIS_URL', value: redisUrl },
                { name: 'CONCURRENCY', value: String(k.workerConcurrency) },
                { name: 'WORKER_ID', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
                { name: 'NODE_ENV', value: 'production' },
                // Its /metrics on every interface of the pod, for the PodMonitor.
                { name: 'HOST', value: '0.0.0.0' },
                { name: 'WORKER_METRICS_PORT', value: String(WORKER_METRICS_PORT) },
              ],
              ports: [{ name: PORT_NAME, containerPort: WORKER_METRICS_PORT }],
              ...nodeContainer(),
            },
          ],
          volumes: tmpVolume(),
        },
      },
    },
  });
  const workerBudget = new PodDisruptionBudget({
    metadata: { name: WORKER_NAME, namespace, labels: workerLabels },
    // One worker drained at a time: its segments go to the others.
    spec: { maxUnavailable: 1, selector: { matchLabels: workerSelector } },
  });
  const scaler = new ScaledObject({
    metadata: { name: WORKER_NAME, namespace, labels: workerLabels },
    spec: {
      scaleTargetRef: { name: WORKER_NAME },
      pollingInterval: 15,
      cooldownPeriod: 300,
      minReplicaCount: k.minWorkers,
      maxReplicaCount: k.maxWorkers,
      triggers: [
        {
          type: 'redis',
          metadata: {
            address: `${REDIS_NAME}.${namespace}:${REDIS_PORT}`,
            // BullMQ's list of jobs waiting for a worker.
            listName: `bull:${DEMO_QUEUE}:wait`,
            listLength: String(k.waitingJobsPerWorker),
          },
        },
      ],
    },
  });

  const { relabelings } = scrapeLabels(parseSelector(config.selector), namespace);
  const podMonitor = new PodMonitor({
    metadata: {
      name: WORKER_NAME,
      namespace,
      labels: { ...workerLabels, ...k.prometheusSelector },
    },
    spec: {
      selector: { matchLabels: workerSelector },
      podMetricsEndpoints: [
        {
          port: PORT_NAME,
          path: '/metrics',
          interval: '15s',
          scrapeTimeout: '10s',
          // The workers' series are the service's job: the rules and dashboards select them.
          relabelings: relabelings.some((r) => r.targetLabel === 'job')
            ? [...relabelings]
            : [
                { action: 'replace', targetLabel: 'job', replacement: SERVICE_NAME },
                ...relabelings,
              ],
        },
      ],
    },
  });

  return new Map<string, Manifest>([
    ['redis-statefulset.yaml', redis],
    ['redis-service.yaml', redisService],
    ['worker-deployment.yaml', worker],
    ['worker-poddisruptionbudget.yaml', workerBudget],
    ['worker-scaledobject.yaml', scaler],
    ['worker-podmonitor.yaml', podMonitor],
  ]);
}

/** kubernetes/fleet/kustomization.yaml: the base, these manifests, the demo made the producer. */
export function fleetKustomization(files: readonly string[]): unknown {
  return {
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    resources: ['..', ...files],
    patches: [
      {
        target: { kind: 'Deployment', name: SERVICE_NAME },
        // A JSON 6902 patch, in YAML.
        patch: [
          '- op: add',
          '  path: /spec/template/spec/containers/0/env/-',
          `  value: { name: REDIS_URL, value: "redis://${REDIS_NAME}:${REDIS_PORT}" }`,
          '',
        ].join('\n'),
      },
    ],
  };
}
