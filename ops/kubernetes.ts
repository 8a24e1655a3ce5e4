/**
 * kubernetes/: the demo service for a cluster running the Prometheus Operator (for example the
 * kube-prometheus-stack), as typed models: the Deployment, its Service and PodDisruptionBudget, a
 * ServiceMonitor, a PrometheusRule holding the very rule groups of prometheus/rules/, and the
 * dashboards as a ConfigMap for Grafana's dashboard sidecar, tied together by a kustomization.
 */

import type { Dashboard } from '@grafana/grafana-foundation-sdk/dashboard';
import { PrometheusRule } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { Service } from 'kubernetes-models/v1/Service';
import type { OpsConfig } from './config-types.ts';
import { nodeContainer, nodePodSecurity, tmpVolume } from './kubernetes-pod.ts';
import type { Rules } from './rule-model.ts';
import {
  CONTAINER_NAME,
  PORT_NAME,
  parseSelector,
  SERVICE_NAME,
  scrapeLabels,
} from './selector.ts';

export { SERVICE_NAME };

const PORT = 9464;

/**
 * Why the probes wait as long as they do (Kubernetes' default timeout is 1 s). Measured on a
 * 2-core machine with a load average of 12: /healthz every 100 ms for 20 s at --rate 200
 * --concurrency 64 took p50 2.0 ms, p99 67 ms, max 70 ms idle; under the robustness tests'
 * hostile load (40 clients that never read, 8 sending 90 MB frames, 20 sending data, 4
 * pipelining 20,000 scrapes each) p50 4.4 ms, p99 105 ms, max 2.8 s; under the page test's
 * 1,000 conversations a second p50 5 ms, max 149 ms.
 */
const PROBE_TIMEOUTS_WHY =
  '/healthz measured under load: p99 105 ms, max 2.8 s (hostile clients, 2 busy cores). ' +
  'Liveness waits 5 s, 3 times (30 s of stall) before a restart, which would lose every ' +
  'conversation in flight; readiness waits 3 s, 3 times, so a stalled pod leaves the Service ' +
  'within ~15 s; startup waits 3 s per try for up to 60 s (tsx compiles at start).';

/** What every kubernetes-models model offers. */
export interface Manifest {
  toJSON(): unknown;
  validate(): void;
}

/** Every manifest, by file name under kubernetes/. */
export function kubernetesManifests(
  config: OpsConfig,
  rules: Rules,
  dashboards: Readonly<Record<string, Dashboard>>,
): Map<string, Manifest> {
  const k = config.kubernetes;
  const namespace = k.namespace;
  const { relabelings } = scrapeLabels(parseSelector(config.selector), namespace);
  const selector = { 'app.kubernetes.io/name': SERVICE_NAME };
  const labels = {
    ...selector,
    'app.kubernetes.io/component': 'demo-service',
    'app.kubernetes.io/part-of': 'conversation-orchestrator',
  };
  const healthz = { path: '/healthz', port: PORT_NAME };
  const fieldRef = (name: string, fieldPath: string) => ({
    name,
    valueFrom: { fieldRef: { fieldPath } },
  });

  const deployment = new Deployment({
    metadata: {
      name: SERVICE_NAME,
      namespace,
      labels,
      annotations: { 'conversation-orchestrator/probe-timeouts': PROBE_TIMEOUTS_WHY },
    },
    spec: {
      replicas: k.replicas,
      selector: { matchLabels: selector },
      template: {
        metadata: { labels },
        spec: {
          // The service shuts down within 10 s (it aborts in-flight conversations, flushes spans).
          terminationGracePeriodSeconds: 15,
          // The service never talks to the Kubernetes API: no token in the pod.
          automountServiceAccountToken: false,
          securityContext: nodePodSecurity(),
          // Replicas on different nodes where the cluster allows it.
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: 'kubernetes.io/hostname',
              whenUnsatisfiable: 'ScheduleAnyway',
              labelSelector: { matchLabels: selector },
            },
          ],
          containers: [
            {
              name: CONTAINER_NAME,
              image: k.image,
              ports: [{ name: PORT_NAME, containerPort: PORT, protocol: 'TCP' }],
              env: [
                { name: 'HOST', value: '0.0.0.0' },
                { name: 'PORT', value: String(PORT) },
                { name: 'NODE_ENV', value: 'production' },
                // The names the service answers for (a DNS rebinding guard; any other Host gets
                // 421): the Service's DNS names. Probes and Prometheus come by pod IP, which
                // always passes. Add your Ingress's host name here (or the cluster domain, if
                // it is not cluster.local).
                {
                  name: 'ALLOWED_HOSTS',
                  value: [
                    SERVICE_NAME,
                    `${SERVICE_NAME}.${namespace}`,
                    `${SERVICE_NAME}.${namespace}.svc`,
                    `${SERVICE_NAME}.${namespace}.svc.cluster.local`,
                    'localhost',
                  ].join(','),
                },
                // Traces over OTLP/HTTP, configured the standard way.
                { name: 'OTEL_EXPORTER_OTLP_ENDPOINT', value: k.otlpEndpoint },
                { name: 'OTEL_SERVICE_NAME', value: 'conversation-orchestrator-demo' },
                fieldRef('POD_NAME', 'metadata.name'),
                fieldRef('POD_NAMESPACE', 'metadata.namespace'),
                fieldRef('NODE_NAME', 'spec.nodeName'),
                {
                  name: 'OTEL_RESOURCE_ATTRIBUTES',
                  value:
                    'k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE),k8s.node.name=$(NODE_NAME)',
                },
              ],
              // Timeouts from /healthz measured under the service's load tests (see
              // PROBE_TIMEOUTS_WHY, also on the Deployment as an annotation).
              // Starting runs TypeScript through tsx: give it time before liveness counts.
              startupProbe: {
                httpGet: healthz,
                periodSeconds: 2,
                timeoutSeconds: 3,
                failureThreshold: 30,
              },
              // /healthz answers 503 while shutting down: the pod leaves the Service at once.
              readinessProbe: {
                httpGet: healthz,
                periodSeconds: 5,
                timeoutSeconds: 3,
                failureThreshold: 3,
              },
              livenessProbe: {
                httpGet: healthz,
                periodSeconds: 10,
                timeoutSeconds: 5,
                failureThreshold: 3,
              },
              ...nodeContainer(),
            },
          ],
          volumes: tmpVolume(),
        },
      },
    },
  });

  const service = new Service({
    metadata: { name: SERVICE_NAME, namespace, labels },
    spec: {
      selector,
      ports: [{ name: PORT_NAME, port: PORT, targetPort: PORT_NAME, protocol: 'TCP' }],
    },
  });

  const disruptionBudget = new PodDisruptionBudget({
    metadata: { name: SERVICE_NAME, namespace, labels },
    spec: { maxUnavailable: 1, selector: { matchLabels: selector } },
  });

  const serviceMonitor = new ServiceMonitor({
    metadata: { name: SERVICE_NAME, namespace, labels: { ...labels, ...k.prometheusSelector } },
    spec: {
      selector: { matchLabels: selector },
      endpoints: [
        {
          port: PORT_NAME,
          path: '/metrics',
          interval: '15s',
          scrapeTimeout: '10s',
          // The selector's `label="value"` matchers (a `job` other than the Service's name, an
          // `env`, …) as target labels, so the rules and dashboards select these targets
          // (defineOpsConfig refuses a selector the targets could not satisfy).
          ...(relabelings.length > 0 ? { relabelings: [...relabelings] } : {}),
        },
      ],
    },
  });

  const prometheusRule = new PrometheusRule({
    metadata: { name: SERVICE_NAME, namespace, labels: { ...labels, ...k.prometheusSelector } },
    // The same groups as prometheus/rules/orchestrator.rules.yml (a test compares them).
    spec: {
      groups: rules.groups.map((g) => ({ name: g.name, rules: [...g.rules] })),
    },
  });

  const dashboardsConfigMap = new ConfigMap({
    metadata: {
      name: `${SERVICE_NAME}-dashboards`,
      namespace,
      // The kube-prometheus-stack's Grafana sidecar loads ConfigMaps with this label (any value).
      labels: { ...labels, grafana_dashboard: '1' },
      // ... into this folder, where its `folderAnnotation` is set to `grafana_folder`.
      annotations: { grafana_folder: 'Conversation orchestrator' },
    },
    data: Object.fromEntries(
      Object.entries(dashboards).map(([file, d]) => [file, `${JSON.stringify(d, null, 2)}\n`]),
    ),
  });

  return new Map<string, Manifest>([
    ['namespace.yaml', new Namespace({ metadata: { name: namespace, labels } })],
    ['deployment.yaml', deployment],
    ['service.yaml', service],
    ['poddisruptionbudget.yaml', disruptionBudget],
    ['servicemonitor.yaml', serviceMonitor],
    ['prometheusrule.yaml', prometheusRule],
    ['dashboards-configmap.yaml', dashboardsConfigMap],
  ]);
}

/** kustomization.yaml: every manifest, in the order they apply. */
export function kustomization(files: readonly string[]): unknown {
  return {
    apiVersion: 'kustomize.config.k8s.io/v1beta1',
    kind: 'Kustomization',
    resources: [...files],
  };
}
